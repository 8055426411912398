import json

from oslo_serialization import jsonutils
from stevedore import driver as stevedore_driver

from sidecar import exception
from sidecar import model
from sidecar.drivers import pci
from sidecar.sources import sysfs
from sidecar_simulator import host as simulator
from tests.unit.sidecar import simhost

PF = '0000:81:00.0'
VFS = ['0000:81:00.%d' % i for i in range(1, 5)]
PLAIN = '0000:81:01.0'
OTHER_PF = '0000:81:02.0'


class PciDriverTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = self.host(pfs=[
            {'num_vfs': 4, 'vf_product_id': '1515'},
            {'vendor_id': '1af4', 'product_id': '1041', 'class_id': '020000'},
            {'vendor_id': '15b3', 'product_id': '101d', 'num_vfs': 2,
             'vf_product_id': '101e'}])
        self.source = self.write(self.sim)

    def _driver(self, *specs, source=None):
        self.config.config(group='pci', device_spec=[
            spec if isinstance(spec, str) else json.dumps(spec)
            for spec in specs])
        return pci.PciDriver(self.conf, source or self.source)

    def _discover(self, *specs):
        driver = self._driver(*specs)
        return driver, {d.address: d for d in driver.discover()}

    def test_vfs_of_a_matched_pf(self):
        driver, devices = self._discover(
            {'vendor_id': '8086', 'product_id': '1528',
             'traits': ['my accel', 'HW_NIC_SRIOV', 'CUSTOM_GOOD']})
        self.assertEqual([PF], list(devices))
        self.assertEqual(model.Device(
            type='PCI', vendor='8086', model='1528', address=PF,
            std_board_info=(('class', '020000'), ('product_id', '1528')),
            driver_name='pci', deployables=(model.Deployable(
                name=PF, resource_class='CUSTOM_PCI', num_accelerators=4,
                traits=('CUSTOM_GOOD', 'CUSTOM_MY_ACCEL', 'CUSTOM_PCI_8086',
                        'CUSTOM_PCI_PRODUCT_ID_1515', 'HW_NIC_SRIOV',
                        'OWNER_CYBORG'),
                attach_handles=tuple(model.AttachHandle('PCI', vf)
                                     for vf in VFS),
                driver_name='pci'),)), devices[PF])
        for address in [PF] + VFS:
            self.assertTrue(driver.claims(address), address)
        self.assertFalse(driver.claims(PLAIN))
        self.assertEqual([], self.warnings())

    def test_physical_function(self):
        _, devices = self._discover(
            {'address': PF, 'physical_function': True,
             'resource_class': 'FPGA'})
        deployable = devices[PF].deployables[0]
        self.assertEqual(('FPGA', 1, (model.AttachHandle('PCI', PF),)),
                         (deployable.resource_class,
                          deployable.num_accelerators,
                          deployable.attach_handles))
        self.assertIn('CUSTOM_PCI_PRODUCT_ID_1528', deployable.traits)

    def test_function_without_vfs_is_its_own_handle(self):
        _, devices = self._discover({'vendor_id': '0x1AF4',
                                     'resource_class': 'virtio net'})
        deployable = devices[PLAIN].deployables[0]
        self.assertEqual('CUSTOM_VIRTIO_NET', deployable.resource_class)
        self.assertEqual((model.AttachHandle('PCI', PLAIN),),
                         deployable.attach_handles)

    def test_vfs_matched_by_product_and_address(self):
        _, devices = self._discover(
            {'product_id': '1515', 'address': '81:00.[23]'},
            {'product_id': '101e'})
        self.assertEqual([PF, OTHER_PF], sorted(devices))
        self.assertEqual([VFS[1], VFS[2]], [
            h.address for h in devices[PF].deployables[0].attach_handles])
        self.assertEqual(2, devices[OTHER_PF].deployables[0]
                         .num_accelerators)

    def test_first_spec_wins(self):
        _, devices = self._discover(
            {'address': '*:81:00.*', 'resource_class': 'FIRST'},
            {'vendor_id': '8086', 'resource_class': 'SECOND'})
        self.assertEqual(['CUSTOM_FIRST'], [
            d.deployables[0].resource_class for d in devices.values()])

    def test_live_migratable(self):
        # Nova's own [pci] device_spec reads "yes"/"no" as well as booleans.
        for value in (True, 'yes', 'true', 'True'):
            _, devices = self._discover(
                {'vendor_id': '8086', 'live_migratable': value},
                {'vendor_id': '15b3'})
            self.assertIn('HW_PCI_LIVE_MIGRATABLE',
                          devices[PF].deployables[0].traits, value)
            self.assertNotIn('HW_PCI_LIVE_MIGRATABLE',
                             devices[OTHER_PF].deployables[0].traits)
        for value in (False, 'no', 'false'):
            _, devices = self._discover(
                {'vendor_id': '8086', 'live_migratable': value})
            self.assertNotIn('HW_PCI_LIVE_MIGRATABLE',
                             devices[PF].deployables[0].traits, value)

    def test_live_migratable_and_physical_function(self):
        _, devices = self._discover(
            {'address': PF, 'physical_function': True,
             'live_migratable': True})
        self.assertIn('HW_PCI_LIVE_MIGRATABLE',
                      devices[PF].deployables[0].traits)

    def test_nothing_configured(self):
        driver, devices = self._discover()
        self.assertEqual({}, devices)
        self.assertFalse(driver.claims(PF))

    def test_spec_list_in_one_value(self):
        _, devices = self._discover(jsonutils.dumps(
            [{'vendor_id': '8086'}, {'vendor_id': '1af4'}]))
        self.assertEqual([PF, PLAIN], sorted(devices))

    def test_malformed_specs(self):
        for spec, message in (
                ('{"vendor_id": ', 'not JSON'),
                ('"8086"', 'not a JSON object'),
                ('[{"vendor_id": "8086"}, 3]', 'not a JSON object'),
                ({'vendor': '8086'}, 'unknown keys vendor'),
                ({'vendor_id': 'intel'}, 'vendor_id'),
                ({'product_id': '12345'}, 'product_id'),
                ({'product_id': 4660}, 'product_id'),
                ({'address': '0000:81:00.0;rm'}, 'address'),
                ({'address': ['0000:81:00.0']}, 'address'),
                ({'traits': 'CUSTOM_X'}, 'not a list'),
                ({'traits': ['']}, 'trait'),
                ({'traits': ['---']}, 'no usable name'),
                ({'resource_class': 5}, 'resource_class'),
                ({'physical_function': 'yes'}, 'physical_function'),
                ({'live_migratable': 'maybe'},
                 "live_migratable 'maybe' is not true or false"),
                ({'live_migratable': 1}, 'live_migratable 1'),
                ({'live_migratable': None}, 'live_migratable None')):
            ex = self.assertRaises(exception.InvalidArgument,
                                   self._driver, spec)
            self.assertIn('[pci] device_spec', str(ex))
            self.assertIn(message, str(ex))

    def test_malformed_vf_is_skipped(self):
        self.sim.write_attr(VFS[1], 'vendor', 'not-hex')
        _, devices = self._discover({'vendor_id': '8086'})
        self.assertEqual([VFS[0], VFS[2], VFS[3]], [
            h.address for h in devices[PF].deployables[0].attach_handles])
        self.assertOneWarning(VFS[1], "'not-hex'")

    def test_vf_of_a_missing_pf_is_skipped(self):
        self.sim.write_attr(PF, 'class', 'zz')
        _, devices = self._discover({'product_id': '1515'},
                                    {'product_id': '101e'})
        self.assertEqual([OTHER_PF], list(devices))
        warnings = self.warnings()
        self.assertEqual(5, len(warnings), self.log.output)
        self.assertIn(PF, warnings[0])
        for vf, warning in zip(VFS, warnings[1:]):
            self.assertIn('Skipping VF %s: its physical function %s'
                          % (vf, PF), warning)

    def test_vf_of_a_missing_pf_matching_no_spec_is_quiet(self):
        self.sim.remove_function(OTHER_PF)
        _, devices = self._discover({'vendor_id': '8086'})
        self.assertEqual([PF], list(devices))
        self.assertEqual([], self.warnings())

    def test_a_thousand_vfs(self):
        host = simulator.SimulatedHost('0000:3b:00.0')
        for _ in range(8):
            host.add_pf(num_vfs=125, vf_product_id='1515')
        host.write(self.root + '/big')
        driver = self._driver({'vendor_id': '8086', 'product_id': '1528'},
                              source=sysfs.SysfsSource(self.root + '/big'))
        devices = driver.discover()
        self.assertEqual(8, len(devices))
        handles = [h.address for d in devices
                   for h in d.deployables[0].attach_handles]
        self.assertEqual(1000, len(set(handles)))
        self.assertEqual(sorted(a for a, f in host.functions.items()
                                if f.physfn), sorted(handles))
        for device in devices:
            self.assertEqual(
                sorted(host.functions[device.address].virtfns.values()),
                [h.address for h in device.deployables[0].attach_handles])
            self.assertEqual(125, device.deployables[0].num_accelerators)
        self.assertEqual([], self.warnings())

    def test_entry_point(self):
        self.config.config(group='pci', device_spec=['{"vendor_id": "8086"}'])
        manager = stevedore_driver.DriverManager(
            'nova_cyborg.sidecar.drivers', 'pci', invoke_on_load=True,
            invoke_args=(self.conf, self.source))
        self.assertIsInstance(manager.driver, pci.PciDriver)
        self.assertEqual([PF], [d.address for d in manager.driver.discover()])


class NamesTest(simhost.SimHostTestCase):

    def test_trait_names(self):
        self.assertEqual('HW_GPU_API_VULKAN',
                         pci.trait_name('HW_GPU_API_VULKAN'))
        self.assertEqual('CUSTOM_FOO', pci.trait_name('CUSTOM_FOO'))
        self.assertEqual('CUSTOM_CUSTOM_FOO_BAR',
                         pci.trait_name('CUSTOM_foo-bar'))
        self.assertEqual('CUSTOM_HW_NOPE', pci.trait_name('HW_NOPE'))

    def test_resource_class_names(self):
        self.assertEqual('VGPU', pci.resource_class_name('VGPU'))
        self.assertEqual('CUSTOM_PCI', pci.resource_class_name('PCI'))
        self.assertEqual('CUSTOM_PCI', pci.resource_class_name('CUSTOM_PCI'))
        self.assertEqual('CUSTOM_QAT_VF', pci.resource_class_name('qat-vf'))
