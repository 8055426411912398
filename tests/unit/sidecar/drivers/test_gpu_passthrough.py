"""Whole GPUs (PGPU) and their IOMMU group, host driver and NUMA node,
on the simulator's NVIDIA profiles (sidecar_simulator.nvidia)."""

from sidecar.drivers import gpu
from sidecar.sources import sysfs
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost


class PassthroughTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = nvidia.NvidiaHost()

    def _discover(self, drivers=None):
        self.sim.write(self.root)
        self.config.config(group='gpu', device_selector=['10de:*'])
        if drivers is not None:
            self.config.config(group='gpu', passthrough_drivers=drivers)
        self.driver = gpu.GpuDriver(self.conf, sysfs.SysfsSource(self.root))
        return {d.address: d for d in self.driver.discover()}

    def _warnings(self):
        return [line for line in self.log.output.splitlines()
                if line.startswith('WARNING')]

    def test_alone_on_vfio_pci_with_its_numa_trait(self):
        card = self.sim.add_passthrough_gpu(numa_node=1)
        devices = self._discover()
        (dep,) = devices[card.pf].deployables
        self.assertEqual(
            ('PGPU', ('CUSTOM_NVIDIA_2331', 'CUSTOM_PCI_NUMA_NODE_1',
                      'OWNER_CYBORG')),
            (dep.resource_class, dep.traits))
        self.assertEqual([], self._warnings())

    def test_no_numa_affinity_no_trait(self):
        card = self.sim.add_passthrough_gpu()
        (dep,) = self._discover()[card.pf].deployables
        self.assertEqual(('CUSTOM_NVIDIA_2331', 'OWNER_CYBORG'), dep.traits)

    def test_unbound_is_offered(self):
        card = self.sim.add_passthrough_gpu(driver=None)
        self.assertIn(card.pf, self._discover())

    def test_held_by_a_host_driver_is_not_offered(self):
        held = self.sim.add_passthrough_gpu(driver='nvidia')
        free = self.sim.add_passthrough_gpu()
        devices = self._discover()
        self.assertEqual([free.pf], list(devices))
        (line,) = self._warnings()
        for word in (held.pf, 'host driver nvidia', 'vfio-pci'):
            self.assertIn(word, line)

    def test_configured_variant_driver(self):
        card = self.sim.add_passthrough_gpu(driver='nvgrace-gpu-vfio-pci')
        self.assertEqual({}, self._discover())
        self.assertIn(card.pf, self._discover(
            drivers=['vfio-pci', 'nvgrace-gpu-vfio-pci']))

    def test_audio_function_that_goes_with_it(self):
        for driver in (None, 'vfio-pci'):
            self.sim = nvidia.NvidiaHost()
            card = self.sim.add_passthrough_gpu('rtx-a6000',
                                                audio_driver=driver)
            self.assertEqual([card.pf], list(self._discover()), driver)
        self.assertEqual([], self._warnings())

    def test_audio_function_held_by_the_host(self):
        card = self.sim.add_passthrough_gpu('rtx-a6000',
                                            audio_driver='snd_hda_intel')
        self.assertEqual({}, self._discover())
        (line,) = self._warnings()
        for word in (card.pf, 'IOMMU group 0', card.functions[0],
                     'held by snd_hda_intel'):
            self.assertIn(word, line)

    def test_two_gpus_in_one_group_never(self):
        first = self.sim.add_passthrough_gpu()
        second = self.sim.add_passthrough_gpu(group_with=first)
        self.assertEqual({}, self._discover())
        warnings = self._warnings()
        self.assertEqual(2, len(warnings))
        self.assertIn('%s (another device)' % second.pf, warnings[0])
        self.assertIn('%s (another device)' % first.pf, warnings[1])

    def test_bridges_in_the_group_are_fine(self):
        card = self.sim.add_passthrough_gpu()
        self.sim.add_switch_port(card)
        self.assertEqual([card.pf], list(self._discover()))

    def test_vgpu17_pf_is_not_offered_whole(self):
        # Bound to nvidia, with or without its VFs yet.
        card = self.sim.add_vfio_vgpu_card(num_vfs=0)
        self.assertEqual({}, self._discover())
        self.assertIn('host driver nvidia', self._warnings()[0])
        self.assertIn(card.pf, self._warnings()[0])

    def test_vgpu17_vfs_carry_their_numa_trait(self):
        card = self.sim.add_vfio_vgpu_card(
            num_vfs=2, types={0: 'NVIDIA H100-4C'}, numa_node=0)
        (dep,) = self._discover()[card.pf].deployables
        self.assertIn('CUSTOM_PCI_NUMA_NODE_0', dep.traits)
