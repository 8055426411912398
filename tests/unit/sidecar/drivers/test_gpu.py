import json
import subprocess
import sys

from sidecar import exception
from sidecar import model
from sidecar.drivers import gpu
from sidecar.sources import sysfs
from sidecar_simulator import host as simulator
from tests.unit.sidecar import simhost

T4 = '0000:81:00.0'
M60 = '0000:81:01.0'
OTHER = '0000:81:02.0'
NIC = '0000:3b:00.0'


class GpuDriverTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = self.host(
            gpus=[{'mdev_types': [simhost.T4_1B, simhost.T4_2B]},
                  {'product_id': '13f2', 'class_id': '030000',
                   'mdev_types': [{'type_id': 'nvidia-18',
                                   'name': 'GRID M60-2Q',
                                   'available_instances': 4}]},
                  {'vendor_id': '1234', 'product_id': 'abcd'}],
            pfs=[{'address': NIC}])
        self.source = self.write(self.sim)

    def _devices(self, *types, selector=('10de:*', '1234:abcd')):
        self.config.config(group='gpu', enabled_mdev_types=list(types),
                           device_selector=list(selector))
        self.driver = gpu.GpuDriver(self.conf, self.source)
        return {d.address: d for d in self.driver.discover()}

    def test_pgpus(self):
        devices = self._devices()
        self.assertEqual([T4, M60, OTHER], sorted(devices))
        self.assertEqual(model.Device(
            type='GPU', vendor='10de', model='1eb8', address=T4,
            std_board_info=(('class', '030200'), ('product_id', '1eb8')),
            driver_name='nvidia', deployables=(model.Deployable(
                name=T4, resource_class='PGPU', num_accelerators=1,
                traits=('CUSTOM_NVIDIA_1EB8', 'OWNER_CYBORG'),
                attach_handles=(model.AttachHandle('PCI', T4),),
                driver_name='nvidia'),)), devices[T4])
        self.assertEqual(('CUSTOM_1234_ABCD', 'OWNER_CYBORG'),
                         devices[OTHER].deployables[0].traits)
        self.assertEqual([], self.warnings())

    def test_vgpus(self):
        devices = self._devices('nvidia-223', 'nvidia-18')
        t4 = devices[T4].deployables[0]
        self.assertEqual(
            ('VGPU', 8, ('CUSTOM_NVIDIA_1EB8_T4_2B', 'OWNER_CYBORG')),
            (t4.resource_class, t4.num_accelerators, t4.traits))
        self.assertEqual(
            [model.AttachHandle('MDEV', T4, 'nvidia-223', instance=i)
             for i in range(8)], list(t4.attach_handles))
        self.assertEqual(
            {'domain': '0000', 'bus': '81', 'device': '00', 'function': '0',
             'asked_type': 'nvidia-223', 'vgpu_mark': 'nvidia-223_7'},
            t4.attach_handles[7].attach_info())
        m60 = devices[M60].deployables[0]
        self.assertEqual((4, ('CUSTOM_NVIDIA_13F2_M60_2Q', 'OWNER_CYBORG')),
                         (m60.num_accelerators, m60.traits))
        self.assertEqual('PGPU', devices[OTHER].deployables[0].resource_class)
        self.assertTrue(self.driver.claims(T4))
        self.assertFalse(self.driver.claims(NIC))
        self.assertEqual([], self.warnings())

    def test_live_migratable_types(self):
        self.config.config(group='gpu',
                           live_migratable_mdev_types=['nvidia-223'])
        devices = self._devices('nvidia-223', 'nvidia-18')
        self.assertEqual(
            ('CUSTOM_NVIDIA_1EB8_T4_2B', 'HW_PCI_LIVE_MIGRATABLE',
             'OWNER_CYBORG'), devices[T4].deployables[0].traits)
        self.assertNotIn('HW_PCI_LIVE_MIGRATABLE',
                         devices[M60].deployables[0].traits)
        self.assertNotIn('HW_PCI_LIVE_MIGRATABLE',
                         devices[OTHER].deployables[0].traits)
        self.assertEqual([], self.warnings())

    def test_live_migratable_type_of_another_gpu_only(self):
        # The trait follows the type a GPU offers, not the GPU's other ones.
        self.config.config(group='gpu',
                           live_migratable_mdev_types=['nvidia-222'])
        devices = self._devices('nvidia-223', 'nvidia-222')
        self.assertNotIn('HW_PCI_LIVE_MIGRATABLE',
                         devices[T4].deployables[0].traits)

    def test_live_migratable_type_not_enabled(self):
        self.config.config(group='gpu',
                           live_migratable_mdev_types=['nvidia-18'])
        devices = self._devices('nvidia-223')
        self.assertNotIn('HW_PCI_LIVE_MIGRATABLE',
                         devices[M60].deployables[0].traits)
        self.assertOneWarning('live_migratable_mdev_types names nvidia-18',
                              'not in [gpu] enabled_mdev_types')

    def test_first_enabled_type_wins(self):
        devices = self._devices('nvidia-222', 'nvidia-223')
        self.assertEqual('nvidia-222', devices[T4].deployables[0]
                         .attach_handles[0].mdev_type)

    def test_creating_mdevs_keeps_the_inventory(self):
        before = self._devices('nvidia-222')[T4]
        uuids = [self.sim.create_mdev(T4, 'nvidia-222') for _ in range(3)]
        self.assertEqual(before, self._devices('nvidia-222')[T4])
        t4 = [f for f in self.source.functions() if f.address == T4][0]
        self.assertEqual((13, tuple(sorted(uuids))),
                         (t4.mdev_type('nvidia-222').available_instances,
                          t4.mdev_type('nvidia-222').mdevs))

    def test_type_without_name(self):
        self.sim.remove_attr(M60, 'mdev_supported_types/nvidia-18/name')
        devices = self._devices('nvidia-18')
        self.assertIn('CUSTOM_NVIDIA_13F2_NVIDIA_18',
                      devices[M60].deployables[0].traits)

    def test_unknown_type_name(self):
        devices = self._devices('nvidia-2222', 'nvidia-18')
        self.assertEqual('PGPU', devices[T4].deployables[0].resource_class)
        self.assertEqual('VGPU', devices[M60].deployables[0].resource_class)
        self.assertOneWarning('enabled_mdev_types', 'nvidia-2222',
                              'no GPU of this host offers')

    def test_non_integer_available_instances(self):
        self.sim.write_attr(
            T4, 'mdev_supported_types/nvidia-223/available_instances', '8.0')
        devices = self._devices('nvidia-18')
        self.assertEqual([M60, OTHER], sorted(devices))
        self.assertOneWarning(T4, 'nvidia-223', "'8.0'")

    def test_no_capacity_left(self):
        self.sim.set_available_instances(T4, 'nvidia-223', 0)
        devices = self._devices('nvidia-223')
        self.assertEqual([M60, OTHER], sorted(devices))
        self.assertOneWarning(T4, 'nvidia-223', 'no instance available')

    def test_bad_class(self):
        self.sim.write_attr(M60, 'class', 'VGA')
        self.assertEqual([T4, OTHER], sorted(self._devices()))
        self.assertOneWarning(M60, 'class', "'VGA'")

    def test_no_selector_no_gpu(self):
        self.assertEqual({}, self._devices('nvidia-223', selector=()))
        self.assertOneWarning('reports no GPU: [gpu] device_selector is '
                              'empty')

    def test_selectors(self):
        self.assertEqual([M60], sorted(self._devices(selector=['10de:13f2'])))
        self.assertEqual([T4, OTHER], sorted(self._devices(
            selector=['0000:81:00.0', '81:02.*'])))
        self.assertEqual([T4, M60, OTHER], sorted(self._devices(
            selector=['*:*'])))

    def test_bad_selector(self):
        for bad in ('10de', '10de:1eb8:1', 'nvidia:*', '0000:81:00.0;x',
                    '1:2:3:4.0'):
            error = self.assertRaises(exception.InvalidArgument,
                                      self._devices, selector=[bad])
            self.assertIn('[gpu] device_selector', str(error))

    def test_never_the_boot_display(self):
        self.sim.write_attr(OTHER, 'class', '0x030000')
        self.sim.write_attr(OTHER, 'boot_vga', '1')
        self.sim.write_attr(M60, 'boot_vga', '0')
        self.assertEqual([T4, M60], sorted(self._devices(selector=['*:*'])))
        self.assertOneWarning('Not reporting GPU 0000:81:02.0',
                              "boot display (boot_vga is 1)")

    def test_never_a_bmc(self):
        host = self.host(gpus=[{'vendor_id': '1a03', 'product_id': '2000',
                                'class_id': '030000'},
                               {'vendor_id': '102b', 'product_id': '0536',
                                'class_id': '030000'}])
        host.write(self.root + '/bmc')
        self.source = sysfs.SysfsSource(self.root + '/bmc')
        self.assertEqual({}, self._devices(selector=['*:*']))
        warnings = self.warnings()
        self.assertEqual(2, len(warnings))
        self.assertIn('ASPEED BMC', warnings[0])
        self.assertIn('Matrox BMC', warnings[1])

    def test_vfs_are_not_offered_whole(self):
        host = simulator.SimulatedHost()
        host.add_pf('10de', '20b0', '030200', num_vfs=2)
        vf = host.add_gpu('10de', '20b0', address='0000:81:00.3',
                          mdev_types=[{'type_id': 'nvidia-468',
                                       'name': 'GRID A100-4C',
                                       'available_instances': 1}])
        vf.physfn = '0000:81:00.0'
        host.write(self.root + '/vf')
        self.source = sysfs.SysfsSource(self.root + '/vf')
        self.assertEqual({}, self._devices())
        # A VF that is an mdev parent is offered through its GPU (see
        # test_gpu_sriov_mdev), never whole.
        devices = self._devices('nvidia-468')
        self.assertEqual(['0000:81:00.0'], list(devices))
        (dep,) = devices['0000:81:00.0'].deployables
        self.assertEqual(('CUSTOM_NVIDIA_20B0_A100_4C', 'OWNER_CYBORG'),
                         dep.traits)
        self.assertEqual(['0000:81:00.3'],
                         [h.address for h in dep.attach_handles])


