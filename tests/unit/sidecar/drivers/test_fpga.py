import json
import os
import subprocess
import sys

import libvirt

from sidecar.drivers import fpga
from sidecar import exception
from sidecar import model
from sidecar import program
from sidecar.sources import libvirt as libvirt_source
from sidecar.sources import sysfs
from tests.unit.sidecar import simhost

INTEL = '0000:81:00.0'
INTEL_VFS = ['0000:81:00.1', '0000:81:00.2']
XILINX = '0000:81:01.0'
OTHER = '0000:81:02.0'
REGION_TRAIT = 'CUSTOM_FPGA_REGION_INTEL_' + simhost.COMPAT_ID.upper()
FUNCTION_TRAIT = ('CUSTOM_FPGA_FUNCTION_ID_INTEL_' +
                  simhost.FUNCTION_ID.upper())


class FpgaDriverTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = self.host(
            pfs=[{'num_vfs': 2, 'address': '0000:3b:00.0'}],
            fpgas=[{'num_vfs': 2, 'function_id': simhost.FUNCTION_ID,
                    'address': INTEL},
                   {'vendor_id': '10ee', 'product_id': '5001',
                    'compat_id': None},
                   {'vendor_id': '1d0f', 'product_id': 'f010'}])
        self.source = self.write(self.sim)
        self.driver = fpga.FpgaDriver(self.conf, self.source)

    def _devices(self):
        return {d.address: d for d in self.driver.discover()}

    def test_fpga_with_vfs_and_a_loaded_function(self):
        devices = self._devices()
        self.assertEqual([INTEL, XILINX, OTHER], sorted(devices))
        self.assertEqual(model.Device(
            type='FPGA', vendor='8086', model='0b30', address=INTEL,
            std_board_info=(('class', '120000'), ('product_id', '0b30')),
            driver_name='intel', deployables=(model.Deployable(
                name=INTEL, resource_class='FPGA', num_accelerators=2,
                traits=(FUNCTION_TRAIT, 'CUSTOM_FPGA_INTEL', REGION_TRAIT,
                        'OWNER_CYBORG'),
                attach_handles=tuple(model.AttachHandle('PCI', vf)
                                     for vf in INTEL_VFS),
                driver_name='intel'),)), devices[INTEL])
        self.assertEqual([], self.warnings())

    def test_fpga_without_vfs_or_function(self):
        devices = self._devices()
        xilinx = devices[XILINX].deployables[0]
        self.assertEqual(
            (1, (model.AttachHandle('PCI', XILINX),), 'xilinx',
             ('CUSTOM_FPGA_XILINX', 'OWNER_CYBORG')),
            (xilinx.num_accelerators, xilinx.attach_handles,
             xilinx.driver_name, xilinx.traits))
        other = devices[OTHER].deployables[0]
        self.assertEqual('1d0f', other.driver_name)
        self.assertEqual(('CUSTOM_FPGA_1D0F',
                          'CUSTOM_FPGA_REGION_1D0F_' +
                          simhost.COMPAT_ID.upper(), 'OWNER_CYBORG'),
                         other.traits)

    def test_claims(self):
        self._devices()
        for address in [INTEL] + INTEL_VFS + [XILINX, OTHER]:
            self.assertTrue(self.driver.claims(address))
        self.assertFalse(self.driver.claims('0000:81:03.0'))

    def test_function_changes(self):
        self._devices()
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(INTEL))
        new = 'AB' * 16
        self.sim.set_function_id(INTEL, new)
        self.assertEqual(new.lower(),
                         self.driver.loaded_function(INTEL_VFS[1]))
        traits = self._devices()[INTEL].deployables[0].traits
        self.assertIn('CUSTOM_FPGA_FUNCTION_ID_INTEL_' + new, traits)
        self.assertNotIn(FUNCTION_TRAIT, traits)
        self.sim.set_function_id(INTEL, None)
        self.assertIsNone(self.driver.loaded_function(INTEL))
        self.assertEqual(('CUSTOM_FPGA_INTEL', REGION_TRAIT, 'OWNER_CYBORG'),
                         self._devices()[INTEL].deployables[0].traits)

    def test_empty_afu_id(self):
        self.sim.write_attr(INTEL, 'fpga_region/region0/afu_id', '')
        self.assertNotIn(FUNCTION_TRAIT,
                         self._devices()[INTEL].deployables[0].traits)
        self.assertIsNone(self.driver.loaded_function(INTEL))

    def test_region_paths(self):
        self._devices()
        region = self.driver.region(INTEL_VFS[0])
        self.assertEqual(
            (os.path.join(self.root, 'class/fpga_region/region0'),
             os.path.join(self.root, 'class/fpga_manager/fpga0')),
            (region.path, region.manager))
        self.assertEqual(XILINX, self.driver.region(XILINX).address)
        for address in ('0000:81:03.0', '0000:5e:00.0'):
            self.assertRaises(exception.UnknownDevice, self.driver.region,
                              address)
            self.assertRaises(exception.UnknownDevice,
                              self.driver.loaded_function, address)

    def _assert_skipped(self, address, *fragments):
        devices = self._devices()
        self.assertNotIn(address, devices)
        self.assertEqual(2, len(devices))
        self.assertOneWarning(address, *fragments)

    def test_afu_id_garbage(self):
        self.sim.write_attr(INTEL, 'fpga_region/region0/afu_id', 'garbage')
        self._assert_skipped(INTEL, 'region0', 'afu_id', "'garbage'")
        self.assertRaises(exception.UnknownDevice,
                          self.driver.loaded_function, INTEL)

    def test_afu_id_garbage_after_discovery(self):
        self._devices()
        self.sim.write_attr(INTEL, 'fpga_region/region0/afu_id', 'garbage')
        self.assertIsNone(self.driver.loaded_function(INTEL))
        self.assertOneWarning(INTEL, "'garbage'")

    def test_afu_id_too_short(self):
        self.sim.write_attr(XILINX, 'fpga_region/region1/afu_id', 'abcd')
        self._assert_skipped(XILINX, 'afu_id', "'abcd'")

    def test_compat_id_garbage(self):
        self.sim.write_attr(OTHER, 'fpga_region/region2/compat_id', '0xnope')
        self._assert_skipped(OTHER, 'compat_id', "'0xnope'")

    def test_malformed_pci_function(self):
        self.sim.write_attr(XILINX, 'vendor', '10ee10ee')
        self._assert_skipped(XILINX, 'vendor id', "'10ee10ee'")

    def test_region_of_a_missing_function(self):
        self.sim.remove_attr(OTHER, 'vendor')
        os.unlink(os.path.join(self.root, 'bus/pci/devices', OTHER))
        self._assert_skipped(OTHER, 'no such PCI function')

    def test_region_of_a_vf(self):
        region = os.path.join(self.sim._dir(OTHER), 'fpga_region/region2')
        os.unlink(os.path.join(region, 'device'))
        os.symlink('../../../' + INTEL_VFS[0], os.path.join(region,
                                                            'device'))
        # region0 on the PF and region2 on a VF: which VF region0
        # serves is unknown, the card is left out.
        devices = self._devices()
        self.assertEqual([XILINX], sorted(devices))
        self.assertOneWarning(INTEL, 'several regions (region0, region2)',
                              'not one per VF')

    def test_two_regions_on_one_function(self):
        region = os.path.join(self.sim._dir(OTHER), 'fpga_region/region2')
        os.unlink(os.path.join(region, 'device'))
        os.symlink('../../../' + XILINX, os.path.join(region, 'device'))
        devices = self._devices()
        self.assertEqual([INTEL], sorted(devices))
        self.assertOneWarning(XILINX, 'several regions (region1, region2)')

    def test_region_without_pci_device(self):
        os.unlink(os.path.join(self.sim._dir(OTHER),
                               'fpga_region/region2/device'))
        self.assertEqual(2, len(self._devices()))
        self.assertOneWarning('region2', 'leads to no PCI function')

    def test_with_libvirt_source(self):
        libvirt.registerErrorHandler(lambda ctx, err: None, None)
        self.addCleanup(libvirt.registerErrorHandler, None, None)
        uri = self.sim.write_node_xml(os.path.join(self.root, 'node.xml'))
        driver = fpga.FpgaDriver(
            self.conf, libvirt_source.LibvirtSource.from_uri(uri, self.root))
        self.assertEqual(self.driver.discover(), driver.discover())


