import os

from sidecar.sources import base
from sidecar.sources import sysfs
from sidecar_simulator import host as simulator
from tests.unit.sidecar import simhost

PF = '0000:81:00.0'
VFS = ['0000:81:00.%d' % i for i in range(1, 5)]
FPGA = '0000:81:01.0'
FPGA_VF = '0000:81:01.1'
GPU = '0000:81:02.0'


class SysfsSourceTest(simhost.SimHostTestCase):

    def _host(self):
        return self.host(
            pfs=[{'num_vfs': 4, 'vf_product_id': '1515', 'numa_node': 1}],
            fpgas=[{'num_vfs': 1, 'function_id': simhost.FUNCTION_ID}],
            gpus=[{'mdev_types': [simhost.T4_1B]}])

    def test_functions(self):
        host = self._host()
        source = self.write(host)
        uuid = host.create_mdev(GPU, 'nvidia-222')
        functions = {f.address: f for f in source.functions()}
        self.assertEqual([PF] + VFS + [FPGA, FPGA_VF, GPU],
                         sorted(functions))
        self.assertEqual(base.PciFunction(
            address=PF, vendor_id='8086', product_id='1528',
            class_id='020000', virtfns=tuple(VFS), numa_node=1),
            functions[PF])
        self.assertEqual(base.PciFunction(
            address=VFS[0], vendor_id='8086', product_id='1515',
            class_id='020000', physfn=PF, numa_node=1), functions[VFS[0]])
        self.assertEqual(base.PciFunction(
            address=GPU, vendor_id='10de', product_id='1eb8',
            class_id='030200', mdev_types=(base.MdevType(
                name='GRID T4-1B', type_id='nvidia-222',
                available_instances=15, device_api='vfio-pci',
                mdevs=(uuid,)),)), functions[GPU])
        self.assertEqual(16, functions[GPU].mdev_types[0].capacity)
        self.assertIsNone(functions[FPGA].numa_node)
        self.assertEqual([], self.warnings())

    def test_read_attr(self):
        host = self._host()
        source = self.write(host)
        self.assertEqual('4', source.read_attr(PF, 'sriov_numvfs'))
        self.assertIsNone(source.read_attr(PF, 'no_such_file'))
        afu_id = os.path.relpath(host.afu_id_path(FPGA_VF),
                                 host._dir(FPGA_VF))
        self.assertEqual(simhost.FUNCTION_ID,
                         source.read_attr(FPGA_VF, afu_id))
        self.assertRaises(ValueError, source.read_attr, PF, '../x/vendor')
        self.assertRaises(ValueError, source.read_attr, PF, '/etc/passwd')
        self.assertRaises(ValueError, source.read_attr, 'nope', 'vendor')

    def _assert_skipped(self, host, address, *fragments):
        functions = [f.address
                     for f in sysfs.SysfsSource(self.root).functions()]
        self.assertNotIn(address, functions)
        self.assertEqual(len(host.functions) - 1, len(functions))
        self.assertOneWarning(address, *fragments)

    def _corrupt(self, address, relpath, value):
        host = self._host()
        host.write(self.root)
        if value is None:
            host.remove_attr(address, relpath)
        else:
            host.write_attr(address, relpath, value)
        return host

    def test_bad_vendor_id(self):
        host = self._corrupt(VFS[1], 'vendor', '0xzz86')
        self._assert_skipped(host, VFS[1], 'vendor id', "'0xzz86'")

    def test_missing_product_id(self):
        host = self._corrupt(PF, 'device', None)
        self._assert_skipped(host, PF, 'product id', 'missing')

    def test_short_class(self):
        host = self._corrupt(FPGA, 'class', '0x1200')
        self._assert_skipped(host, FPGA, 'class', "'0x1200'")

    def test_bad_numa_node(self):
        host = self._corrupt(GPU, 'numa_node', 'two')
        self._assert_skipped(host, GPU, 'numa_node', "'two'")

    def test_non_integer_available_instances(self):
        host = self._corrupt(
            GPU, 'mdev_supported_types/nvidia-222/available_instances',
            'lots')
        self._assert_skipped(host, GPU, 'nvidia-222', 'available_instances',
                             "'lots'")

    def test_negative_available_instances(self):
        host = self._corrupt(
            GPU, 'mdev_supported_types/nvidia-222/available_instances', '-3')
        self._assert_skipped(host, GPU, 'available_instances', "'-3'")

    def test_missing_device_api(self):
        host = self._corrupt(
            GPU, 'mdev_supported_types/nvidia-222/device_api', None)
        self._assert_skipped(host, GPU, 'device_api')

    def test_physfn_not_an_address(self):
        host = self._corrupt(VFS[0], 'physfn', None)
        os.symlink('../pci0000:80', os.path.join(
            host._dir(VFS[0]), 'physfn'))
        self._assert_skipped(host, VFS[0], 'physfn', "'pci0000:80'")

    def test_entry_not_an_address(self):
        host = self._host()
        host.write(self.root)
        os.mkdir(os.path.join(self.root, 'bus/pci/devices/0000:81:00.G'))
        functions = sysfs.SysfsSource(self.root).functions()
        self.assertEqual(len(host.functions), len(functions))
        self.assertOneWarning('0000:81:00.G', 'not a PCI address')

    def test_no_pci_bus(self):
        self.assertEqual([], sysfs.SysfsSource(self.root).functions())
        self.assertOneWarning('Cannot list PCI devices')

    def test_a_lasting_problem_is_a_warning_once(self):
        host = self._corrupt(PF, 'vendor', 'junk')
        source = sysfs.SysfsSource(self.root)
        source.functions()
        source.functions()
        self.assertEqual(1, len(self.warnings()))
        host.write_attr(PF, 'vendor', '0x8086')
        self.assertIn(PF, [f.address for f in source.functions()])
        host.write_attr(PF, 'vendor', 'junk')
        source.functions()
        self.assertEqual(2, len(self.warnings()))

    def test_removed_vf_and_bus_crossing(self):
        host = simulator.SimulatedHost()
        host.add_pf(num_vfs=300, vf_product_id='1515')
        source = self.write(host)
        functions = {f.address: f for f in source.functions()}
        self.assertEqual(301, len(functions))
        self.assertEqual(PF, functions['0000:82:00.0'].physfn)
        host.remove_function('0000:81:00.3')
        functions = {f.address: f for f in source.functions()}
        self.assertNotIn('0000:81:00.3', functions)
        self.assertNotIn('0000:81:00.3', functions[PF].virtfns)
        self.assertEqual(299, len(functions[PF].virtfns))
        self.assertEqual([], self.warnings())


