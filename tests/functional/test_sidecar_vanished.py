"""A VF that vanishes under a server, against the real cyborg-conductor
and Placement.

cyborg-conductor 17 destroys an attach handle a report leaves out by its
deployable alone (its ``attach_info`` filter is ignored), so a report
without the vanished VF would delete the handle of another VF, maybe the
one a server holds, and keep the vanished one. The sidecar keeps reporting
the vanished VF and fences its card (``device gone``) until the VF is
back: Cyborg's handles stay those of sysfs plus the vanished one, and equal
sysfs again once it is back.

The card is an Intel DFL card whose two ports are released to its two
VFs (each VF a deployable with one attach handle); the vanished VF is the
one serving the server's port, and its port goes with it.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import os  # noqa: E402
import sqlite3  # noqa: E402

from sidecar_simulator import faults  # noqa: E402
from tests.functional import test_faults_processes as processes  # noqa
from tests.functional import test_sidecar_health  # noqa: E402

NUM_VFS = 2


class VanishedVfTest(test_sidecar_health.HealthTestBase):

    # One provider per port, FPGA total 1 each.
    rc, total = 'FPGA', 1

    def setUp(self):
        super().setUp()
        self.host = self.start_accel_compute('compute1', num_pfs=1,
                                             num_vfs=NUM_VFS)
        (self.pf,) = self.pf_bdfs('compute1')
        self.names = self.fpga_providers('compute1', self.pf)
        self.assertEqual(NUM_VFS, len(self.names))
        self.sidecar = self.sidecars['compute1']

    def handles(self):
        """``{VF address: (handle uuid, in_use)}`` in Cyborg's database."""
        db = sqlite3.connect(os.path.join(self.cyborg.base_dir,
                                          'cyborg.sqlite'))
        try:
            rows = db.execute('SELECT uuid, attach_info, in_use '
                              'FROM attach_handles').fetchall()
        finally:
            db.close()
        result = {}
        for uuid, info, in_use in rows:
            info = json.loads(info)
            bdf = base.canonical_bdf(*(info[k] for k in (
                'domain', 'bus', 'device', 'function')))
            self.assertNotIn(bdf, result, 'two handles of %s' % bdf)
            result[bdf] = (uuid, bool(in_use))
        return result

    def sysfs_vfs(self):
        return {vf for vf in self.host.functions[self.pf].virtfns.values()
                if os.path.isdir(os.path.join(
                    self.sidecar.sysfs_root, 'bus', 'pci', 'devices', vf))}

    def listed(self):
        """The card as ``nova-cyborg-sidecar-manage device list`` shows
        it."""
        (row,) = [r for r in self.sidecar.sidecar.control._control.list({})
                  if r['device'] == self.pf]
        return row

    def test_vf_gone_under_a_server_fences_the_card(self):
        _name, flavor = self.create_profile_flavor(processes.PROFILE)
        server = self.boot(flavor)
        (arq,) = self.cyborg.list_arqs(server['id'])
        vf = self.arq_bdf(arq)
        self.expect(False, 'healthy at start')
        before = self.handles()
        self.assertEqual(self.sysfs_vfs(), set(before))
        self.assertEqual((arq['attach_handle_uuid'], True), before[vf])

        removed = faults.remove_vf(self.host, vf)
        self.assertNotIn(vf, self.sysfs_vfs())
        self.expect(True, 'the VF gone')
        # No handle destroyed: the other VFs' and the server's are there.
        self.assertEqual(before, self.handles())
        line = self.stdlog.logger.output.split(
            'Device %s is unhealthy: ' % self.pf)[1].splitlines()[0]
        self.assertIn('device gone: its function %s left the host' % vf,
                      line)
        self.assertIn(server['id'], line)
        row = self.listed()
        self.assertEqual('unhealthy', row['health'])
        self.assertIn('device gone', row['held']['unhealthy'])
        # The server whose domain holds the vanished VF is named.
        self.assertIn('(server %s, running)' % server['id'],
                      row['in_use_by'][0])
        self.assertEqual({name: {'total': 1, 'reserved': 1}
                          for name in self.names}, row['reservation'])
        # The next cycles change nothing.
        self.expect(True, 'the VF still gone')
        self.assertEqual(before, self.handles())

        faults.rescan(self.host, removed)
        self.expect(False, 'the VF back')
        self.assertEqual(self.sysfs_vfs(), set(self.handles()))
        self.assertEqual(before, self.handles())
        self.assertEqual('ok', self.listed()['health'])
        # The card is offered again.
        second = self.boot(flavor)
        self.assert_accelerated(second, 1)
        self.assertEqual('ACTIVE',
                         self.api.get_server(server['id'])['status'])
