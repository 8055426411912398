import os
from xml.etree import ElementTree

import fixtures

from sidecar.sources import dfl as dfl_source
from sidecar_simulator import host as simulator
from tests.unit.sidecar import simhost


def _nova_host(**kwargs):
    """{address: (vendor, product, parent address, numa, mdev types)} of
    Nova's fakelibvirt HostPCIDevicesInfo, read from its node XML."""
    from nova.tests.fixtures import libvirt as fakelibvirt
    info = fakelibvirt.HostPCIDevicesInfo(**kwargs)
    result = {}
    for name in info.get_all_devices():
        device = info.get_device_by_name(name)
        root = ElementTree.fromstring(device.XMLDesc(0))
        cap = root.find("capability[@type='pci']")
        parent = None
        if device.dev_type == 'VF':
            parent = '0000:%02x:%02x.%x' % device.parent
        numa = cap.find('numa')
        types = tuple(
            (t.get('id'), int(t.findtext('availableInstances')))
            for t in cap.findall("capability[@type='mdev_types']/type"))
        result[device.address] = (
            cap.find('vendor').get('id')[2:].lower(),
            cap.find('product').get('id')[2:].lower(), parent,
            None if numa is None else int(numa.get('node')), types)
    return result


def _our_host(**kwargs):
    host = simulator.from_fakelibvirt(**kwargs)
    return {f.address: (f.vendor_id, f.product_id, f.physfn, f.numa_node,
                        tuple((t.type_id, t.available_instances)
                              for t in f.mdev_types))
            for f in host.functions.values()}


class FakelibvirtTest(simhost.SimHostTestCase):

    def test_same_host_as_nova_fakelibvirt(self):
        for kwargs in (
                {},
                {'num_pfs': 1, 'num_vfs': 1},
                {'num_pci': 2, 'num_pfs': 2, 'num_vfs': 16,
                 'num_mdevcap': 3, 'multiple_gpu_types': True},
                {'num_pfs': 1, 'num_vfs': 4, 'product_ids': ['1515', '154c'],
                 'numa_node': 1, 'bus': 0x82},
                {'num_pfs': 0, 'num_vfs': 0, 'num_mdevcap': 1,
                 'generic_types': True, 'numa_node': -1}):
            self.assertEqual(_nova_host(**kwargs), _our_host(**kwargs),
                             kwargs)

    def test_default_addresses(self):
        host = simulator.from_fakelibvirt(num_pfs=2, num_vfs=8)
        self.assertEqual(
            ['0000:81:00.%d' % f for f in range(5)] +
            ['0000:81:01.%d' % f for f in range(5)], list(host.functions))

    def test_arguments_checked_like_nova(self):
        self.assertRaises(ValueError, simulator.from_fakelibvirt,
                          num_pfs=0, num_vfs=2)
        self.assertRaises(ValueError, simulator.from_fakelibvirt,
                          num_pfs=2, num_vfs=3)


class AddressTest(simhost.SimHostTestCase):

    def test_vfs_follow_routing_ids_across_slots_and_buses(self):
        host = simulator.SimulatedHost()
        pf = host.add_pf(num_vfs=260)
        self.assertEqual('0000:81:01.0', pf.virtfns[7])
        self.assertEqual('0000:82:00.0', pf.virtfns[255])
        self.assertEqual('0000:82:00.4', pf.virtfns[259])
        self.assertEqual('0000:82:01.0', host.add_gpu().address)

    def test_explicit_addresses(self):
        host = simulator.SimulatedHost('0000:05:00.0')
        self.assertEqual('0000:3b:00.0',
                         host.add_pf(address='0000:3B:00.0').address)
        self.assertEqual('0000:3b:01.0', host.add_pf().address)
        self.assertRaises(ValueError, host.add_pf, address='0000:3b:00.0')
        self.assertRaises(ValueError, host.add_pf, address='3b:00.0')

    def test_path_before_the_tree_is_written(self):
        host = simulator.SimulatedHost()
        address = host.add_fpga(num_vfs=1).virtfns[0]
        error = self.assertRaises(RuntimeError, host.afu_id_path, address)
        self.assertIn('write(root) first', str(error))

    def test_vf_collision(self):
        host = simulator.SimulatedHost()
        host.add_pf(address='0000:81:00.2')
        self.assertRaises(ValueError, host.add_pf, address='0000:81:00.0',
                          num_vfs=2)


class TreeTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = self.host(
            pfs=[{'num_vfs': 2, 'vf_product_id': '1515'}],
            fpgas=[{'function_id': simhost.FUNCTION_ID}],
            gpus=[{'mdev_types': [simhost.T4_1B]}])
        self.source = self.write(self.sim)

    def _path(self, *parts):
        return os.path.join(self.root, *parts)

    def test_layout(self):
        pf = self._path('bus/pci/devices/0000:81:00.0')
        self.assertEqual(os.path.realpath(pf), os.path.realpath(
            self._path('bus/pci/devices/0000:81:00.1/physfn')))
        self.assertEqual(os.path.realpath(self._path(
            'bus/pci/devices/0000:81:00.2')), os.path.realpath(
            os.path.join(pf, 'virtfn1')))
        self.assertEqual('2', self.source.read_attr('0000:81:00.0',
                                                    'sriov_numvfs'))
        # The FPGA: a DFL card (sidecar_simulator.dfl) whose base region
        # leads to its PF, its one port under it holding the function.
        fpga = os.path.realpath(self._path('bus/pci/devices/0000:81:01.0'))
        region = self._path('class/fpga_region/region0')
        self.assertEqual(fpga, os.path.realpath(os.path.join(region,
                                                             'device')))
        port = self.sim.afu_id_path('0000:81:01.0')
        self.assertEqual(os.path.join(fpga, 'fpga_region/region0'),
                         os.path.dirname(os.path.dirname(port)))
        self.assertEqual(simhost.FUNCTION_ID, self.source.read_attr(
            '0000:81:01.0', os.path.relpath(port, fpga)))
        card, = dfl_source.cards(self.root).values()
        self.assertEqual(['0000:81:01.0'], [p.address for p in card.ports])
        # The manager has a state and no 'firmware' file (none in the
        # mainline kernel).
        manager = self._path('class/fpga_manager/fpga0')
        with open(os.path.join(manager, 'state')) as f:
            self.assertEqual('unknown\n', f.read())
        self.assertFalse(os.path.exists(os.path.join(manager, 'firmware')))
        self.assertTrue(os.path.isfile(self._path(
            'class/mdev_bus/0000:81:02.0/mdev_supported_types/nvidia-222/'
            'create')))

    def test_mdevs(self):
        uuid = self.sim.create_mdev('0000:81:02.0', 'nvidia-222')
        mdev = self._path('bus/mdev/devices', uuid)
        self.assertTrue(os.path.isfile(os.path.join(mdev, 'remove')))
        self.assertTrue(os.path.realpath(os.path.join(
            mdev, 'mdev_type')).endswith('mdev_supported_types/nvidia-222'))
        gpu = self.source.functions()[-1].mdev_type('nvidia-222')
        self.assertEqual((15, (uuid,), 16),
                         (gpu.available_instances, gpu.mdevs, gpu.capacity))
        self.sim.remove_mdev('0000:81:02.0', 'nvidia-222', uuid)
        self.assertFalse(os.path.lexists(mdev))
        gpu = self.source.functions()[-1].mdev_type('nvidia-222')
        self.assertEqual((16, ()), (gpu.available_instances, gpu.mdevs))
        self.sim.set_available_instances('0000:81:02.0', 'nvidia-222', 3)
        self.assertEqual(3, self.source.functions()[-1].mdev_types[0]
                         .available_instances)

    def test_vfs_come_and_go(self):
        self.sim.remove_function('0000:81:00.1')
        functions = {f.address: f for f in self.source.functions()}
        self.assertNotIn('0000:81:00.1', functions)
        self.assertEqual(('0000:81:00.2',), functions['0000:81:00.0'].virtfns)
        self.assertEqual('1', self.source.read_attr('0000:81:00.0',
                                                    'sriov_numvfs'))
        self.assertEqual('0000:81:00.1', self.sim.add_vf('0000:81:00.0'))
        functions = {f.address: f for f in self.source.functions()}
        self.assertEqual('1515', functions['0000:81:00.1'].product_id)
        self.assertEqual(('0000:81:00.1', '0000:81:00.2'),
                         functions['0000:81:00.0'].virtfns)

    def test_remove_fpga_and_function_id(self):
        self.sim.set_function_id('0000:81:01.0', None)
        relpath = os.path.relpath(self.sim.afu_id_path('0000:81:01.0'),
                                  self.sim._dir('0000:81:01.0'))
        self.assertEqual(simulator.NO_FUNCTION, self.source.read_attr(
            '0000:81:01.0', relpath))
        self.sim.remove_function('0000:81:01.0')
        # Its class devices go with it (drivers/base/core.c device_del).
        for kind in ('fpga_region', 'fpga_manager', 'fpga_bridge'):
            self.assertEqual([], os.listdir(self._path('class', kind)),
                             kind)
        self.assertEqual({}, dfl_source.cards(self.root))
        self.assertNotIn('0000:81:01.0',
                         [f.address for f in self.source.functions()])

    def test_node_xml_round_trip(self):
        root = ElementTree.fromstring(self.sim.node_xml())
        names = [d.findtext('name') for d in root.findall('device')]
        self.assertEqual(['computer', 'pci_0000_81_00_0', 'pci_0000_81_00_1',
                          'pci_0000_81_00_2', 'pci_0000_81_01_0',
                          'pci_0000_81_02_0'], names)
        self.assertIsNotNone(root.find('device/capability/hardware/uuid'))


