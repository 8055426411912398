"""The FPGA driver on the host description's FPGAs (Intel DFL cards,
sidecar_simulator.dfl): what each card reports, its loaded functions,
the addresses it claims, and each malformed attribute skipped and said
once; a region of no DFL or Alveo card is skipped."""

import json
import os
import subprocess
import sys

import libvirt

from sidecar import exception
from sidecar import model
from sidecar.drivers import fpga
from sidecar.program import manager as program
from sidecar.sources import libvirt as libvirt_source
from sidecar.sources import sysfs
from sidecar_simulator import host as simulator
from sidecar_simulator import xrt
from tests.unit.sidecar import simhost

NIC = '0000:3b:00.0'
N6000 = '0000:81:00.0'
N6000_VFS = ['0000:81:00.1', '0000:81:00.2']
D5005 = '0000:82:00.0'
REGION_TRAIT = 'CUSTOM_FPGA_REGION_INTEL_' + simhost.COMPAT_ID.upper()
FUNCTION_TRAIT = ('CUSTOM_FPGA_FUNCTION_ID_INTEL_' +
                  simhost.FUNCTION_ID.upper())


class FpgaDriverTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = self.host(
            pfs=[{'num_vfs': 2, 'address': NIC}],
            fpgas=[{'num_vfs': 2, 'function_id': simhost.FUNCTION_ID,
                    'address': N6000},
                   {'address': D5005}])
        self.source = self.write(self.sim)
        self.driver = fpga.FpgaDriver(self.conf, self.source)

    def _devices(self):
        return {d.address: d for d in self.driver.discover()}

    def _deployable(self, name, traits):
        return model.Deployable(
            name=name, resource_class='FPGA', num_accelerators=1,
            traits=traits, attach_handles=(model.AttachHandle('PCI', name),),
            driver_name='intel')

    def test_card_with_vfs_and_a_loaded_function(self):
        devices = self._devices()
        self.assertEqual([N6000, D5005], sorted(devices))
        traits = (FUNCTION_TRAIT, 'CUSTOM_FPGA_INTEL', REGION_TRAIT,
                  'OWNER_CYBORG')
        self.assertEqual(model.Device(
            type='FPGA', vendor='8086', model='bcce', address=N6000,
            std_board_info=(('class', '120000'), ('product_id', 'bcce')),
            driver_name='intel', deployables=tuple(
                self._deployable(vf, traits) for vf in N6000_VFS)),
            devices[N6000])
        self.assertEqual([], self.warnings())

    def test_card_without_vfs_or_function(self):
        device = self._devices()[D5005]
        self.assertEqual(('8086', '0b2b', (self._deployable(
            D5005, ('CUSTOM_FPGA_INTEL', REGION_TRAIT, 'OWNER_CYBORG')),)),
            (device.vendor, device.model, device.deployables))
        self.assertIsNone(self.driver.loaded_function(D5005))

    def test_claims(self):
        self._devices()
        for address in [N6000] + N6000_VFS + [D5005]:
            self.assertTrue(self.driver.claims(address), address)
        for address in (NIC, '0000:3b:00.1', '0000:83:00.0'):
            self.assertFalse(self.driver.claims(address), address)

    def test_function_changes(self):
        self._devices()
        self.assertEqual([simhost.FUNCTION_ID] * 2, [
            self.driver.loaded_function(vf) for vf in N6000_VFS])
        new = 'AB' * 16
        self.sim.set_function_id(N6000_VFS[1], new)
        # Each port on its own: the other keeps its function.
        self.assertEqual([simhost.FUNCTION_ID, new.lower()], [
            self.driver.loaded_function(vf) for vf in N6000_VFS])
        first, second = self._devices()[N6000].deployables
        self.assertIn(FUNCTION_TRAIT, first.traits)
        self.assertIn('CUSTOM_FPGA_FUNCTION_ID_INTEL_' + new, second.traits)
        self.assertNotIn(FUNCTION_TRAIT, second.traits)
        self.sim.set_function_id(N6000, None)  # the PF: every port
        self.assertEqual([None, None], [
            self.driver.loaded_function(vf) for vf in N6000_VFS])
        self.assertEqual([('CUSTOM_FPGA_INTEL', REGION_TRAIT,
                           'OWNER_CYBORG')] * 2,
                         [d.traits for d in
                          self._devices()[N6000].deployables])

    def _write(self, path, value):
        with open(path, 'w') as f:
            f.write(value)

    def test_empty_afu_id(self):
        self._write(self.sim.afu_id_path(N6000_VFS[0]), '')
        first, second = self._devices()[N6000].deployables
        self.assertNotIn(FUNCTION_TRAIT, first.traits)
        self.assertIn(FUNCTION_TRAIT, second.traits)
        self.assertIsNone(self.driver.loaded_function(N6000_VFS[0]))

    def test_unknown_addresses(self):
        self._devices()
        # The PF of a card whose ports are released serves none of them.
        for address in (N6000, NIC, '0000:83:00.0'):
            self.assertRaises(exception.UnknownDevice,
                              self.driver.loaded_function, address)

    def _assert_skipped(self, address, *fragments):
        devices = self._devices()
        self.assertNotIn(address, devices)
        self.assertEqual(1, len(devices))
        self.assertOneWarning(address, *fragments)

    def test_afu_id_garbage(self):
        self._write(self.sim.afu_id_path(N6000_VFS[1]), 'garbage\n')
        self._assert_skipped(N6000, 'afu_id', "'garbage'")
        self.assertRaises(exception.UnknownDevice,
                          self.driver.loaded_function, N6000_VFS[1])

    def test_afu_id_garbage_after_discovery(self):
        self._devices()
        self._write(self.sim.afu_id_path(N6000_VFS[0]), 'garbage\n')
        self.assertIsNone(self.driver.loaded_function(N6000_VFS[0]))
        self.assertOneWarning(N6000_VFS[0], "'garbage'")
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(N6000_VFS[1]))

    def test_afu_id_too_short(self):
        self._write(self.sim.afu_id_path(D5005), 'abcd\n')
        self._assert_skipped(D5005, 'afu_id', "'abcd'")

    def test_compat_id_garbage(self):
        dfl = self.sim.dfl
        card = self.sim.fpga_card(D5005)
        port = card.ports[0]
        self._write(os.path.join(
            dfl.fme_dir(card), 'dfl-fme-region.%d' % port.bridge,
            'fpga_region', 'region%d' % port.pr_region, 'compat_id'),
            '0xnope\n')
        self._assert_skipped(D5005, 'compat_id', "'0xnope'")

    def test_malformed_pci_function(self):
        self.sim.write_attr(D5005, 'vendor', '80868086')
        self._assert_skipped(D5005, 'vendor id', "'80868086'")

    def test_card_of_a_missing_function(self):
        self.sim.remove_attr(D5005, 'vendor')
        os.unlink(os.path.join(self.root, 'bus/pci/devices', D5005))
        self._assert_skipped(D5005, 'no such PCI function')

    def test_generic_region_skipped(self):
        # Written by hand: a region of another driver (a SoC's overlay
        # region, an out-of-tree driver) under the NIC. No mainline ABI
        # gives such a region an afu_id (fpga-region.c: compat_id only),
        # nor says which function serves it.
        for name, parent in (('region9', self.sim._dir(NIC)),
                             ('region10', os.path.join(self.root,
                                                       'devices/platform/'
                                                       'soc'))):
            region = os.path.join(parent, 'fpga_region', name)
            os.makedirs(region)
            self._write(os.path.join(region, 'compat_id'),
                        simhost.COMPAT_ID + '\n')
            self._write(os.path.join(region, 'afu_id'),
                        simhost.FUNCTION_ID + '\n')
            os.symlink('../..', os.path.join(region, 'device'))
            os.symlink(region, os.path.join(self.root, 'class/fpga_region',
                                            name))
        before = self.driver.discover()
        self.assertEqual([N6000, D5005], [d.address for d in before])
        warnings = self.warnings()
        self.assertEqual(2, len(warnings), self.log.output)
        self.assertIn('region9 (PCI function %s)' % NIC, warnings[0])
        self.assertIn('neither an Intel DFL card', warnings[0])
        self.assertIn('region10 (PCI function none)', warnings[1])
        # Said once: the next discovery reports the same, silently.
        self.assertEqual(before, self.driver.discover())
        self.assertEqual(warnings, self.warnings())
        self.assertFalse(self.driver.claims(NIC))
        self.assertRaises(exception.UnknownDevice,
                          self.driver.loaded_function, NIC)

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

    def _reported(self, name, host, function_id):
        root = os.path.join(self.root, name)
        host.write(root)
        self.config.config(sysfs_root=root, group='sidecar')
        driver = fpga.FpgaDriver(self.conf, sysfs.SysfsSource(root))
        deployable = driver.discover()[0].deployables[0]
        return (function_id.lower(), deployable.driver_name), deployable

    def test_same_as_conductor(self):
        cases = []
        reported = []
        for name, function_id in (('dfl', simhost.FUNCTION_ID),
                                  ('dfl-vf', '0123456789abcdef' * 2),
                                  ('alveo', 'F' * 32)):
            if name == 'alveo':
                host = xrt.XrtHost()
                host.add_card('u250', xclbin_uuid=function_id.lower())
            else:
                host = simulator.SimulatedHost()
                host.add_fpga(num_vfs=int(name == 'dfl-vf'),
                              function_id=function_id)
            case, deployable = self._reported(name, host, function_id)
            cases.append(case)
            reported.append(deployable.traits)
        self.assertEqual(['intel', 'intel', 'xilinx'],
                         [driver for _f, driver in cases])
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
