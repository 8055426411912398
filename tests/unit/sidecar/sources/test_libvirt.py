"""LibvirtSource against libvirt's test:/// driver, fed by the simulator."""

import os
from xml.etree import ElementTree

import libvirt

from sidecar.sources import libvirt as libvirt_source
from sidecar.sources import sysfs
from sidecar_simulator import host as simulator
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost


class LibvirtSourceTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        # The test driver rejects the "active only" flag of the mdev
        # listing; keep libvirt's default handler from printing that.
        libvirt.registerErrorHandler(lambda ctx, err: None, None)
        self.addCleanup(libvirt.registerErrorHandler, None, None)

    def _sources(self, host, mutate=None):
        host.write(self.root)
        if mutate:
            mutate(host)
        uri = host.write_node_xml(os.path.join(self.root, 'node.xml'))
        return (sysfs.SysfsSource(self.root),
                libvirt_source.LibvirtSource.from_uri(uri, self.root))

    def _assert_same(self, host, mutate=None):
        from_sysfs, from_libvirt = self._sources(host, mutate)
        expected = from_sysfs.functions()
        self.assertEqual(len(host.functions), len(expected))
        self.assertEqual(expected, from_libvirt.functions())
        self.assertEqual([], self.warnings())
        return expected

    def test_same_as_sysfs(self):
        host = self.host(
            pfs=[{'num_vfs': 12, 'vf_product_id': '1515', 'numa_node': 1},
                 {'vendor_id': '15b3', 'product_id': '101d',
                  'address': '0000:3b:00.0'}],
            fpgas=[{'num_vfs': 2, 'function_id': simhost.FUNCTION_ID},
                   {}],
            gpus=[{'mdev_types': [simhost.T4_1B, simhost.T4_2B],
                   'numa_node': 0},
                  {'mdev_types': [{'type_id': 'i915-GVTg_V5_4',
                                   'available_instances': 1}]}])

        def mutate(host):
            host.create_mdev('0000:81:04.0', 'nvidia-222')
            host.create_mdev('0000:81:04.0', 'nvidia-222')
            host.remove_function('0000:81:00.5')

        functions = self._assert_same(host, mutate)
        gpu = [f for f in functions if f.address == '0000:81:04.0'][0]
        self.assertEqual(2, len(gpu.mdev_type('nvidia-222').mdevs))
        self.assertEqual(14, gpu.mdev_type('nvidia-222').available_instances)

    def test_same_as_sysfs_for_gpus_with_drivers_and_groups(self):
        # Bound drivers and IOMMU groups (libvirt's <driver> and
        # <iommuGroup>), vGPU 17 VFs' nvidia/ files read from sysfs.
        sim = nvidia.NvidiaHost()
        h100 = sim.add_vfio_vgpu_card(num_vfs=4, types={0: 'NVIDIA H100-4C'},
                                      address='0000:41:00.0')
        a6000 = sim.add_passthrough_gpu('rtx-a6000', address='0000:61:00.0',
                                        audio_driver='snd_hda_intel')
        sim.add_switch_port(group_with=a6000)
        sim.write(self.root)
        uri = sim.host.write_node_xml(os.path.join(self.root, 'node.xml'))
        expected = sysfs.SysfsSource(self.root).functions()
        functions = libvirt_source.LibvirtSource.from_uri(
            uri, self.root).functions()
        self.assertEqual(expected, functions)
        by_address = {f.address: f for f in functions}
        vf = by_address[h100.vfs[0]]
        self.assertEqual('nvidia', vf.driver)
        self.assertIsNotNone(vf.vendor_vgpu)
        gpu = by_address[a6000.pf]
        self.assertEqual('vfio-pci', gpu.driver)
        self.assertEqual({gpu.iommu_group}, {
            f.iommu_group for f in functions
            if f.address in (a6000.pf, a6000.functions[0])})

    def test_same_as_sysfs_for_fakelibvirt_host(self):
        self._assert_same(simulator.from_fakelibvirt(
            num_pci=1, num_pfs=2, num_vfs=8, num_mdevcap=2,
            multiple_gpu_types=True))

    def test_class_from_sysfs_when_libvirt_has_none(self):
        host = self.host(gpus=[{}])
        host.write(self.root)
        path = os.path.join(self.root, 'node.xml')
        with open(path, 'w') as f:
            f.write(host.node_xml().replace('<class>0x030200</class>', ''))
        source = libvirt_source.LibvirtSource.from_uri('test://' + path,
                                                       self.root)
        self.assertEqual('030200', source.functions()[0].class_id)

    def test_read_attr(self):
        _, source = self._sources(self.host(pfs=[{'num_vfs': 3}]))
        self.assertEqual('3', source.read_attr('0000:81:00.0',
                                               'sriov_numvfs'))
        self.assertIsNone(source.read_attr('0000:81:00.0', 'nothing'))