def _tree(root):
    """``{relative path: file text or '-> link'}`` of a sysfs tree."""
    result = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            key = os.path.relpath(path, root)
            if os.path.islink(path):
                result[key] = '-> ' + os.readlink(path)
            elif os.path.isfile(path):
                with open(path) as f:
                    result[key] = f.read()
    return result


class RestartTest(simhost.SimHostTestCase):
    """A host's process restarts and writes its tree again."""

    DESCRIPTION = {'pfs': [{'num_vfs': 2}],
                   'fpgas': [{'num_vfs': 1}],
                   'gpus': [{'mdev_types': [simhost.T4_1B]}]}

    def setUp(self):
        super().setUp()
        self.sim = self.host(**self.DESCRIPTION)
        self.source = self.write(self.sim)

    def test_writing_twice_gives_the_same_tree(self):
        before = _tree(self.root)
        self.assertEqual(self.root,
                         self.host(**self.DESCRIPTION).write(self.root))
        self.assertEqual(before, _tree(self.root))

    def test_the_hardware_keeps_its_state(self):
        # What a programmer and the sidecar did before the restart.
        with open(self.sim.afu_id_path('0000:81:01.1'), 'w') as f:
            f.write(simhost.FUNCTION_ID + '\n')
        uuid = self.sim.create_mdev('0000:81:02.0', 'nvidia-222')
        before = _tree(self.root)

        restarted = self.host(**self.DESCRIPTION)
        self.assertIs(restarted, restarted.load_state(self.root))
        restarted.write(self.root)

        self.assertEqual(before, _tree(self.root))
        self.assertEqual(simhost.FUNCTION_ID,
                         restarted.fpga_card('0000:81:01.0').afu_id)
        gpu = self.source.functions()[-1].mdev_type('nvidia-222')
        self.assertEqual((15, (uuid,)), (gpu.available_instances,
                                         gpu.mdevs))
        # The restarted description goes on changing the tree.
        restarted.remove_mdev('0000:81:02.0', 'nvidia-222', uuid)
        gpu = self.source.functions()[-1].mdev_type('nvidia-222')
        self.assertEqual((16, ()), (gpu.available_instances, gpu.mdevs))

    def test_no_function_loaded_is_kept_too(self):
        self.sim = self.host(fpgas=[{'function_id': simhost.FUNCTION_ID}])
        self.sim.write(self.root)
        self.sim.set_function_id('0000:81:00.0', None)
        restarted = self.host(fpgas=[{'function_id': simhost.FUNCTION_ID}])
        restarted.load_state(self.root).write(self.root)
        self.assertIsNone(restarted.fpga_card('0000:81:00.0').afu_id)
        with open(restarted.afu_id_path('0000:81:00.0')) as f:
            self.assertEqual(simulator.NO_FUNCTION, f.read().strip())

    def test_without_load_state_the_description_wins(self):
        self.sim.create_mdev('0000:81:02.0', 'nvidia-222')
        self.sim.set_function_id('0000:81:01.0', simhost.FUNCTION_ID)
        fresh = self.host(**self.DESCRIPTION)
        fresh.write(self.root)
        self.assertEqual(_tree(self.host(**self.DESCRIPTION).write(
            self.useFixture(fixtures.TempDir()).path)), _tree(self.root))

    def test_load_state_from_nothing_changes_nothing(self):
        host = self.host(fpgas=[{'function_id': simhost.FUNCTION_ID}])
        host.load_state(self.useFixture(fixtures.TempDir()).path)
        self.assertEqual(simhost.FUNCTION_ID,
                         host.fpga_card('0000:81:00.0').afu_id)
        self.assertIsNone(host.root)
