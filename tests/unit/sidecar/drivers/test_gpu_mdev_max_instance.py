"""An SR-IOV GPU whose VFs are mdev parents is sized by NVIDIA's
``max_instance`` (sidecar.drivers.gpu_sriov_mdev): the simulator's 80 GB
A100 with NVIDIA's documented A100D-20C configuration (4 per GPU)."""

from sidecar.drivers import gpu
from sidecar.drivers import gpu_sriov_mdev
from sidecar.sources import sysfs
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost

A100D_20C = 'nvidia-697'  # GRID A100D-20C: 4 fit an 80 GB A100
A100D_40C = 'nvidia-698'


class A100D20CTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = nvidia.NvidiaHost()
        self.card = self.sim.add_mdev_card('a100-pcie-80gb', num_vfs=16)
        self.sim.write(self.root)
        self.source = sysfs.SysfsSource(self.root)

    def discover(self, overrides=None):
        self.config.config(group='gpu', device_selector=['10de:*'],
                           enabled_mdev_types=[A100D_20C],
                           mdev_max_instances=overrides or {})
        self.driver = gpu.GpuDriver(self.conf, self.source)
        return self.driver.discover()

    def test_documented_configuration_offers_4(self):
        (device,) = self.discover()
        (dep,) = device.deployables
        self.assertEqual((4, 'CUSTOM_NVIDIA_20B5_A100D_20C'),
                         (dep.num_accelerators, dep.traits[0]))
        self.assertEqual(16, len(dep.attach_handles))
        self.assertEqual([], self.warnings())

    def test_steady_as_it_fills(self):
        before = self.discover()
        for index in range(4):
            self.sim.create_mdev(self.card, self.card.vfs[index], A100D_20C)
            self.assertEqual(before, self.driver.discover(), index)

    def test_override_wins(self):
        (device,) = self.discover({A100D_20C: '2'})
        self.assertEqual(2, device.deployables[0].num_accelerators)


class DescribedMaxTest(simhost.SimHostTestCase):

    def test_nvidia_format(self):
        for text, expected in (
                ('num_heads=4, frl_config=60, framebuffer=20480M, '
                 'max_resolution=7680x4320, max_instance=4', 4),
                ('max_instance=16, num_heads=1', 16),
                ('num_heads=1,max_instance=2', 2),
                ('max_instance=0', None),
                ('not_max_instance=4', None),
                ('max_instance=x', None),
                ('', None),
                (None, None)):
            self.assertEqual(expected, gpu_sriov_mdev.described_max(text),
                             text)

    def test_the_simulator_writes_it(self):
        sim = nvidia.NvidiaHost()
        card = sim.add_mdev_card('a100-pcie-80gb', num_vfs=2)
        sim.write(self.root)
        source = sysfs.SysfsSource(self.root)
        self.assertEqual(
            'num_heads=1, frl_config=60, framebuffer=20480M, '
            'max_resolution=4096x2400, max_instance=4',
            source.read_attr(card.vfs[0], 'mdev_supported_types/%s/'
                             'description' % A100D_20C))
        self.assertEqual('nvidia', source.functions()[0].driver)
        self.assertIsNotNone(nvidia.source_of(
            'devices/pci0000:00/%s/mdev_supported_types/%s/description'
            % (card.vfs[0], A100D_40C)))
