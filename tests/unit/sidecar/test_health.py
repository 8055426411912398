"""Device health from the simulated sysfs tree: each fault, each way."""

import os

import fixtures

from sidecar.discovery import health
from sidecar.discovery import health_wiring
from sidecar.drivers import fpga
from sidecar.drivers import gpu
from sidecar.drivers import pci
from sidecar.state import holds as holds_mod
from sidecar_simulator import faults
from tests.unit.sidecar import simhost

FPGA = '0000:81:00.0'
FPGA_VF = '0000:81:00.1'
NIC = '0000:3b:00.0'
GPU = '0000:82:00.0'


class HealthTestCase(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = self.host(
            fpgas=[{'num_vfs': 2, 'address': FPGA,
                    'function_id': simhost.FUNCTION_ID}],
            pfs=[{'address': NIC, 'num_vfs': 2}],
            gpus=[{'address': GPU, 'mdev_types': [simhost.T4_1B]}])
        self.source = self.write(self.sim)
        self.config.config(group='pci', device_spec=[
            '{"address": "0000:3b:00.0"}'])
        self.config.config(group='gpu', device_selector=['10de:*'],
                           enabled_mdev_types=['nvidia-222'])
        self.drivers = [cls(self.conf, self.source) for cls in (
            fpga.FpgaDriver, pci.PciDriver, gpu.GpuDriver)]
        self.holds = holds_mod.Holds()
        self.users = {}
        self.state_path = self.useFixture(fixtures.TempDir()).path
        self.monitor = health.Monitor(
            'host1', self.root, holds=self.holds,
            state_path=self.state_path,
            users=lambda host, device: self.users.get(device.address, ()))

    def cycle(self):
        found = [(d, dev) for d in self.drivers for dev in d.discover()]
        return {dev.address: dev for dev in self.monitor.apply(found)}

    def unhealthy(self, devices):
        return sorted(a for a, d in devices.items()
                      if health.UNHEALTHY_TRAIT in d.deployables[0].traits)

    def assertHealthy(self):
        devices = self.cycle()
        self.assertEqual(sorted([FPGA, GPU, NIC]), sorted(devices))
        self.assertEqual([], self.unhealthy(devices))
        self.assertEqual({}, self.monitor.unhealthy())
        for address in devices:
            self.assertEqual({}, self.holds.reasons(address))
        return devices

    def assertUnhealthy(self, address, *fragments):
        devices = self.cycle()
        self.assertEqual([address], self.unhealthy(devices))
        reasons = self.holds.reasons(address)
        self.assertEqual(['unhealthy'], list(reasons))
        for fragment in fragments:
            self.assertIn(fragment, reasons['unhealthy'])
        return devices


class AerTest(HealthTestCase):

    def test_rising_fatal_count_then_reset(self):
        faults.set_aer(self.sim, NIC, fatal=0, nonfatal=0)
        self.assertHealthy()
        self.users[NIC] = ['c0ffee00-0000-4000-8000-000000000001']
        faults.set_aer(self.sim, NIC, fatal=2)
        self.assertUnhealthy(NIC, '2 fatal PCIe AER error(s) on '
                             '0000:3b:00.0')
        self.assertIn('Device 0000:3b:00.0 is unhealthy', self.log.output)
        self.assertIn('servers using it: '
                      'c0ffee00-0000-4000-8000-000000000001',
                      self.log.output)
        # Stays unhealthy while the count stays up.
        self.assertUnhealthy(NIC)
        # The device was reset: the kernel counts from 0 again.
        faults.set_aer(self.sim, NIC, fatal=0)
        self.assertHealthy()
        self.assertIn('Device 0000:3b:00.0 is healthy again',
                      self.log.output)

    def test_errors_from_before_the_first_look_are_history(self):
        faults.set_aer(self.sim, FPGA_VF, fatal=3)
        self.assertHealthy()
        faults.set_aer(self.sim, FPGA_VF, fatal=4)
        self.assertUnhealthy(FPGA, '1 fatal PCIe AER error(s) on '
                             '0000:81:00.1')

    def test_a_restart_does_not_forgive(self):
        faults.set_aer(self.sim, NIC, fatal=0)
        self.assertHealthy()
        faults.set_aer(self.sim, NIC, fatal=1)
        self.assertUnhealthy(NIC)
        self.monitor = health.Monitor('host1', self.root,
                                      holds=holds_mod.Holds(),
                                      state_path=self.state_path)
        self.holds = self.monitor.holds
        self.assertUnhealthy(NIC, 'fatal')

    def test_corrupt_baselines_are_quarantined(self):
        with open(os.path.join(self.state_path, health.FILE), 'w') as f:
            f.write('{not json')
        health.Monitor('host1', self.root, state_path=self.state_path)
        self.assertTrue(any(name.startswith(health.FILE + '.corrupt')
                            for name in os.listdir(self.state_path)))
        self.assertIn('ERROR', self.log.output)

    def test_nonfatal_errors_do_not_hold(self):
        faults.set_aer(self.sim, NIC, nonfatal=0)
        self.assertHealthy()
        faults.set_aer(self.sim, NIC, nonfatal=5)
        self.assertHealthy()

    def test_aer_count_parsing(self):
        self.assertEqual(7, health.aer_count('DLP 3\nTOTAL_ERR_FATAL 7\n',
                                             'TOTAL_ERR_FATAL'))
        self.assertEqual(4, health.aer_count('DLP 3\nTLP 1\n',
                                             'TOTAL_ERR_FATAL'))
        self.assertIsNone(health.aer_count('garbage', 'TOTAL_ERR_FATAL'))
        self.assertIsNone(health.aer_count(None, 'TOTAL_ERR_FATAL'))


class FpgaStateTest(HealthTestCase):

    def test_manager_error_then_operating(self):
        self.assertHealthy()
        faults.set_fpga_state(self.sim, FPGA, 'write error')
        self.assertUnhealthy(FPGA, "FPGA manager fpga0 state is "
                                   "'write error'")
        faults.set_fpga_state(self.sim, FPGA, 'operating')
        self.assertHealthy()

    def test_dfl_manager_states(self):
        # The DFL manager says 'unknown' until a programming
        # (dfl-fme-mgr.c fme_mgr_state); the sysfs path through a VF.
        for state in ('unknown', 'operating'):
            faults.set_fpga_state(self.sim, FPGA_VF, state)
            self.assertHealthy()
        faults.set_fpga_state(self.sim, FPGA, 'write complete error')
        self.assertUnhealthy(FPGA, "FPGA manager fpga0 state is "
                                   "'write complete error'")
        faults.set_fpga_state(self.sim, FPGA, 'unknown')
        self.assertHealthy()

    def test_dfl_error_files(self):
        # A port's error holds its deployable (here the card's only one,
        # on its VF), not the card.
        faults.set_fpga_error(self.sim, FPGA_VF, 'port/errors', '0x1')
        devices = self.cycle()
        self.assertEqual({}, self.holds.reasons(FPGA))
        key = health.deployable_key(FPGA, FPGA_VF)
        self.assertIn('errors/errors is 0x1',
                      self.holds.reasons(key)['unhealthy'])
        self.assertIn(health.UNHEALTHY_TRAIT,
                      devices[FPGA].deployables[0].traits)
        faults.set_fpga_error(self.sim, FPGA_VF, 'port/errors', '0x0')
        self.assertHealthy()
        self.assertEqual({}, self.holds.reasons(key))
        faults.set_fpga_error(self.sim, FPGA, 'fme/catfatal_errors', '0x4')
        self.assertUnhealthy(FPGA, 'dfl-fme.0/errors/catfatal_errors is '
                                   '0x4')

    def test_busy_keeps_the_verdict(self):
        faults.set_fpga_state(self.sim, FPGA, 'write')
        self.assertHealthy()
        faults.set_fpga_state(self.sim, FPGA, 'power off')
        self.assertUnhealthy(FPGA, 'power off')
        faults.set_fpga_state(self.sim, FPGA, 'write init')
        self.assertUnhealthy(FPGA, 'power off')
        faults.set_fpga_state(self.sim, FPGA, 'operating')
        self.assertHealthy()


class InventoryTest(HealthTestCase):

    def test_discover_goes_through_the_monitor(self):
        inventory = health_wiring.MonitoredInventory(self.drivers)
        inventory.monitor = self.monitor
        self.assertEqual([], [d for d in inventory.discover()
                              if health.UNHEALTHY_TRAIT in
                              d.deployables[0].traits])
        faults.set_fpga_state(self.sim, FPGA, 'write error')
        devices = {d.address: d for d in inventory.discover()}
        self.assertIn(health.UNHEALTHY_TRAIT,
                      devices[FPGA].deployables[0].traits)
        self.assertEqual(['unhealthy'], list(self.holds.reasons(FPGA)))
        # devices() is what was reported.
        self.assertEqual(devices[FPGA], inventory.device(FPGA))

    def test_devices_keep_a_vanished_vf(self):
        inventory = health_wiring.MonitoredInventory(self.drivers)
        inventory.monitor = self.monitor
        before = {d.address: d for d in inventory.discover()}
        faults.remove_vf(self.sim, VanishedFunctionTest.NIC_VF)
        inventory.discover()
        self.assertIn(VanishedFunctionTest.NIC_VF,
                      before[NIC].functions())
        self.assertEqual(before[NIC].functions(),
                         inventory.device(NIC).functions())


class GoneTest(HealthTestCase):

    def test_gone_then_back(self):
        before = self.assertHealthy()
        saved = faults.unplug(self.sim, FPGA)
        devices = self.assertUnhealthy(FPGA, 'gone from the host')
        # Reported as it was last seen, with the health trait.
        self.assertEqual(health.with_trait(before[FPGA]), devices[FPGA])
        faults.replug(self.sim, saved)
        self.assertEqual(before, self.assertHealthy())

    def test_left_out_but_present_is_not_kept(self):
        self.assertHealthy()
        self.config.config(group='pci', device_spec=[])
        self.drivers[1] = pci.PciDriver(self.conf, self.source)
        devices = self.cycle()
        self.assertEqual([FPGA, GPU], sorted(devices))
        self.assertEqual({}, self.monitor.unhealthy())


class VanishedFunctionTest(HealthTestCase):
    """A VF removed from the bus stays in the report, and the card is held
    ('device gone') until the VF is back."""

    NIC_VF = '0000:3b:00.2'

    def handles(self, device):
        return [h.address for h in device.deployables[0].attach_handles]

    def test_vf_gone_then_back(self):
        before = self.assertHealthy()
        self.users[NIC] = ['c0ffee00-0000-4000-8000-000000000001']
        removed = faults.remove_vf(self.sim, self.NIC_VF)
        # The kernel keeps the PF's virtfn link: only the VF is gone.
        self.assertFalse(os.path.exists(os.path.join(
            self.root, 'bus', 'pci', 'devices', self.NIC_VF)))
        self.assertNotIn(self.NIC_VF, [f.address for f in
                                       self.source.functions()])
        devices = self.assertUnhealthy(
            NIC, 'device gone: its function %s left the host' % self.NIC_VF)
        # Reported as it was, with the health trait: no handle dropped.
        self.assertEqual(health.with_trait(before[NIC]), devices[NIC])
        self.assertIn('Device %s is unhealthy: device gone' % NIC,
                      self.log.output)
        self.assertIn('servers using it: '
                      'c0ffee00-0000-4000-8000-000000000001',
                      self.log.output)
        # Still held at the next cycle.
        self.assertUnhealthy(NIC, 'device gone')
        faults.rescan(self.sim, removed)
        self.assertEqual(before, self.assertHealthy())
        self.assertIn('Device %s is healthy again' % NIC, self.log.output)

    def test_kept_across_a_restart(self):
        before = self.assertHealthy()
        faults.remove_vf(self.sim, self.NIC_VF)
        self.monitor = health.Monitor('host1', self.root,
                                      holds=holds_mod.Holds(),
                                      state_path=self.state_path)
        self.holds = self.monitor.holds
        devices = self.assertUnhealthy(NIC, 'device gone')
        self.assertEqual(self.handles(before[NIC]),
                         self.handles(devices[NIC]))
        self.assertEqual(2, devices[NIC].deployables[0].num_accelerators)

    def test_sriov_numvfs_lowered_is_not_kept(self):
        self.assertHealthy()
        # The PF no longer declares it (no virtfn link): reconfigured.
        self.sim.remove_function(self.NIC_VF)
        devices = self.cycle()
        self.assertEqual(['0000:3b:00.1'], self.handles(devices[NIC]))
        self.assertEqual({}, self.monitor.unhealthy())

    def test_left_out_on_purpose_is_forgotten(self):
        self.assertHealthy()
        self.config.config(group='pci', device_spec=[])
        self.drivers[1] = pci.PciDriver(self.conf, self.source)
        self.cycle()
        faults.remove_vf(self.sim, self.NIC_VF)
        self.config.config(group='pci', device_spec=[
            '{"address": "0000:3b:00.0"}'])
        self.drivers[1] = pci.PciDriver(self.conf, self.source)
        devices = self.cycle()
        self.assertEqual(['0000:3b:00.1'], self.handles(devices[NIC]))
        self.assertEqual({}, self.monitor.unhealthy())


class MdevParentTest(HealthTestCase):

    def test_mdev_types_gone_then_back(self):
        before = self.assertHealthy()
        self.assertEqual('VGPU', before[GPU].deployables[0].resource_class)
        faults.unload_mdev_driver(self.sim, GPU)
        devices = self.assertUnhealthy(GPU, 'mdev parent 0000:82:00.0 no '
                                            'longer offers')
        # Still the VGPU it was, not a whole PGPU.
        self.assertEqual(health.with_trait(before[GPU]), devices[GPU])
        faults.reload_mdev_driver(self.sim, GPU)
        self.assertEqual(before, self.assertHealthy())

    def test_parent_gone(self):
        self.assertHealthy()
        faults.unplug(self.sim, GPU)
        self.assertUnhealthy(GPU, 'gone from the host')


class ReportTest(HealthTestCase):

    def test_health_trait_is_one_key_added_at_the_end(self):
        from sidecar.report import reporter as report
        device = self.assertHealthy()[FPGA]
        before = report.to_wire('host1', [device])[0]
        after = report.to_wire('host1', [health.with_trait(device)])[0]
        keys = [(a.key, a.value) for a in
                before.deployable_list[0].attribute_list]
        self.assertEqual(
            keys + [('trait%d' % (len(keys) - 1), health.UNHEALTHY_TRAIT)],
            [(a.key, a.value) for a in
             after.deployable_list[0].attribute_list])