# cyborg's NVIDIA driver trait for (vendor, product, type name), run in a
# process of its own: cyborg's global options clash with Nova's.
UPSTREAM = """
import json, sys
from cyborg.accelerator.drivers.gpu.nvidia import sysinfo
result = []
for vendor_id, product_id, name in json.loads(sys.argv[1]):
    type_name = name.split(' ')[1].replace('-', '_') if name else None
    result.append(sysinfo._get_traits(vendor_id, product_id,
                                      type_name)['traits'])
print(json.dumps(result))
"""


class UpstreamTraitTest(simhost.SimHostTestCase):

    def test_same_traits_as_cyborg_nvidia_driver(self):
        cases = [('10de', '1eb8', 'GRID T4-1B'), ('10de', '1eb8', None),
                 ('10de', '13f2', 'GRID M60-2Q'),
                 ('102b', '0536', None)]
        out = subprocess.run(
            [sys.executable, '-c', UPSTREAM, json.dumps(cases)],
            check=True, capture_output=True, text=True).stdout
        expected = json.loads(out.strip().splitlines()[-1])
        for (vendor_id, product_id, name), traits in zip(cases, expected):
            function = simulator.SimFunction('0000:81:00.0', vendor_id,
                                             product_id, '030000')
            mdev_type = name and simulator.SimMdevType('x', name)
            self.assertEqual(traits, ['OWNER_CYBORG',
                                      gpu.gpu_trait(function, mdev_type)])
