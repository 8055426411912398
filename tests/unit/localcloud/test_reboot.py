"""``localcloud host reboot``: the next start of the host's process finds
its domains shut off and its devices as a cold boot leaves them, and also
a guest's FPGA functions follow its domains in the local cloud."""

import json
import os

import fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
import testtools

from localcloud import compute_host
from localcloud import devices
from localcloud import reboot
from sidecar.sources import dfl as dfl_source
from tests.functional.harness import guest_kernel
from tests.unit.localcloud.test_compute_host import _connection
from tests.unit.localcloud.test_compute_host import DOMAIN
from tests.unit.localcloud.test_compute_host import UUID

PF, VF = '0000:81:00.0', '0000:81:00.1'


class _Layout:
    def __init__(self, root):
        self.root = root

    def path(self, *parts):
        return os.path.join(self.root, *parts)


class RebootTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.files = compute_host.DomainFiles(self.dir, 'compute1')
        for fixture in self.files.fixtures():
            self.useFixture(fixture)
        self.conn = _connection()
        self.layout = _Layout(self.useFixture(fixtures.TempDir()).path)
        os.makedirs(self.layout.path('hosts', 'compute1'))
        self.sys = self.layout.path('hosts', 'compute1', 'sys')
        self.host = devices.simulated_host(1, 4, 0, 0)
        self.host.write(self.sys)
        self.useFixture(guest_kernel.GuestKernel(lambda: self.conn,
                                                 self.host))

    def _define(self):
        domain = self.conn.defineXML(DOMAIN % (UUID[-4:], UUID))
        domain.createWithFlags(0)
        return domain

    def _state(self):
        with open(os.path.join(self.dir, UUID + '.state')) as f:
            return json.load(f)

    def _restart(self):
        conn = _connection()
        compute_host.DomainFiles(self.dir, 'compute1').restore(conn)
        return conn

    def _driver(self, address):
        return os.path.basename(os.readlink(os.path.join(
            self.sys, 'bus/pci/devices', address, 'driver')))

    def _apply(self):
        loaded = devices.simulated_host(1, 4, 0, 0).load_state(self.sys)
        return reboot.apply(self.layout, 'compute1', self.files, loaded,
                            self.sys)

    def test_a_guest_holds_its_vf_until_it_stops(self):
        domain = self._define()
        self.assertEqual('vfio-pci', self._driver(VF))
        self.assertEqual(3, len(dfl_source.cards(self.sys)[PF].ports))
        domain.destroy()
        self.assertEqual('dfl-pci', self._driver(VF))
        self.assertEqual(4, len(dfl_source.cards(self.sys)[PF].ports))

    def test_not_rebooted_changes_nothing(self):
        self._define()
        self.assertIsNone(self._apply())
        self.assertEqual(fakelibvirt.VIR_DOMAIN_RUNNING,
                         self._state()['state'])

    def test_reboot_shuts_domains_off_and_resets_devices(self):
        self._define()
        self.host.set_function_id(VF, 'ab' * 16)
        reboot.mark(self.layout, 'compute1')
        self.assertEqual([UUID], self._apply())
        self.assertFalse(os.path.exists(reboot.marker(self.layout,
                                                      'compute1')))
        self.assertEqual(reboot.SHUTOFF, self._state()['state'])
        self.assertEqual(fakelibvirt.VIR_DOMAIN_SHUTOFF, reboot.SHUTOFF)
        conn = self._restart()
        self.assertEqual(0, conn.lookupByUUIDString(
            UUID).isActive())
        # No VF, no mdev, no binding: the kernel's boot; the ports leave
        # the PF with the boot configuration's release.
        self.assertFalse(os.path.lexists(os.path.join(
            self.sys, 'bus/pci/devices', VF)))
        self.assertNotIn(PF, dfl_source.cards(self.sys))
        # The new process writes its description (SR-IOV on, ports
        # released): the VFs are back on dfl-pci, no function loaded.
        again = devices.simulated_host(1, 4, 0, 0).load_state(self.sys)
        again.write(self.sys)
        self.assertEqual('dfl-pci', self._driver(VF))
        card = dfl_source.cards(self.sys)[PF]
        self.assertEqual(sorted(again.functions[PF].virtfns.values()),
                         [p.address for p in card.ports])
        for port in card.ports:
            with open(os.path.join(port.path, 'afu_id')) as f:
                self.assertEqual('0' * 32, f.read().strip())
