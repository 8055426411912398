"""The FPGA driver on Alveo cards written from XRT's sources
(sidecar_simulator.xrt): the user PF reported with its xclbin, the
management PF never, and every shape it cannot support said once."""

import os

from sidecar import exception
from sidecar import model
from sidecar.drivers import fpga
from sidecar.sources import sysfs
from sidecar_simulator import dfl
from sidecar_simulator import host as simulator
from sidecar_simulator import xrt
from tests.unit.sidecar import simhost

MGMT = '0000:81:00.0'
USER = '0000:81:00.1'
SHELL = xrt.PROFILES['u250'][1]
FUNCTION_TRAIT = ('CUSTOM_FPGA_FUNCTION_ID_XILINX_' +
                  simhost.FUNCTION_ID.upper())
REGION_TRAIT = 'CUSTOM_FPGA_REGION_XILINX_' + SHELL.upper()


class XrtDiscoveryTest(simhost.SimHostTestCase):

    def _card(self, profile='u250', xclbin_uuid=simhost.FUNCTION_ID,
              host=None):
        self.sim = xrt.XrtHost(host)
        self.card = self.sim.add_card(profile, xclbin_uuid=xclbin_uuid,
                                      address=MGMT)
        self.sim.write(self.root)
        self.driver = fpga.FpgaDriver(self.conf,
                                      sysfs.SysfsSource(self.root))
        return self._discover()

    def _discover(self):
        return {d.address: d for d in self.driver.discover()}

    def test_user_pf_reported_with_its_xclbin(self):
        devices = self._card()
        self.assertEqual({USER: model.Device(
            type='FPGA', vendor='10ee', model='5005', address=USER,
            std_board_info=(('class', '120000'), ('mgmt_pf', MGMT),
                            ('product_id', '5005')),
            driver_name='xilinx', deployables=(model.Deployable(
                name=USER, resource_class='FPGA', num_accelerators=1,
                traits=(FUNCTION_TRAIT, REGION_TRAIT, 'CUSTOM_FPGA_XILINX',
                        'OWNER_CYBORG'),
                attach_handles=(model.AttachHandle('PCI', USER),),
                driver_name='xilinx'),))}, devices)
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(USER))
        self.assertEqual([], self.warnings())

    def test_management_pf_is_never_offered(self):
        self._card()
        self.assertTrue(self.driver.claims(USER))
        self.assertFalse(self.driver.claims(MGMT))
        handles = [h.address for d in self.driver.last
                   for dep in d.deployables for h in dep.attach_handles]
        self.assertEqual([USER], handles)

    def test_every_card(self):
        host = simulator.SimulatedHost()
        sim = xrt.XrtHost(host)
        for profile in sorted(xrt.PROFILES):
            sim.add_card(profile)
        sim.write(self.root)
        driver = fpga.FpgaDriver(self.conf, sysfs.SysfsSource(self.root))
        self.assertEqual(
            ['5001', '5005', '500d', '5021', '505d'],
            [d.model for d in sorted(driver.discover(),
                                     key=lambda d: d.address)])
        self.assertEqual([], self.warnings())

    def test_no_xclbin_then_programmed(self):
        devices = self._card(xclbin_uuid=None)
        self.assertEqual((REGION_TRAIT, 'CUSTOM_FPGA_XILINX', 'OWNER_CYBORG'),
                         devices[USER].deployables[0].traits)
        self.assertIsNone(self.driver.loaded_function(USER))
        self.sim.set_xclbin(self.card, simhost.FUNCTION_ID)
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(USER))
        self.assertIn(FUNCTION_TRAIT,
                      self._discover()[USER].deployables[0].traits)

    def test_given_to_a_guest_keeps_its_function(self):
        before = self._card()
        self.sim.bind_user(self.card, 'vfio-pci')
        after = self._discover()
        self.assertEqual([USER], list(after))
        self.assertIn(FUNCTION_TRAIT, after[USER].deployables[0].traits)
        self.assertEqual(before[USER].deployables[0].attach_handles,
                         after[USER].deployables[0].attach_handles)
        self.assertEqual([], self.warnings())

    def test_management_pf_alone_is_said_once(self):
        self._card()
        path = self.sim.host._dir(USER)
        os.unlink(os.path.join(self.root, 'bus/pci/devices', USER))
        os.unlink(os.path.join(self.root, 'bus/pci/drivers/xocl', USER))
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)
        self.assertEqual({}, self._discover())
        self.assertEqual({}, self._discover())
        self.assertOneWarning('Skipping Alveo card 0000:81:00.0',
                              'no user PF (xocl)')

    def test_user_pf_without_management_pf_is_said(self):
        self._card()
        os.unlink(self.sim.host._dir(MGMT, 'driver'))
        os.unlink(self.sim.host._dir(MGMT, 'mgmt_pf'))
        self.assertEqual({}, self._discover())
        self.assertOneWarning('Skipping Alveo card 0000:81:00.1',
                              'no management PF (xclmgmt)')

    def test_unreadable_xclbinuuid_is_said(self):
        self._card()
        simulator._write(self.sim.host._dir(USER, 'xclbinuuid'),
                         '<script>\n')
        # Read back after a programming: no function, said.
        self.assertIsNone(self.driver.loaded_function(USER))
        self.assertOneWarning('FPGA 0000:81:00.1 (Alveo user PF)',
                              "xclbinuuid is '<script>', not a UUID")
        # The next discovery leaves the card out, said once.
        self.assertEqual({}, self._discover())
        self.assertEqual({}, self._discover())
        self.assertEqual(2, len(self.warnings()))
        self.assertIn('Skipping Alveo card 0000:81:00.1 (user PF, xocl): '
                      "xclbinuuid is '<script>', not a UUID",
                      self.warnings()[1])
        self.assertRaises(exception.UnknownDevice,
                          self.driver.loaded_function, USER)

    def test_beside_a_dfl_card(self):
        host = simulator.SimulatedHost()
        dfl_host = dfl.DflHost(host)
        dfl_host.add_card('d5005', afu_id=simhost.FUNCTION_ID,
                          address='0000:82:00.0')
        dfl_host.write(self.root)
        devices = self._card(host=host)
        self.assertEqual({USER: 'xilinx', '0000:82:00.0': 'intel'},
                         {a: d.driver_name for a, d in devices.items()})
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function('0000:82:00.0'))
        self.assertEqual([], self.warnings())

    def test_beside_a_generic_region(self):
        host = simulator.SimulatedHost()
        host.add_pf(address='0000:82:00.0')
        self._card(host=host)
        # Written by hand: no mainline ABI gives such a region an afu_id;
        # it is skipped, said once, and the Alveo card still reported.
        region = os.path.join(host._dir('0000:82:00.0'),
                              'fpga_region/region9')
        os.makedirs(region)
        os.symlink('../..', os.path.join(region, 'device'))
        os.makedirs(os.path.join(self.root, 'class/fpga_region'),
                    exist_ok=True)
        os.symlink(region, os.path.join(self.root,
                                        'class/fpga_region/region9'))
        self.assertEqual([USER], sorted(self._discover()))
        self.assertOneWarning('region9', '0000:82:00.0')
        self.assertEqual([USER], sorted(self._discover()))
        self.assertEqual(1, len(self.warnings()))


class XrtHealthTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = xrt.XrtHost()
        self.card = self.sim.add_card('u280', address=MGMT)
        self.sim.write(self.root)
        self.driver = fpga.FpgaDriver(self.conf,
                                      sysfs.SysfsSource(self.root))
        self.device, = self.driver.discover()

    def _problems(self):
        return self.driver.health(self.device).problems

    def test_ready_is_healthy(self):
        self.assertEqual((), self._problems())

    def test_not_ready(self):
        self.sim.set_ready(self.card, False)
        self.assertEqual(("its user PF is not ready (xocl ready is '0x0')",),
                         self._problems())

    def test_given_to_a_guest_gives_no_verdict(self):
        self.sim.bind_user(self.card, 'vfio-pci')
        self.assertEqual((), self._problems())
