"""Admission and holds against the real cyborg-conductor and Placement.

A device held out of scheduling (new and not enabled yet, or disabled by
an operator) has its provider fully reserved (``reserved = total``); the
hold is admin state kept under ``[sidecar] state_path``: it survives a
restart of the sidecar, a rewrite of the inventory by cyborg-conductor,
Placement being down at start, and a corrupt state file is quarantined
(the device is then held until an operator enables it again).

The device is an Intel DFL card addressed by its PF; here it has one
port, released to its VF, whose provider (``<host>_<VF>``) has FPGA
total 1.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import fixtures  # noqa: E402

from sidecar.cmd import manage  # noqa: E402
from sidecar.state import holds  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_faults_processes as faults  # noqa: E402

NUM_VFS = 1


class AdmissionTestBase(faults.ProcessFaultBase):

    def setUp(self):
        super().setUp()
        self.state = self.useFixture(fixtures.TempDir()).path

    def start_host(self, admit='disabled', sidecar=True):
        self.extra = ('[sidecar]\nstate_path = %s\nadmit_new_devices = %s\n'
                      % (self.state, admit))
        self.start_accel_compute('compute1', num_pfs=1, num_vfs=NUM_VFS,
                                 extra_config=self.extra, sidecar=sidecar)
        (self.pf,) = self.pf_bdfs('compute1')
        # The card's one port: its provider is named after the VF.
        (self.name,) = self.fpga_providers('compute1', self.pf)

    def start_sidecar(self):
        """A sidecar for compute1 on the same state directory."""
        conn = self.computes['compute1'].driver._host.get_connection()
        self.sidecars['compute1'] = self.useFixture(
            sidecar_fixture.SidecarFixture(
                'compute1', self.hosts['compute1'],
                self.broker.transport_url, self.placement_url,
                lambda: conn, extra=self.extra,
                cyborg_url=self.cyborg.endpoint))
        return self.sidecars['compute1']

    def stop_sidecar(self):
        # The fixture's own cleanup stops it again at the end (a no-op).
        self.sidecars['compute1'].sidecar.stop()

    def restart_sidecar(self):
        self.stop_sidecar()
        return self.start_sidecar()

    def cli(self, *args):
        """Run nova-cyborg-sidecar-manage with the host's configuration
        against its running daemon; return its JSON output."""
        out, err = io.StringIO(), io.StringIO()
        code = manage.main(
            ['--config-file', self.sidecars['compute1'].config_path] +
            list(args) + ['-f', 'json'], stdout=out, stderr=err)
        self.assertEqual(0, code, err.getvalue())
        return json.loads(out.getvalue())

    @property
    def holds(self):
        return self.sidecars['compute1'].sidecar.holds

    def fpga_inventory(self):
        found = self.placement.get(
            '/resource_providers?name=%s' % self.name,
            version='1.14').body['resource_providers']
        if not found:
            return None
        return self.placement.get(
            '/resource_providers/%s/inventories' % found[0]['uuid'],
            version='1.26').body['inventories'].get('FPGA')

    def wait_reserved(self, reserved, total=NUM_VFS):
        def matches():
            inv = self.fpga_inventory()
            return inv and (inv['total'], inv['reserved']) == (total,
                                                               reserved)
        waits.wait_until(matches, '%s reserved %d of %d' % (
            self.name, reserved, total))


class AdmissionTest(AdmissionTestBase):

    def test_new_device_reserved_until_enabled(self):
        self.start_host(admit='disabled')
        self.wait_reserved(NUM_VFS)
        (listed,) = self.cli('device', 'list')
        self.assertEqual((self.pf, False, [holds.NEW]),
                         (listed['device'], listed['enabled'],
                          list(listed['held'])))
        self.assertEqual({self.name: {'total': NUM_VFS,
                                      'reserved': NUM_VFS}},
                         listed['reservation'])
        # Cyborg knows the device: it is reported, only not offered.
        self.assertIn(self.name, {d['name']
                                  for d in self.cyborg.list_deployables()})
        # The CLI answers once the daemon wrote Placement.
        enabled = self.cli('device', 'enable', self.pf)
        self.assertEqual({self.name: {'total': NUM_VFS, 'reserved': 0}},
                         enabled['reservation'])
        self.wait_reserved(0)
        # Enabled stays enabled after a restart.
        self.restart_sidecar()
        self.assertEqual({}, self.holds.reasons(self.pf))
        self.wait_reserved(0)

    def test_devices_in_service_at_upgrade_are_admitted(self):
        # An earlier release reported the device: its provider is in
        # Placement, and no holds.json exists yet.
        self.start_host(admit='disabled', sidecar=False)
        self.report_via_harness('compute1')
        waits.wait_until(self.fpga_inventory, 'the provider of %s' %
                         self.name)
        self.start_sidecar()
        self.assertEqual({}, self.holds.reasons(self.pf))
        self.assertTrue(self.holds.known(self.pf))
        self.wait_reserved(0)


class DisableTest(AdmissionTestBase):

    def test_disable_survives_conductor_rewrite_and_restart(self):
        self.start_host(admit='enabled')
        self.wait_reserved(0)
        disabled = self.cli('device', 'disable', self.name, '--reason',
                            'replacing a fan')
        self.assertEqual({holds.DISABLED: 'replacing a fan'},
                         disabled['held'])
        self.wait_reserved(NUM_VFS)
        # cyborg-conductor rewrites the inventory (without reserved) when
        # a report changes the deployable: here the harness's report (other
        # attributes), then the sidecar's own again.
        self.report_via_harness('compute1')
        self.sidecars['compute1'].sidecar.resync()
        self.sidecars['compute1'].cycle()
        self.wait_reserved(NUM_VFS)
        sidecar = self.restart_sidecar()
        self.assertEqual({holds.DISABLED: 'replacing a fan'},
                         self.holds.reasons(self.pf))
        sidecar.cycle()
        self.wait_reserved(NUM_VFS)

    def test_placement_down_at_restart_keeps_the_disable(self):
        self.start_host(admit='enabled')
        self.holds.disable(self.pf)
        self.sidecars['compute1'].cycle()
        self.wait_reserved(NUM_VFS)
        self.stop_sidecar()
        self.placement_down()
        sidecar = self.start_sidecar()
        self.assertFalse(sidecar.sidecar.converged)
        self.assertEqual({holds.DISABLED}, set(self.holds.reasons(self.pf)))
        self.placement_back()
        # Back: the next cycle resyncs; the device is still held.
        waits.wait_until(sidecar.sidecar.run_cycle, 'the sidecar converged')
        self.wait_reserved(NUM_VFS)

    def test_corrupt_journal_is_quarantined_and_the_card_given_back(self):
        # A sidecar killed mid-programming left its card fully reserved,
        # and its journal is corrupt: the job is lost. The file is kept
        # aside (before: silently ignored) and the reconciler gives the
        # card back.
        self.start_host(admit='enabled')
        self.wait_reserved(0)
        self.stop_sidecar()
        uuid = self.placement.get(
            '/resource_providers?name=%s' % self.name,
            version='1.14').body['resource_providers'][0]['uuid']
        url = '/resource_providers/%s/inventories' % uuid
        body = self.placement.get(url, version='1.26').body
        inventories = body['inventories']
        inventories['FPGA']['reserved'] = NUM_VFS
        self.placement.put(url, {
            'resource_provider_generation':
                body['resource_provider_generation'],
            'inventories': inventories}, version='1.26')
        self.wait_reserved(NUM_VFS)
        with open(os.path.join(self.state, 'programming.json'), 'w') as f:
            f.write('{"0000:')
        sidecar = self.start_sidecar()
        names = os.listdir(self.state)
        self.assertEqual(1, len([n for n in names if n.startswith(
            'programming.json.corrupt-')]), names)
        sidecar.cycle()
        self.wait_reserved(0)

    def test_corrupt_state_file_is_quarantined(self):
        with open(os.path.join(self.state, holds.FILE), 'w') as f:
            f.write('{"version": 1, "devices": {"0000:')
        self.start_host(admit='disabled')
        names = os.listdir(self.state)
        self.assertEqual(1, len([n for n in names if n.startswith(
            holds.FILE + '.corrupt-')]), names)
        # Fail closed: the admin state is lost, the device waits for an
        # operator (the upgrade rule does not admit it).
        self.assertEqual({holds.NEW}, set(self.holds.reasons(self.pf)))
        self.wait_reserved(NUM_VFS)
