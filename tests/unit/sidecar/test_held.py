"""A DFL card or port a guest holds (its function on vfio-pci, dfl-pci's
devices gone: sidecar_simulator.kernel) stays in the report as last seen,
through the driver, the health monitor and a restart."""

import json
import os

import fixtures

from sidecar.discovery import health
from sidecar.discovery import held
from sidecar.drivers import fpga
from sidecar.sources import sysfs
from sidecar_simulator import dfl
from sidecar_simulator import faults
from sidecar_simulator import host as simulator
from sidecar_simulator import kernel
from tests.unit.sidecar import simhost

PF = '0000:81:00.0'
VF0, VF1 = '0000:81:00.1', '0000:81:00.2'
FUNCTION_TRAIT = ('CUSTOM_FPGA_FUNCTION_ID_INTEL_' +
                  simhost.FUNCTION_ID.upper())


class HeldTest(simhost.SimHostTestCase):

    def _card(self, profile='d5005', sriov=False, ports=1):
        self.host = simulator.SimulatedHost()
        self.sim = dfl.DflHost(self.host)
        self.card = self.sim.add_card(profile, afu_id=simhost.FUNCTION_ID,
                                      sriov=sriov, ports=ports, address=PF)
        self.sim.write(self.root)
        self.driver = self._driver()

    def _driver(self):
        return fpga.FpgaDriver(self.conf, sysfs.SysfsSource(self.root))

    def _state_file(self):
        return os.path.join(self.conf.sidecar.state_path, held.FILE)

    def test_pf_held_keeps_the_card(self):
        self._card()
        [before] = self.driver.discover()
        self.assertIn(FUNCTION_TRAIT, before.deployables[0].traits)
        kernel.bind_vfio(self.host, PF)
        self.assertEqual([before], self.driver.discover())
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(PF))
        # Nothing of dfl-pci's to judge: no "FME is gone".
        observation = self.driver.health(before)
        self.assertEqual((), observation.problems)
        # Given back: read from sysfs again, the same.
        kernel.release(self.host, PF)
        self.assertEqual([before], self.driver.discover())
        self.assertEqual(frozenset(), self.driver._dfl_seen.held)

    def test_vf_held_keeps_its_port(self):
        self._card('n6000', sriov=True, ports=2)
        [before] = self.driver.discover()
        self.assertEqual([VF0, VF1], [d.name for d in before.deployables])
        kernel.bind_vfio(self.host, VF0)
        self.assertEqual([before], self.driver.discover())
        observation = self.driver.health(before)
        self.assertEqual((), observation.problems)
        kernel.bind_vfio(self.host, VF1)  # every port held: no warning
        self.assertEqual([before], self.driver.discover())
        self.assertEqual([], self.warnings())
        kernel.release(self.host, VF0)
        kernel.release(self.host, VF1)
        self.assertEqual([before], self.driver.discover())

    def test_a_vf_back_from_the_bus_on_vfio_pci_is_held(self):
        # Hot-removed under its guest, then rescanned still bound to
        # vfio-pci: its port is remembered across the removal.
        self._card('n6000', sriov=True, ports=2)
        [before] = self.driver.discover()
        kernel.bind_vfio(self.host, VF0)
        removed = faults.remove_vf(self.host, VF0)
        [during] = self.driver.discover()
        self.assertEqual([VF1], [d.name for d in during.deployables])
        faults.rescan(self.host, removed)
        self.assertEqual('vfio-pci', self.host.functions[VF0].driver)
        self.assertEqual([before], self.driver.discover())

    def test_restart_while_held(self):
        self._card()
        [before] = self.driver.discover()
        kernel.bind_vfio(self.host, PF)
        self.assertEqual([before], self._driver().discover())

    def test_a_port_released_without_vf_is_not_held(self):
        # The VF is on no driver only while it exists: SR-IOV disabled,
        # the function left the bus; its port is not held.
        self._card('n6000', sriov=True, ports=1)
        self.driver.discover()
        self.host.remove_function(VF0)
        self.assertEqual([], self.driver.discover())

    def test_pf_gone_from_the_bus_is_not_reported_by_the_driver(self):
        self._card()
        self.driver.discover()
        self.host.remove_function(PF)
        self.assertEqual([], self.driver.discover())
        # ... but kept, should it come back still on vfio-pci.
        self.assertIn(PF, json.load(open(self._state_file())))

    def test_another_card_in_the_slot_is_not_held(self):
        self._card()
        self.driver.discover()
        kernel.bind_vfio(self.host, PF)
        self.host.write_attr(PF, 'device', '0x0b30')
        self.assertEqual([], self.driver.discover())

    def test_read_only_writes_nothing(self):
        self._card()
        self.driver.read_only = True
        self.driver.discover()
        self.assertFalse(os.path.exists(self._state_file()))
        # ... and reads what the daemon kept.
        self.driver = self._driver()
        [before] = self.driver.discover()
        kernel.bind_vfio(self.host, PF)
        reader = self._driver()
        reader.read_only = True
        self.assertEqual([before], reader.discover())

    def test_a_corrupt_record_is_ignored(self):
        os.makedirs(os.path.dirname(self._state_file()), exist_ok=True)
        with open(self._state_file(), 'w') as f:
            json.dump({PF: {'address': PF, 'deployables': 'no'},
                       VF0: 'x'}, f)
        self._card()
        kernel.bind_vfio(self.host, PF)
        self.assertEqual([], self.driver.discover())
        self.assertIn('not a device record', self.log.output)

    def test_a_state_file_that_cannot_be_saved_is_said(self):
        self._card()
        self.useFixture(fixtures.MockPatch(
            'sidecar.state.cache.StateFile.save',
            side_effect=OSError(28, 'No space left on device')))
        [before] = self.driver.discover()
        self.assertIn('Cannot save', self.log.output)
        kernel.bind_vfio(self.host, PF)
        self.assertEqual([before], self.driver.discover())

    def test_monitor_does_not_forget_a_held_card(self):
        self._card()
        monitor = health.Monitor('host1', self.root,
                                 state_path=self.conf.sidecar.state_path)
        [before] = monitor.apply([(self.driver, d)
                                  for d in self.driver.discover()])
        kernel.bind_vfio(self.host, PF)
        for _cycle in range(2):
            found = [(self.driver, d) for d in self.driver.discover()]
            self.assertEqual([before], monitor.apply(found))
        self.assertEqual({}, monitor.unhealthy())
