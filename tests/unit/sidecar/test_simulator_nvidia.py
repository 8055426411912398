"""The NVIDIA profiles of the simulator: every path they write has a
source in the kernel's ABI documents or NVIDIA's tools, and the files read
as those tools read them."""

import os
import re

from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost

H100_4C = 'NVIDIA H100-4C'
H100_40C = 'NVIDIA H100-40C'


class NvidiaProfileTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = nvidia.NvidiaHost()
        self.h100 = self.sim.add_vfio_vgpu_card(
            num_vfs=4, types={0: H100_4C, 1: H100_4C})
        self.a100 = self.sim.add_mdev_card(num_vfs=6)
        self.whole = self.sim.add_passthrough_gpu(numa_node=1)
        self.sys = self.sim.write(os.path.join(self.root, 'sys'))

    def _read(self, address, relpath):
        with open(os.path.join(self.sys, 'bus/pci/devices', address,
                               relpath)) as f:
            return f.read()

    def _creatable(self, address):
        """As vgpu-device-manager's parseCreatableVGPUTypes reads it."""
        lines = self._read(address, 'nvidia/creatable_vgpu_types')
        result = []
        for line in lines.splitlines():
            type_id, _sep, name = line.partition(':')
            if type_id.strip() == 'ID':
                continue
            result.append((int(type_id), name.strip()))
        return result

    def test_every_path_has_a_source(self):
        self.sim.create_mdev(self.a100, self.a100.vfs[0], 'nvidia-474')
        card = self.sim.add_passthrough_gpu('rtx-a6000',
                                            audio_driver='snd_hda_intel')
        self.sim.add_switch_port(card)
        self.sim.write(self.sys)
        paths = nvidia.written_paths(self.sys)
        self.assertGreater(len(paths), 300)
        self.assertEqual([], [p for p in paths
                              if nvidia.source_of(p) is None])
        kinds = {nvidia.source_of(p) for p in paths}
        self.assertEqual(set(nvidia.SOURCES), kinds)

    def test_a_stray_path_has_no_source(self):
        vf = 'devices/pci0000:00/%s' % self.h100.vfs[0]
        for path in (vf + '/nvidia/vgpu_type', vf + '/current_vgpu_type',
                     vf + '/mdev_supported_types/nvidia-1/max_instances',
                     vf + '/driver_override'):
            self.assertIsNone(nvidia.source_of(path), path)

    def test_vfio_vgpu_card(self):
        pf, vfs = self.h100.pf, self.h100.vfs
        for address in [pf] + vfs:
            self.assertEqual(
                os.path.join(self.sys, 'bus/pci/drivers/nvidia'),
                os.path.realpath(os.path.join(
                    self.sys, 'bus/pci/devices', address, 'driver')))
        self.assertFalse(os.path.exists(os.path.join(
            self.sys, 'bus/pci/devices', pf, 'nvidia')))
        self.assertEqual('0x2331', self._read(pf, 'device').strip())
        self.assertEqual('4', self._read(pf, 'sriov_numvfs').strip())
        # A VF with a type: its id, and only that type listed.
        self.assertEqual('1054\n', self._read(vfs[0],
                                              'nvidia/current_vgpu_type'))
        self.assertEqual([(1054, H100_4C)], self._creatable(vfs[0]))
        # A free VF: 0, and only the card's type (one type per GPU).
        self.assertEqual('0\n', self._read(vfs[2],
                                           'nvidia/current_vgpu_type'))
        self.assertEqual([(1054, H100_4C)], self._creatable(vfs[2]))
        self.assertTrue(re.match(r'^ID\s+:', self._read(
            vfs[2], 'nvidia/creatable_vgpu_types')))

    def _same_host(self):
        """The same cards, described again, as a restarted process does."""
        sim = nvidia.NvidiaHost()
        sim.add_vfio_vgpu_card(num_vfs=4, types={0: H100_4C, 1: H100_4C})
        sim.add_mdev_card(num_vfs=6)
        sim.add_passthrough_gpu(numa_node=1)
        return sim

    def test_types_kept_across_a_restart(self):
        # The driver keeps a VF's type while the services restart: a host
        # described again takes it from the tree (SimulatedHost.load_state
        # asks its extensions), and writes it again as it was.
        vfs = self.h100.vfs
        self.sim.set_vgpu_type(self.h100, vfs[0], '0')
        self.sim.set_vgpu_type(self.h100, vfs[2], '1054')
        again = self._same_host()
        again.load_state(self.sys)
        self.assertEqual({vfs[0]: '0', vfs[1]: '1054', vfs[2]: '1054',
                          vfs[3]: '0'}, again.cards[0].current)
        again.write(self.sys)
        self.assertEqual('1054\n', self._read(vfs[2],
                                              'nvidia/current_vgpu_type'))
        self.assertEqual('0\n', self._read(vfs[0],
                                           'nvidia/current_vgpu_type'))

    def test_one_nvidia_extension_a_host(self):
        self.assertIs(self.sim, nvidia.of(self.sim.host))
        self.assertRaises(ValueError, nvidia.NvidiaHost, self.sim.host)

    def test_types_follow_the_card(self):
        vfs = self.h100.vfs
        for vf in vfs[:2]:
            self.sim.set_vgpu_type(self.h100, vf, '0')
        self.assertEqual(8, len(self._creatable(vfs[3])))
        self.sim.set_vgpu_type(self.h100, vfs[0], '1060')
        self.sim.set_vgpu_type(self.h100, vfs[1], '1060')
        # H100-40C fits twice: the card is full.
        self.assertEqual([], self._creatable(vfs[2]))
        self.assertRaises(ValueError, self.sim.set_vgpu_type, self.h100,
                          vfs[2], '1060')
        # ... and its configured VFs list nothing either
        # (sidecar_simulator.nvidia_vfio).
        self.assertEqual([], self._creatable(vfs[0]))
        self.sim.set_vgpu_type(self.h100, vfs[1], '0')
        self.assertEqual([(1060, H100_40C)], self._creatable(vfs[0]))

    def test_mdev_card(self):
        vfs = self.a100.vfs
        type_dir = 'mdev_supported_types/nvidia-474/'  # A100-10C: 4 fit
        self.assertEqual('GRID A100-10C\n', self._read(vfs[0],
                                                       type_dir + 'name'))
        for index in range(4):
            self.sim.create_mdev(self.a100, vfs[index], 'nvidia-474')
        counts = [int(self._read(vf, type_dir + 'available_instances'))
                  for vf in vfs]
        self.assertEqual([0] * 6, counts)
        self.assertEqual(1, len(os.listdir(os.path.join(
            self.sys, 'bus/pci/devices', vfs[0], type_dir, 'devices'))))

    def test_mdev_card_one_type_per_gpu(self):
        vfs = self.a100.vfs
        self.sim.create_mdev(self.a100, vfs[0], 'nvidia-475')  # A100-20C
        avail = {t: [int(self._read(vf, 'mdev_supported_types/%s/'
                                    'available_instances' % t))
                     for vf in vfs] for t in ('nvidia-474', 'nvidia-475')}
        self.assertEqual([0] * 6, avail['nvidia-474'])
        self.assertEqual([0] + [1] * 5, avail['nvidia-475'])

    def test_whole_gpu_and_iommu_groups(self):
        address = self.whole.pf
        self.assertEqual('vfio-pci', os.path.basename(os.readlink(
            os.path.join(self.sys, 'bus/pci/devices', address, 'driver'))))
        group = os.path.realpath(os.path.join(
            self.sys, 'bus/pci/devices', address, 'iommu_group'))
        self.assertEqual([address], os.listdir(os.path.join(group,
                                                            'devices')))
        self.assertEqual('1\n', self._read(address, 'numa_node'))
        groups = {os.readlink(os.path.join(
            self.sys, 'bus/pci/devices', a, 'iommu_group'))
            for card in self.sim.cards for a in [card.pf] + card.vfs}
        self.assertEqual(1 + 4 + 1 + 6 + 1, len(groups))