class FakeNodeDevice:

    def __init__(self, name, xml):
        self._name = name
        self.xml = xml

    def name(self):
        return self._name

    def XMLDesc(self, flags):
        if isinstance(self.xml, Exception):
            raise self.xml
        return self.xml


class FakeConnection:
    """Node devices from a simulated host's XML, then tampered with."""

    def __init__(self, node_xml):
        self.pci = []
        self.mdevs = []
        self.flags = []
        for element in ElementTree.fromstring(node_xml).findall('device'):
            name = element.findtext('name')
            xml = ElementTree.tostring(element, encoding='unicode')
            if name.startswith('pci_'):
                self.pci.append(FakeNodeDevice(name, xml))
            elif name.startswith('mdev_'):
                self.mdevs.append(FakeNodeDevice(name, xml))

    def device(self, name):
        return [d for d in self.pci + self.mdevs if d.name() == name][0]

    def listAllDevices(self, flags):
        self.flags.append(flags)
        if flags & libvirt.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE:
            raise libvirt.libvirtError('unsupported flags')
        if flags & libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV:
            return self.mdevs
        return self.pci


class MalformedXmlTest(simhost.SimHostTestCase):
    """What libvirt would never say, and what a vanishing device does."""

    def setUp(self):
        super().setUp()
        host = self.host(pfs=[{'num_vfs': 2, 'vf_product_id': '1515'}],
                         gpus=[{'mdev_types': [simhost.T4_1B]}])
        self.mdev = host.create_mdev('0000:81:01.0', 'nvidia-222')
        self.connection = FakeConnection(host.node_xml())
        self.source = libvirt_source.LibvirtSource(self.connection)

    def _tamper(self, name, old, new):
        device = self.connection.device(name)
        self.assertIn(old, device.xml)
        device.xml = device.xml.replace(old, new)

    def _assert_skipped(self, address, *fragments):
        addresses = [f.address for f in self.source.functions()]
        self.assertNotIn(address, addresses)
        self.assertEqual(3, len(addresses))
        self.assertOneWarning(*fragments)

    def test_reads_mdevs_without_active_flag(self):
        gpu = self.source.functions()[-1]
        self.assertEqual((self.mdev,), gpu.mdev_type('nvidia-222').mdevs)
        self.source.functions()
        # The flag is tried once, then not any more.
        active = libvirt.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE
        self.assertEqual(1, len([f for f in self.connection.flags
                                 if f & active]))

    def test_mdev_uuid_from_its_name(self):
        name = self.connection.mdevs[0].name()
        self._tamper(name, '<uuid>%s</uuid>' % self.mdev, '')
        gpu = self.source.functions()[-1]
        self.assertEqual((self.mdev,), gpu.mdev_type('nvidia-222').mdevs)

    def test_bad_product_id(self):
        self._tamper('pci_0000_81_00_1', '"0x1515"', '"0x15zz"')
        self._assert_skipped('0000:81:00.1',
                             "0000:81:00.1 (pci_0000_81_00_1): product id "
                             "is '0x15zz'")

    def test_bad_available_instances(self):
        self._tamper('pci_0000_81_01_0', '>15<', '>x<')
        self._assert_skipped('0000:81:01.0', 'pci_0000_81_01_0',
                             "available_instances is 'x'")

    def test_bad_address(self):
        self._tamper('pci_0000_81_00_2', '<slot>0</slot>', '<slot>32</slot>')
        self._assert_skipped('0000:81:00.2', 'pci_0000_81_00_2',
                             "address slot is '32'")

    def test_bad_phys_function(self):
        self._tamper('pci_0000_81_00_2', 'function="0x0"', 'function="0x9"')
        self._assert_skipped('0000:81:00.2', 'phys_function function')

    def test_unparsable(self):
        self.connection.device('pci_0000_81_00_0').xml = '<device'
        self._assert_skipped('0000:81:00.0', 'pci_0000_81_00_0',
                             'unparsable XML')

    def test_not_pci(self):
        self._tamper('pci_0000_81_00_0', "type=\"pci\"", "type=\"usb\"")
        self._assert_skipped('0000:81:00.0', 'no pci capability')

    def test_vanished(self):
        self.connection.device('pci_0000_81_00_0').xml = (
            libvirt.libvirtError('Node device not found'))
        self._assert_skipped('0000:81:00.0', 'cannot read its XML')
