"""The FPGA driver on DFL cards written from the kernel's ABI
(sidecar_simulator.dfl): discovery, function, compatibility, health."""

import os
import shutil

import fixtures

from sidecar import model
from sidecar.drivers import fpga
from sidecar.sources import dfl as dfl_source
from sidecar.sources import sysfs
from sidecar_simulator import dfl
from sidecar_simulator import faults
from sidecar_simulator import host as simulator
from sidecar_simulator import xrt
from tests.unit.sidecar import simhost

PF = '0000:81:00.0'
VF = '0000:81:00.1'
REGION_TRAIT = 'CUSTOM_FPGA_REGION_INTEL_' + simhost.COMPAT_ID.upper()
FUNCTION_TRAIT = ('CUSTOM_FPGA_FUNCTION_ID_INTEL_' +
                  simhost.FUNCTION_ID.upper())


class DflDiscoveryTest(simhost.SimHostTestCase):

    def _card(self, profile, sriov=False, afu_id=simhost.FUNCTION_ID,
              host=None):
        self.sim = dfl.DflHost(host)
        self.card = self.sim.add_card(profile, afu_id=afu_id, sriov=sriov,
                                      address=PF)
        self.sim.write(self.root)
        self.driver = fpga.FpgaDriver(self.conf,
                                      sysfs.SysfsSource(self.root))
        return {d.address: d for d in self.driver.discover()}

    def _expected(self, product_id, handle, traits):
        return model.Device(
            type='FPGA', vendor='8086', model=product_id, address=PF,
            std_board_info=(('class', '120000'),
                            ('product_id', product_id)),
            driver_name='intel', deployables=(model.Deployable(
                name=handle, resource_class='FPGA', num_accelerators=1,
                traits=traits,
                attach_handles=(model.AttachHandle('PCI', handle),),
                driver_name='intel'),))

    def test_cards_without_sriov(self):
        for profile, product_id in (('pac-a10', '09c4'), ('d5005', '0b2b'),
                                    ('n3000', '0b30'), ('n6000', 'bcce')):
            self.root = self.useFixture(fixtures.TempDir()).path
            self.config.config(sysfs_root=self.root, group='sidecar')
            devices = self._card(profile)
            traits = (FUNCTION_TRAIT, 'CUSTOM_FPGA_INTEL', REGION_TRAIT,
                      'OWNER_CYBORG')
            self.assertEqual({PF: self._expected(product_id, PF, traits)},
                             devices, profile)
            self.assertEqual(simhost.FUNCTION_ID,
                             self.driver.loaded_function(PF))
        self.assertEqual([], self.warnings())

    def test_card_with_sriov_after_port_release(self):
        # Before: the base regions of PF and VF and the FME's PR region
        # all led to this card, and it was skipped with "several regions
        # (region0, region1, region2) and not one per VF".
        devices = self._card('n6000', sriov=True)
        self.assertEqual({PF: self._expected(
            'bcce', VF, (FUNCTION_TRAIT, 'CUSTOM_FPGA_INTEL', REGION_TRAIT,
                         'OWNER_CYBORG'))}, devices)
        self.assertEqual([], self.warnings())
        self.assertTrue(self.driver.claims(VF))
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(VF))

    def test_ports_released_to_vfs(self):
        """A card with 3 ports, each released to a VF: one deployable per
        VF, each with its own port's function, read on its own."""
        self.sim = dfl.DflHost()
        card = self.sim.add_card('n6000', sriov=True, ports=3, address=PF,
                                 afu_id=[simhost.FUNCTION_ID, None, None])
        self.sim.write(self.root)
        self.driver = fpga.FpgaDriver(self.conf,
                                      sysfs.SysfsSource(self.root))
        device, = self.driver.discover()
        vfs = ['0000:81:00.1', '0000:81:00.2', '0000:81:00.3']
        self.assertEqual(vfs, [d.name for d in device.deployables])
        self.assertEqual([[vf] for vf in vfs], [
            [h.address for h in d.attach_handles] for d in device.deployables])
        self.assertEqual([1, 1, 1], [d.num_accelerators
                                     for d in device.deployables])
        self.assertEqual([True, False, False], [
            FUNCTION_TRAIT in d.traits for d in device.deployables])
        self.assertEqual([True] * 3, [REGION_TRAIT in d.traits
                                      for d in device.deployables])
        self.sim.set_afu_id(card, simhost.FUNCTION_ID, 2)
        self.assertEqual([simhost.FUNCTION_ID, None, simhost.FUNCTION_ID],
                         [self.driver.loaded_function(vf) for vf in vfs])
        self.assertEqual([], self.warnings())

    def test_several_ports_on_the_pf_are_said(self):
        self.sim = dfl.DflHost()
        self.sim.add_card('d5005', ports=2, address=PF)
        self.sim.write(self.root)
        self.driver = fpga.FpgaDriver(self.conf,
                                      sysfs.SysfsSource(self.root))
        self.assertEqual([], self.driver.discover())
        self.assertOneWarning('Skipping FPGA 0000:81:00.0 (DFL dfl-fme.0)',
                              'several ports on one PCI function')

    def test_no_function_loaded_then_programmed(self):
        devices = self._card('d5005', afu_id=None)
        self.assertEqual(('CUSTOM_FPGA_INTEL', REGION_TRAIT, 'OWNER_CYBORG'),
                         devices[PF].deployables[0].traits)
        self.assertIsNone(self.driver.loaded_function(PF))
        self.sim.set_afu_id(self.card, simhost.FUNCTION_ID)
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(PF))

    def test_port_released_without_vfs_is_said(self):
        host = simulator.SimulatedHost()
        self._card('d5005', host=host)
        port = self.sim.port_dir(self.card)
        os.unlink(os.path.join(self.root, 'bus/platform/devices',
                               os.path.basename(port)))
        shutil.rmtree(port)
        self.assertEqual([], self.driver.discover())
        self.assertOneWarning('Skipping FPGA 0000:81:00.0 (DFL dfl-fme.0)',
                              'no port: released')

    def test_beside_an_alveo_card(self):
        host = simulator.SimulatedHost()
        xrt.XrtHost(host).add_card('u250', address='0000:82:00.0')
        devices = self._card('d5005', host=host)
        self.assertEqual([PF, '0000:82:00.1'], sorted(devices))
        self.assertEqual(['0000:81:00.0'], [
            dep.name for dep in devices[PF].deployables])
        self.assertEqual([], self.warnings())

    def test_dfl_regions_are_not_generic_regions(self):
        self._card('n6000', sriov=True)
        self.assertEqual([], sysfs.fpga_regions(self.root))
        card, = dfl_source.cards(self.root).values()
        self.assertEqual(('dfl-fme.0', 1, [VF]),
                         (card.fme_name, len(card.pr_regions),
                          [p.address for p in card.ports]))


class DflHealthTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = dfl.DflHost()
        self.card = self.sim.add_card('n6000', afu_id=simhost.FUNCTION_ID,
                                      sriov=True)
        self.sim.write(self.root)
        self.driver = fpga.FpgaDriver(self.conf,
                                      sysfs.SysfsSource(self.root))
        self.device, = self.driver.discover()

    def _problems(self):
        observation = self.driver.health(self.device)
        return observation.problems, observation.busy

    def _scoped(self):
        return self.driver.health(self.device).scoped

    def test_manager_unknown_is_healthy(self):
        self.assertEqual(((), False), self._problems())

    def test_errors_name_their_file(self):
        self.sim.set_error(self.card, 'fme/catfatal_errors', '0x4')
        self.sim.set_error(self.card, 'port/errors', '0x10')
        # The card's error is the device's, the port's its deployable's.
        self.assertEqual((('dfl-fme.0/errors/catfatal_errors is 0x4',),
                          False), self._problems())
        self.assertEqual((('0000:81:00.1',
                           'dfl-port.1/errors/errors is 0x10'),),
                         self._scoped())

    def test_injected_errors_are_no_fault(self):
        self.sim.set_error(self.card, 'fme/inject_errors', '0x1')
        self.assertEqual(((), False), self._problems())

    def _manager_state(self, state):
        path = os.path.join(self.sim.fme_dir(self.card), 'dfl-fme-mgr.0',
                            'fpga_manager', 'fpga0', 'state')
        simulator._write(path, state + '\n')

    def test_manager_states(self):
        for state, expected in (
                ('operating', ((), False)), ('write', ((), True)),
                ('write complete error', (
                    ("FPGA manager fpga0 state is 'write complete error'",),
                    False))):
            self._manager_state(state)
            self.assertEqual(expected, self._problems(), state)

    def test_port_gone(self):
        shutil.rmtree(self.sim.port_dir(self.card))
        self.assertEqual(((), False), self._problems())
        self.assertEqual((('0000:81:00.1',
                           'the DFL port of 0000:81:00.1 is gone'),),
                         self._scoped())

    def test_errors_of_each_port_on_their_own(self):
        """A card with its two ports released to two VFs: an error of the
        second port is that port's, the first port's device is healthy."""
        host = simulator.SimulatedHost()
        host.add_fpga(num_vfs=2, address='0000:82:00.0')
        root = host.write(os.path.join(self.root, 'two-ports'))
        self.config.config(sysfs_root=root, group='sidecar')
        driver = fpga.FpgaDriver(self.conf, sysfs.SysfsSource(root))
        card, = driver.discover()
        self.assertEqual(['0000:82:00.1', '0000:82:00.2'],
                         [d.name for d in card.deployables])
        self.assertEqual((), driver.health(card).problems)
        faults.set_fpga_error(host, '0000:82:00.2', 'port/errors', '0x1')
        port = os.path.basename(host.dfl.port_dir(host.fpga_card(
            '0000:82:00.2'), 1))
        self.assertEqual((), driver.health(card).problems)
        self.assertEqual((('0000:82:00.2', '%s/errors/errors is 0x1'
                           % port),), driver.health(card).scoped)
