"""PCI health beyond a device's own counters, from a simulated tree: the
upstream port's AER counters and Surprise Down, the link, config space,
surprise removal, the Unknown state and QAT 4xxx state and services.

Each fault is injected into the tree, fences the device within one
cycle with the reason an operator reads in ``device list`` (the hold's
text), and goes when the fault goes.
"""

import os
from unittest import mock

import fixtures
import testtools

from sidecar import privileged

from sidecar.discovery import health
from sidecar.discovery import pci_health
from sidecar.drivers import gpu
from sidecar.drivers import pci
from sidecar.state import holds as holds_mod
from sidecar_simulator import faults
from sidecar_simulator import host as simulator
from sidecar_simulator import pci_health as sim_health
from tests.unit.sidecar import simhost
from tests.unit.sidecar import test_privileged

NIC = '0000:3b:00.0'
NIC_PORT = '0000:3a:00.0'
GPU = '0000:82:00.0'
GPU_PORT = '0000:80:01.0'
QAT = '0000:6b:00.0'


class PciHealthTestCase(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        # The QAT heartbeat is read through the privileged daemon.
        self.useFixture(test_privileged.InProcess())
        self.now = 1000000.0
        self.sim = self.host(
            pfs=[{'address': NIC, 'num_vfs': 2}],
            gpus=[{'address': GPU, 'mdev_types': [simhost.T4_1B]}])
        self.source = self.write(self.sim)
        sim_health.add_qat(self.sim, QAT, 'sym;asym', num_vfs=2)
        sim_health.add_port(self.sim, NIC_PORT, [NIC])
        sim_health.add_port(self.sim, GPU_PORT, [GPU], root_port=False)
        for address in (NIC, GPU, QAT):
            sim_health.set_link(self.sim, address)
            sim_health.set_config_alive(self.sim, address)
        self.config.config(group='pci', device_spec=[
            '{"address": "0000:3b:00.0"}', '{"vendor_id": "8086", '
            '"product_id": "4940", "resource_class": "QAT"}'])
        self.config.config(group='gpu', device_selector=['10de:*'],
                           enabled_mdev_types=['nvidia-222'])
        self.drivers = [cls(self.conf, self.source) for cls in (
            pci.PciDriver, gpu.GpuDriver)]
        self.holds = holds_mod.Holds()
        self.monitor = health.Monitor(
            'host1', self.root, holds=self.holds, unknown_after=600,
            state_path=self.useFixture(fixtures.TempDir()).path,
            clock=lambda: self.now)

    def cycle(self):
        found = [(d, dev) for d in self.drivers for dev in d.discover()]
        return {dev.address: dev for dev in self.monitor.apply(found)}

    def held(self, devices, trait=health.UNHEALTHY_TRAIT):
        return sorted(a for a, d in devices.items()
                      if trait in d.deployables[0].traits)

    def assertHealthy(self):
        devices = self.cycle()
        self.assertEqual(sorted([GPU, NIC, QAT]), sorted(devices))
        self.assertEqual([], self.held(devices))
        self.assertEqual([], self.held(devices, health.UNKNOWN_TRAIT))
        for address in devices:
            self.assertEqual({}, self.holds.reasons(address))
        return devices

    def assertFenced(self, address, reason, trait=health.UNHEALTHY_TRAIT):
        devices = self.cycle()
        self.assertEqual([address], self.held(devices, trait))
        self.assertEqual(['unhealthy'], list(self.holds.reasons(address)))
        self.assertIn(reason, self.holds.reasons(address)['unhealthy'])
        return devices


class UpstreamPortTest(PciHealthTestCase):

    def test_tree_has_the_port_above_the_device(self):
        self.assertEqual(
            (NIC_PORT, sim_health.port_dir(self.sim, NIC_PORT)),
            pci_health.upstream_port(self.root, NIC))
        vf = self.sim.functions[NIC].virtfns[0]
        self.assertEqual(NIC_PORT,
                         pci_health.upstream_port(self.root, vf)[0])
        self.assertIsNone(pci_health.upstream_port(self.root, QAT))

    def test_fatal_error_at_the_port_then_cleared(self):
        self.assertHealthy()
        sim_health.set_port_aer(self.sim, NIC_PORT, fatal=1,
                                rootport_fatal=0)
        self.assertFenced(NIC, '1 fatal PCIe AER error(s) at upstream port '
                               '0000:3a:00.0')
        self.assertIn('Device 0000:3b:00.0 is unhealthy', self.log.output)
        # The port reset: its counters start from 0 again.
        sim_health.set_port_aer(self.sim, NIC_PORT, fatal=0)
        self.assertHealthy()

    def test_surprise_down_at_a_switch_port(self):
        self.assertHealthy()
        sim_health.set_port_aer(self.sim, GPU_PORT, surprise_down=1)
        self.assertFenced(GPU, 'Surprise Down at upstream port '
                               '0000:80:01.0 (1): the link to the device '
                               'went down')

    def test_errors_reported_to_the_root_port(self):
        self.assertHealthy()
        sim_health.set_port_aer(self.sim, NIC_PORT, rootport_fatal=2)
        self.assertFenced(NIC, '2 fatal error message(s) reported to root '
                               'port 0000:3a:00.0')

    def test_port_counts_from_before_are_history(self):
        sim_health.set_port_aer(self.sim, NIC_PORT, fatal=3)
        self.assertHealthy()

    def test_device_back_on_the_bus_takes_new_port_baseline(self):
        self.assertHealthy()
        sim_health.set_port_aer(self.sim, NIC_PORT, surprise_down=1)
        self.assertFenced(NIC, 'Surprise Down')
        saved = faults.unplug(self.sim, NIC)
        self.assertFenced(NIC, 'device gone from the host (no 0000:3b:00.0 '
                               'in sysfs)')
        faults.replug(self.sim, saved)
        sim_health.set_link(self.sim, NIC)
        self.assertHealthy()
        self.assertIn('Device 0000:3b:00.0 is back', self.log.output)
        sim_health.set_port_aer(self.sim, NIC_PORT, surprise_down=2)
        self.assertFenced(NIC, 'Surprise Down at upstream port '
                               '0000:3a:00.0 (1)')

    def test_kernel_and_abi_document_names(self):
        text = 'Undefined 0\nData Link Protocol 0\nSurprise Down Error 4\n' \
               'TOTAL_ERR_FATAL 4\n'
        self.assertEqual({'Undefined': 0, 'Data Link Protocol': 0,
                          'Surprise Down Error': 4, 'TOTAL_ERR_FATAL': 4},
                         pci_health.aer_fields(text))


class LinkTest(PciHealthTestCase):

    def test_narrow_link_is_a_fault_for_every_device(self):
        self.assertHealthy()
        sim_health.set_link(self.sim, GPU, width=8)
        self.assertFenced(GPU, 'PCIe link degraded: width x8 of x16')
        sim_health.set_link(self.sim, GPU)
        self.assertHealthy()

    def test_slow_link_is_a_fault_but_not_for_a_display_controller(self):
        sim_health.set_link(self.sim, GPU, speed='2.5')
        self.assertHealthy()   # an idle GPU lowers its link speed
        sim_health.set_link(self.sim, NIC, speed='8.0')
        self.assertFenced(NIC, 'PCIe link degraded: speed 8 GT/s of 16')

    def test_exempt_classes_are_configured(self):
        self.config.config(group='health', link_speed_exempt_classes=[])
        sim_health.set_link(self.sim, GPU, speed='2.5')
        self.assertFenced(GPU, 'speed 2.5 GT/s of 16')

    def test_the_port_limits_what_the_link_can_be(self):
        # A Gen4 x16 card in a Gen3 x8 slot runs at what the slot can do.
        sim_health.add_port(self.sim, '0000:6a:00.0', [QAT], speed='8.0',
                            width=8)
        sim_health.set_link(self.sim, QAT, speed='8.0', width=8)
        self.assertHealthy()
        sim_health.set_link(self.sim, QAT, speed='8.0', width=4)
        self.assertFenced(QAT, 'width x4 of x8')

    def test_link_down(self):
        self.assertHealthy()
        sim_health.set_link(self.sim, NIC, speed=None)
        self.assertFenced(NIC, "PCIe link down (current_link_speed "
                               "'Unknown', current_link_width 0)")


class ConfigSpaceTest(PciHealthTestCase):

    def test_device_that_no_longer_answers(self):
        self.assertHealthy()
        sim_health.set_config_alive(self.sim, NIC, False)
        self.assertFenced(NIC, 'config space reads vendor id 0xffff: the '
                               'device no longer answers on the bus')
        sim_health.set_config_alive(self.sim, NIC, True)
        self.assertHealthy()

    def test_runtime_suspended_device_is_not_woken(self):
        # sysfs-devices-power: power/runtime_status; a config read would
        # resume it (pci-sysfs.c pci_config_pm_runtime_get).
        sim_health.set_config_alive(self.sim, GPU, False)
        status = self.sim._dir(GPU, 'power', 'runtime_status')
        os.makedirs(os.path.dirname(status), exist_ok=True)
        with open(status, 'w') as f:
            f.write('suspended\n')
        self.assertHealthy()
        with open(status, 'w') as f:
            f.write('active\n')
        self.assertFenced(GPU, 'config space reads vendor id 0xffff')


class UnknownTest(PciHealthTestCase):

    def unreadable(self, address):
        """The config file fails with an error other than ENOENT."""
        path = self.sim._dir(address, 'config')
        os.unlink(path)
        os.mkdir(path)

    def test_unread_health_is_unknown_after_the_configured_time(self):
        self.now += 60
        self.assertHealthy()
        self.unreadable(NIC)
        self.now += 60
        self.assertHealthy()   # its verdict is kept for now
        self.assertIn('Health of 0000:3b:00.0 could not be read',
                      self.log.output)
        self.now += 540
        devices = self.assertFenced(
            NIC, 'health unknown: no good reading for more than 600 s '
                 '(last good reading at 1970-01-12T13:47:40Z; now: ',
            trait=health.UNKNOWN_TRAIT)
        self.assertNotIn(health.UNHEALTHY_TRAIT,
                         devices[NIC].deployables[0].traits)
        self.assertIn('Device 0000:3b:00.0 is unknown', self.log.output)
        # Later cycles keep the hold as it is: one WARNING, not one a cycle.
        self.now += 60
        self.assertFenced(NIC, '13:47:40Z', trait=health.UNKNOWN_TRAIT)
        self.assertEqual(1, self.log.output.count('is held out of '
                                                  'scheduling: unhealthy'))
        os.rmdir(self.sim._dir(NIC, 'config'))
        sim_health.set_config_alive(self.sim, NIC)
        self.assertHealthy()
        self.assertIn('Device 0000:3b:00.0 is healthy again',
                      self.log.output)

    def test_a_fault_read_beside_an_unreadable_file_is_a_fault(self):
        self.assertHealthy()
        self.unreadable(NIC)
        sim_health.set_link(self.sim, NIC, width=1)
        self.assertFenced(NIC, 'width x1 of x16')

    def test_never_read_is_unknown_from_the_first_look(self):
        self.unreadable(NIC)
        self.assertHealthy()
        self.now += 600
        self.assertFenced(NIC, 'no good reading for more than 600 s (none '
                               'since it was first seen at '
                               '1970-01-12T13:46:40Z; now: ',
                          trait=health.UNKNOWN_TRAIT)

    def test_check_that_raises_is_unknown_in_time(self):
        self.assertHealthy()
        real = pci.PciDriver.health

        def health_check(driver, device):
            if device.address == NIC:
                raise RuntimeError('boom')
            return real(driver, device)
        self.useFixture(fixtures.MockPatchObject(
            pci.PciDriver, 'health', health_check))
        self.assertHealthy()
        self.assertIn('Health check of 0000:3b:00.0 failed', self.log.output)
        self.now += 601
        self.assertFenced(NIC, 'its health check failed: boom',
                          trait=health.UNKNOWN_TRAIT)


class QatTest(PciHealthTestCase):

    def qat_traits(self, devices):
        return sorted(t for t in devices[QAT].deployables[0].traits
                      if t.startswith(pci.QAT_TRAIT))

    def test_services_trait(self):
        devices = self.assertHealthy()
        self.assertEqual(['CUSTOM_QAT_SERVICE_SYM_ASYM'],
                         self.qat_traits(devices))
        self.assertEqual(2, devices[QAT].deployables[0].num_accelerators)
        sim_health.set_qat(self.sim, QAT, services='dc')
        self.assertEqual(['CUSTOM_QAT_SERVICE_DC'],
                         self.qat_traits(self.assertHealthy()))
        sim_health.set_qat(self.sim, QAT, services='asym;sym')
        self.assertEqual(['CUSTOM_QAT_SERVICE_SYM_ASYM'],
                         self.qat_traits(self.assertHealthy()))

    def test_bad_services_give_no_trait_and_a_warning(self):
        sim_health.set_qat(self.sim, QAT, services='sym;../x')
        self.assertEqual([], self.qat_traits(self.assertHealthy()))
        self.assertOneWarning('QAT device 0000:6b:00.0: qat/cfg_services',
                              'without a service trait')

    def test_trait_names(self):
        self.assertEqual('CUSTOM_QAT_SERVICE_SYM_DC',
                         pci.qat_trait('dc;sym'))
        self.assertEqual('CUSTOM_QAT_SERVICE_DCC', pci.qat_trait('dcc\n'))
        for bad in ('', ';', 'SYM', 'a b'):
            self.assertRaises(ValueError, pci.qat_trait, bad)

    def test_heartbeat_failure_is_a_fault(self):
        self.assertHealthy()
        sim_health.set_qat(self.sim, QAT, heartbeat='-1')
        self.assertFenced(QAT, "QAT heartbeat status is '-1': the device "
                               "is unresponsive")
        sim_health.set_qat(self.sim, QAT, heartbeat='0')
        self.assertHealthy()

    def test_heartbeat_read_through_the_privileged_daemon(self):
        # debugfs is root's only (mode 0700): never read in the daemon.
        with mock.patch.object(privileged, 'qat_heartbeat',
                               return_value=[('qat_4xxx_' + QAT, '-1')]) \
                as heartbeat:
            self.assertFenced(QAT, "QAT heartbeat status is '-1'")
        heartbeat.assert_called_with(self.root, QAT)

    def test_heartbeat_unreadable_keeps_the_verdict(self):
        with mock.patch.object(privileged, 'qat_heartbeat',
                               side_effect=OSError(13, 'Permission denied')):
            self.assertHealthy()

    def test_fatal_ras_count_rise_then_reset(self):
        sim_health.set_qat(self.sim, QAT, ras={'errors_fatal': 2})
        self.assertHealthy()  # counted before: the baseline
        sim_health.set_qat(self.sim, QAT, ras={'errors_fatal': 3})
        self.assertFenced(QAT, '1 fatal error(s) counted by QAT device %s '
                               '(qat_ras/errors_fatal)' % QAT)
        # echo 1 > qat_ras/reset_error_counters
        sim_health.set_qat(self.sim, QAT, ras={'errors_fatal': 0})
        self.assertHealthy()

    def test_nonfatal_ras_counts_are_logged(self):
        self.assertHealthy()
        sim_health.set_qat(self.sim, QAT, ras={'errors_nonfatal': 4,
                                               'errors_correctable': 1})
        self.assertHealthy()
        self.assertIn('QAT device %s: 4 new nonfatal error(s) '
                      '(qat_ras/errors_nonfatal)' % QAT, self.log.output)
        self.assertIn('1 new correctable error(s)', self.log.output)

    def test_420xx(self):
        qat2 = '0000:6c:00.0'
        sim_health.add_qat(self.sim, qat2, 'dc', num_vfs=2,
                           product_id='4946')
        self.config.config(group='pci', device_spec=[
            '{"vendor_id": "8086", "product_id": "4946", '
            '"resource_class": "QAT"}'])
        self.drivers = [pci.PciDriver(self.conf, self.source)]
        self.assertEqual('4947', self.sim.functions[
            self.sim.functions[qat2].virtfns[0]].product_id)
        devices = self.cycle()
        self.assertEqual(['CUSTOM_QAT_SERVICE_DC'], sorted(
            t for t in devices[qat2].deployables[0].traits
            if t.startswith(pci.QAT_TRAIT)))
        sim_health.set_qat(self.sim, qat2, heartbeat='-1')
        self.cycle()
        self.assertIn("QAT heartbeat status is '-1': the device is "
                      "unresponsive (qat_420xx_%s)" % qat2,
                      self.monitor.unhealthy()[qat2])

    def test_state_down_is_a_fault(self):
        self.assertHealthy()
        sim_health.set_qat(self.sim, QAT, state='down')
        self.assertFenced(QAT, "QAT device state is 'down', not up")
        sim_health.set_qat(self.sim, QAT, state='up')
        self.assertHealthy()


class SimulatorSourcesTest(PciHealthTestCase):

    def test_every_written_path_names_its_source(self):
        sim_health.set_port_aer(self.sim, NIC_PORT, fatal=1)
        paths = sim_health.written_paths(self.sim)
        for expected in ('aer_rootport_total_err_fatal', 'aer_dev_fatal',
                         'max_link_width', 'config', 'qat/cfg_services',
                         'heartbeat/status', 'qat_ras/errors_fatal'):
            self.assertTrue(any(p.endswith(expected) for p in paths),
                            expected)
        for path in paths:
            self.assertIn(sim_health.source_of(path), sim_health.SOURCES,
                          path)


class AddQatTest(testtools.TestCase):

    def test_next_free_address_when_none_is_given(self):
        root = self.useFixture(fixtures.TempDir()).path
        host = simulator.SimulatedHost()
        host.write(root)
        address = sim_health.add_qat(host, None, 'dc', num_vfs=1)
        self.assertEqual(simulator.DEFAULT_START, address)
        with open(os.path.join(root, 'bus', 'pci', 'devices', address,
                               'qat', 'cfg_services')) as f:
            self.assertEqual('dc', f.read().strip())