# Runs FPGAExtARQ._update_placement of the installed cyborg in a process of
# its own (cyborg's global options clash with Nova's, which other tests load)
# and prints the trait names it adds for each (function_id, driver_name).
CONDUCTOR = """
import json, sys
from unittest import mock
from cyborg.objects.extarq import fpga_ext_arq
result = []
for function_id, driver_name in json.loads(sys.argv[1]):
    placement = mock.Mock()
    with mock.patch.object(fpga_ext_arq.placement_client, 'PlacementClient',
                           return_value=placement):
        fpga_ext_arq.FPGAExtARQ._update_placement(
            mock.Mock(), None, function_id, driver_name)
    placement.delete_traits_with_prefixes.assert_called_once_with(
        None, mock.ANY, ['CUSTOM_FPGA_FUNCTION_ID'])
    (_rp, traits), _kw = placement.add_traits_to_rp.call_args
    result.append(traits)
print(json.dumps(result))
"""


class FunctionTraitTest(simhost.SimHostTestCase):
    """The function trait is the one cyborg-conductor adds on programming."""

    def _conductor_traits(self, cases):
        out = subprocess.run(
            [sys.executable, '-c', CONDUCTOR, json.dumps(cases)],
            check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    def test_same_as_conductor(self):
        cases = []
        reported = []
        for vendor_id, function_id in (('8086', simhost.FUNCTION_ID),
                                       ('10ee', 'F' * 32),
                                       ('1d0f', '0123456789abcdef' * 2)):
            root = os.path.join(self.root, vendor_id)
            self.host(fpgas=[{'vendor_id': vendor_id,
                              'function_id': function_id}]).write(root)
            self.config.config(sysfs_root=root, group='sidecar')
            driver = fpga.FpgaDriver(self.conf, sysfs.SysfsSource(root))
            deployable = driver.discover()[0].deployables[0]
            cases.append((function_id.lower(), deployable.driver_name))
            reported.append(deployable.traits)
        cases.append(('ab-cd', 'intel'))
        expected = self._conductor_traits(cases)
        for (function_id, driver_name), traits, [trait] in zip(
                cases, reported + [None], expected):
            self.assertEqual(trait, fpga.function_trait(driver_name,
                                                        function_id))
            if traits is None:
                continue
            self.assertIn(trait, traits)
            # The program manager looks for the same name.
            self.assertEqual(trait, program.function_trait(driver_name,
                                                           function_id))
        self.assertEqual(['CUSTOM_FPGA_FUNCTION_ID_INTEL_' +
                          simhost.FUNCTION_ID.upper()], expected[0])
