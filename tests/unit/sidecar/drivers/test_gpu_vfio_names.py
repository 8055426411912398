"""vGPU 17 type names kept across full cards and restarts
(sidecar.drivers.gpu_vfio_names), on the simulator's H100 whose lists
NVIDIA's driver empties when the card is full
(sidecar_simulator.nvidia_vfio)."""

import json
import os

from sidecar.drivers import gpu
from sidecar.drivers import gpu_vfio_names
from sidecar.sources import sysfs
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost

H100_40C = 'NVIDIA H100-40C'  # 2 per GPU
TRAIT_40C = 'CUSTOM_NVIDIA_2331_H100_40C'


class KnownNamesTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.state = self.conf.sidecar.state_path
        self.sim = nvidia.NvidiaHost()
        self.card = self.sim.add_vfio_vgpu_card(num_vfs=4,
                                                types={0: H100_40C})
        self.vfs = self.card.vfs
        self.sim.write(self.root)
        self.config.config(group='gpu', device_selector=['10de:*'])

    def discover(self):
        driver = gpu.GpuDriver(self.conf, sysfs.SysfsSource(self.root))
        driver.keep_names()  # as the daemon's
        return driver, driver.discover()

    def reported(self, devices):
        return [(d.name, [t for t in d.traits if t.startswith('CUSTOM_')])
                for device in devices for d in device.deployables]

    def test_full_card_lists_nothing_the_vfs_stay(self):
        driver, before = self.discover()
        self.assertEqual([(self.vfs[0], [TRAIT_40C])],
                         self.reported(before))
        self.sim.set_vgpu_type(self.card, self.vfs[1], '1060')
        # Full: NVIDIA's driver lists no type on any VF.
        for vf in self.vfs:
            self.assertEqual([], self.sim.creatable(self.card, vf))
        self.assertEqual([(self.vfs[0], [TRAIT_40C]),
                          (self.vfs[1], [TRAIT_40C])],
                         self.reported(driver.discover()))
        self.assertEqual([], self.warnings())

    def test_names_survive_a_restart(self):
        self.discover()
        self.sim.set_vgpu_type(self.card, self.vfs[1], '1060')
        # A new sidecar on the full card reads the names it kept.
        _driver, devices = self.discover()
        self.assertEqual([(self.vfs[0], [TRAIT_40C]),
                          (self.vfs[1], [TRAIT_40C])],
                         self.reported(devices))
        with open(os.path.join(self.state,
                               gpu_vfio_names.NAMES_FILE)) as f:
            kept = json.load(f)
        self.assertEqual('2331', kept[self.card.pf]['product'])
        self.assertEqual(H100_40C, kept[self.card.pf]['types']['1060'])

    def test_another_product_starts_afresh(self):
        path = os.path.join(self.state, gpu_vfio_names.NAMES_FILE)
        with open(path, 'w') as f:
            json.dump({self.card.pf: {'product': '26b5', 'types': {
                '1060': 'NVIDIA L40-24Q'}}}, f)
        self.sim.set_vgpu_type(self.card, self.vfs[1], '1060')
        _driver, devices = self.discover()
        self.assertEqual(
            [(vf, ['CUSTOM_NVIDIA_2331_TYPE_1060']) for vf in self.vfs[:2]],
            self.reported(devices))

    def test_malformed_names_ignored(self):
        path = os.path.join(self.state, gpu_vfio_names.NAMES_FILE)
        with open(path, 'w') as f:
            json.dump({self.card.pf: {'product': '2331', 'types': {
                '1060': 'NVIDIA <x>', 'x': H100_40C}}}, f)
        self.sim.set_vgpu_type(self.card, self.vfs[1], '1060')
        _driver, devices = self.discover()
        self.assertEqual(
            [(vf, ['CUSTOM_NVIDIA_2331_TYPE_1060']) for vf in self.vfs[:2]],
            self.reported(devices))

    def test_not_kept_without_keep_names(self):
        # manage discover's driver writes nothing.
        driver = gpu.GpuDriver(self.conf, sysfs.SysfsSource(self.root))
        driver.discover()
        self.assertEqual([], os.listdir(self.state))

    def test_unwritable_state_path_warns(self):
        self.config.config(state_path='/proc/no-such-dir', group='sidecar')
        self.sim.set_vgpu_type(self.card, self.vfs[1], '1060')
        _driver, devices = self.discover()
        self.assertEqual(2, len(self.reported(devices)))
        self.assertIn('Cannot keep vGPU type names', self.warnings()[0])
