"""One device, one guest: the sidecar's watch against a real Nova server,
cyborg-conductor and Cyborg's API.

A server boots with a VF (its ARQ Bound, its domain holding the VF). A
stale definition of another guest holding the same VF (what a detach that
changed only the running guest left behind, issue 26) is reported within
one cycle: at ERROR, in ``device list`` and in ``guests.json``; once the
stale definition is gone the finding is resolved.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import os  # noqa: E402

from sidecar.discovery import guests  # noqa: E402
from tests.functional import test_faults_processes as processes  # noqa
from tests.functional import test_sidecar  # noqa: E402

STALE = 'c0ffee00-0000-4000-8000-0000000000aa'
STALE_XML = """<domain type='kvm'><name>instance-stale</name>
<uuid>%(uuid)s</uuid><memory>131072</memory><vcpu>1</vcpu>
<os><type arch='x86_64'>hvm</type></os><devices>
<hostdev mode='subsystem' type='pci' managed='yes'><source>
<address domain='0x%(domain)s' bus='0x%(bus)s' slot='0x%(slot)s'
 function='0x%(function)s'/></source></hostdev></devices></domain>"""


class GuestWatchTest(test_sidecar.SidecarTestBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1', num_pfs=1, num_vfs=4)
        (self.pf,) = self.pf_bdfs('compute1')
        self.sidecar = self.sidecars['compute1']
        self.conn = self.computes['compute1'].driver._host.get_connection()

    def counters(self):
        path = os.path.join(self.sidecar.conf.sidecar.state_path,
                            guests.FILE)
        with open(path) as f:
            return json.load(f)

    def listed(self):
        (row,) = [r for r in self.sidecar.sidecar.control._control.list({})
                  if r['device'] == self.pf]
        return row

    def errors(self):
        return [line for line in self.stdlog.logger.output.splitlines()
                if 'One device, one guest:' in line and 'resolved' not in
                line]

    def test_a_stale_definition_holding_a_servers_vf(self):
        _name, flavor = self.create_profile_flavor(processes.PROFILE)
        server = self.boot(flavor)
        (arq,) = self.cyborg.list_arqs(server['id'])
        vf = self.arq_bdf(arq)
        # The server with its ARQ: nothing to say.
        self.sidecar.cycle()
        self.assertEqual((0, 0, 0), tuple(self.counters()[k] for k in (
            'shared', 'no_arq', 'findings_total')))
        self.assertEqual([], self.errors())
        self.assertEqual([], self.listed()['conflicts'])
        self.assertIn(server['id'], ' '.join(self.listed()['in_use_by']))

        domain, bus, slot, function = vf.replace('.', ':').split(':')
        stale = self.conn.defineXML(STALE_XML % {
            'uuid': STALE, 'domain': domain, 'bus': bus, 'slot': slot,
            'function': function})
        # One cycle reports it.
        self.sidecar.cycle()
        counters = self.counters()
        self.assertEqual((1, 1, 2), (counters['shared'], counters['no_arq'],
                                     counters['findings_total']))
        shared, = [e for e in self.errors() if 'definitions of 2' in e]
        for fragment in (vf, server['id'], STALE, 'instance-stale',
                         'with an ARQ bound to it: %s' % server['id']):
            self.assertIn(fragment, shared)
        no_arq, = [e for e in self.errors() if 'holds no ARQ' in e]
        self.assertIn('instance-stale (server %s, shut off)' % STALE, no_arq)
        self.assertNotIn('(server %s' % server['id'], no_arq)
        conflicts = self.listed()['conflicts']
        self.assertEqual(2, len(conflicts))
        self.assertTrue(all(vf in c for c in conflicts))

        stale.undefine()
        self.sidecar.cycle()
        self.assertEqual((0, 0, 2), tuple(self.counters()[k] for k in (
            'shared', 'no_arq', 'findings_total')))
        self.assertEqual([], self.listed()['conflicts'])
        self.assertIn('One device, one guest: resolved',
                      self.stdlog.logger.output)