class FpgaRegionsTest(simhost.SimHostTestCase):
    """Regions of no DFL card, written by hand: no mainline driver of a
    PCI card registers one (the sidecar skips them, saying so)."""

    def _class_device(self, parent, kind, name, device='../..'):
        path = os.path.join(parent, kind, name)
        os.makedirs(path)
        if device:
            os.symlink(device, os.path.join(path, 'device'))
        os.makedirs(os.path.join(self.root, 'class', kind), exist_ok=True)
        os.symlink(path, os.path.join(self.root, 'class', kind, name))
        return path

    def test_regions_and_managers(self):
        host = self.host(pfs=[{}, {}], fpgas=[{'num_vfs': 1}])
        host.write(self.root)
        first, second = '0000:81:00.0', '0000:81:01.0'
        cls = os.path.join(self.root, 'class')
        # The DFL card's regions and manager (region0 to region2, fpga0)
        # are left out.
        for name, address in (('region5', first), ('region6', second)):
            self._class_device(host._dir(address), 'fpga_region', name)
        self._class_device(host._dir(first), 'fpga_manager', 'fpga3')
        self._class_device(host._dir(first), 'fpga_manager', 'fpga4')
        self.assertEqual([
            sysfs.FpgaRegion('region5', cls + '/fpga_region/region5',
                             first, cls + '/fpga_manager/fpga3'),
            sysfs.FpgaRegion('region6', cls + '/fpga_region/region6',
                             second, None),
        ], sysfs.fpga_regions(self.root))

    def test_region_of_a_child_device_and_strays(self):
        host = self.host(pfs=[{}])
        host.write(self.root)
        # The region's device is a platform device under the PCI function
        # (not DFL's layout, which sidecar.sources.dfl reads: see
        # tests/unit/sidecar/drivers/test_fpga_dfl.py).
        child = os.path.join(host._dir('0000:81:00.0'), 'soc-fpga.0')
        os.mkdir(child)
        self._class_device(child, 'fpga_region', 'region0')
        self._class_device(host._dir('0000:81:00.0'), 'fpga_manager',
                           'fpga0')
        # A region of a platform device, and one without a device link.
        platform = os.path.join(self.root, 'devices/platform')
        self._class_device(platform, 'fpga_region', 'region7', device='/')
        self._class_device(platform, 'fpga_region', 'region10', device=None)
        regions = sysfs.fpga_regions(self.root)
        self.assertEqual(['region0', 'region7', 'region10'],
                         [r.name for r in regions])
        self.assertEqual(['0000:81:00.0', None, None],
                         [r.address for r in regions])
        self.assertTrue(regions[0].manager.endswith('fpga_manager/fpga0'))
        self.assertIsNone(regions[1].manager)

    def test_no_fpga(self):
        self.assertEqual([], sysfs.fpga_regions(self.root))
