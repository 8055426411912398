"""The gpu driver on SR-IOV GPUs whose VFs are mdev parents (vGPU 16 and
earlier): the simulator's A100 profile (sidecar_simulator.nvidia), whose
VFs each say 1 available while the GPU is not full."""

import os

from sidecar import exception
from sidecar import model
from sidecar.drivers import gpu
from sidecar.sources import sysfs
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost

A100_10C = 'nvidia-474'  # GRID A100-10C: 4 fit a 40 GB A100
A100_20C = 'nvidia-475'  # GRID A100-20C: 2 fit


class SriovMdevTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = nvidia.NvidiaHost()
        self.card = self.sim.add_mdev_card(num_vfs=20)
        self.sim.write(self.root)
        self.source = sysfs.SysfsSource(self.root)

    def _discover(self, max_instances=None, types=(A100_10C,)):
        self.config.config(group='gpu', device_selector=['10de:*'],
                           enabled_mdev_types=list(types),
                           mdev_max_instances=max_instances or {})
        self.driver = gpu.GpuDriver(self.conf, self.source)
        return self.driver.discover()

    def _warnings(self):
        return [line for line in self.log.output.splitlines()
                if line.startswith('WARNING')]

    def test_one_provider_of_what_the_gpu_hosts(self):
        (device,) = self._discover({A100_10C: '4'})
        self.assertEqual(self.card.pf, device.address)
        (dep,) = device.deployables
        self.assertEqual(
            (self.card.pf, 'VGPU', 4,
             ('CUSTOM_NVIDIA_20F1_A100_10C', 'OWNER_CYBORG')),
            (dep.name, dep.resource_class, dep.num_accelerators,
             dep.traits))
        self.assertEqual(
            [model.AttachHandle('MDEV', vf, A100_10C)
             for vf in self.card.vfs], list(dep.attach_handles))
        self.assertEqual([], self._warnings())

    def test_the_same_as_the_gpu_fills(self):
        before = self._discover({A100_10C: '4'})
        for index in range(4):
            self.sim.create_mdev(self.card, self.card.vfs[index], A100_10C)
            self.assertEqual(before, self.driver.discover(), index)
        # Full: no VF says it can host one more, the provider stays.
        self.assertEqual(
            [0] * 20, [f.mdev_type(A100_10C).available_instances
                       for f in self.source.functions() if f.is_vf])

    def test_without_max_instances_the_description_says_it(self):
        # NVIDIA's description of nvidia-474 ends with max_instance=4.
        (device,) = self._discover()
        self.assertEqual(4, device.deployables[0].num_accelerators)
        self.assertEqual([], self._warnings())

    def test_without_either_says_so(self):
        for vf in self.card.vfs:
            os.remove(os.path.join(
                self.root, 'bus/pci/devices', vf,
                'mdev_supported_types', A100_10C, 'description'))
        (device,) = self._discover()
        self.assertEqual(20, device.deployables[0].num_accelerators)
        (line,) = self._warnings()
        for word in (self.card.pf, A100_10C, 'mdev_max_instances', '(20)',
                     'max_instance'):
            self.assertIn(word, line)
        self.driver.discover()
        self.assertEqual([line], self._warnings())

    def test_never_more_than_one_per_vf(self):
        (device,) = self._discover({A100_10C: '40'})
        self.assertEqual(20, device.deployables[0].num_accelerators)

    def test_never_below_what_is_held(self):
        for index in range(3):
            self.sim.create_mdev(self.card, self.card.vfs[index], A100_10C)
        (device,) = self._discover({A100_10C: '2'})
        self.assertEqual(3, device.deployables[0].num_accelerators)

    def test_first_enabled_type_the_vfs_offer(self):
        (device,) = self._discover({A100_20C: '2'},
                                   types=('nvidia-1', A100_20C, A100_10C))
        (dep,) = device.deployables
        self.assertEqual(
            (2, A100_20C),
            (dep.num_accelerators, dep.attach_handles[0].mdev_type))

    def test_no_enabled_type_no_device(self):
        self.assertEqual([], self._discover(types=('nvidia-1',)))

    def test_bad_max_instances(self):
        for value in ('0', 'four', '-1', ''):
            self.config.config(group='gpu',
                               mdev_max_instances={A100_10C: value})
            self.assertRaises(exception.InvalidArgument, gpu.GpuDriver,
                              self.conf, self.source)
