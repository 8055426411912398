"""vGPU 17 capacity per card and type (sidecar.drivers.gpu_vfio_card) on
the simulator's H100 80 GB: NVIDIA's documented H100-20C configuration
(4 per GPU) offers 4, steadily as the card fills, and every type of the
option is reachable on an empty card."""

import json
import logging
import os

from sidecar.drivers import gpu
from sidecar.drivers import gpu_vfio
from sidecar.drivers import gpu_vfio_card
from sidecar.sources import base as sources
from sidecar.sources import sysfs
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost

H100_20C, ID_20C = 'NVIDIA H100-20C', '1059'  # 4 per GPU
H100_40C, ID_40C = 'NVIDIA H100-40C', '1060'  # 2 per GPU
TRAIT_20C = 'CUSTOM_NVIDIA_2331_H100_20C'
TRAIT_40C = 'CUSTOM_NVIDIA_2331_H100_40C'


class _Card(simhost.SimHostTestCase):

    offers = [H100_20C]

    def setUp(self):
        super().setUp()
        self.state = self.conf.sidecar.state_path
        self.sim = nvidia.NvidiaHost()
        self.card = self.sim.add_vfio_vgpu_card(num_vfs=8)
        self.vfs = self.card.vfs
        self.sim.write(self.root)
        self.config.config(group='gpu', device_selector=['10de:*'],
                           vfio_vgpu_types=['2331:' + n
                                            for n in self.offers])
        self.driver = gpu.GpuDriver(self.conf, sysfs.SysfsSource(self.root))
        self.given = {}

    def give(self, index, type_id, name):
        """VF ``index`` given ``name`` at bind (the record, then the
        write, as sidecar.program.vgpu_types does)."""
        vf = self.vfs[index]
        self.given[vf] = {'card': self.card.pf, 'type': type_id,
                          'name': name, 'handle': 'h-%d' % index}
        with open(os.path.join(self.state, gpu_vfio.SET_AT_BIND_FILE),
                  'w') as f:
            json.dump(self.given, f)
        self.sim.set_vgpu_type(self.card, vf, type_id)

    def offered(self):
        """``{deployable: (count, type traits, VFs)}``."""
        (device,) = self.driver.discover()
        return {d.name: (d.num_accelerators,
                         [t for t in d.traits if t.startswith('CUSTOM_')],
                         [h.address for h in d.attach_handles])
                for d in device.deployables}


class DocumentedConfigurationTest(_Card):

    def test_h100_20c_offers_4(self):
        self.assertEqual(
            {self.card.pf + '_H100_20C': (4, [TRAIT_20C], self.vfs)},
            self.offered())
        self.assertEqual([], self.warnings())

    def test_steady_as_the_card_fills(self):
        before = self.offered()
        for index in range(4):
            self.give(index, ID_20C, H100_20C)
            self.assertEqual(before, self.offered(), index)
        # Full: NVIDIA's driver lists no type on any VF; the provider and
        # its handles stay (and its VFs' names).
        for vf in self.vfs:
            self.assertEqual([], self.sim.creatable(self.card, vf))
        self.assertEqual([], self.warnings())

    def test_operator_typed_vfs_count(self):
        self.sim.set_vgpu_type(self.card, self.vfs[0], ID_20C)
        self.assertEqual({
            self.vfs[0]: (1, [TRAIT_20C], [self.vfs[0]]),
            self.card.pf + '_H100_20C': (3, [TRAIT_20C], self.vfs[1:])},
            self.offered())

    def test_override(self):
        self.config.config(group='gpu',
                           mdev_max_instances={H100_20C: '2'})
        self.driver = gpu.GpuDriver(self.conf, sysfs.SysfsSource(self.root))
        self.assertEqual(2, self.offered()[self.card.pf + '_H100_20C'][0])

    def test_never_more_than_its_vfs(self):
        self.config.config(group='gpu',
                           vfio_vgpu_types=['2331:NVIDIA H100-4C'])
        self.driver = gpu.GpuDriver(self.conf, sysfs.SysfsSource(self.root))
        # 20 fit one H100; 8 VFs host one each.
        self.assertEqual(8, self.offered()[self.card.pf + '_H100_4C'][0])


class TwoTypesTest(_Card):

    offers = [H100_20C, H100_40C]

    def test_every_type_reachable_on_an_empty_card(self):
        self.assertEqual({
            self.card.pf + '_H100_20C': (4, [TRAIT_20C], self.vfs),
            self.card.pf + '_H100_40C': (2, [TRAIT_40C], self.vfs)},
            self.offered())

    def test_one_type_per_gpu(self):
        self.give(3, ID_40C, H100_40C)
        self.assertEqual(
            {self.card.pf + '_H100_40C': (2, [TRAIT_40C], self.vfs)},
            self.offered())
        self.give(5, ID_40C, H100_40C)
        # Full (2 of 2): still the same.
        self.assertEqual(
            {self.card.pf + '_H100_40C': (2, [TRAIT_40C], self.vfs)},
            self.offered())

    def test_operator_type_not_in_the_option_offers_nothing(self):
        self.sim.set_vgpu_type(self.card, self.vfs[0], '1054')  # 4C
        self.assertEqual(
            {self.vfs[0]: (1, ['CUSTOM_NVIDIA_2331_H100_4C'],
                           [self.vfs[0]])}, self.offered())
        self.assertIn('are not offered', self.log.output)


class MaxInstancesTest(simhost.SimHostTestCase):

    def _max(self, name, names, product='2331', listing=8, overrides=None):
        problems = sources.ProblemLog(logging.getLogger('sidecar.test'))
        with problems.cycle():
            return gpu_vfio_card.max_instances(
                name, product, names, listing, overrides or {}, problems,
                '0000:81:00.0')

    def test_framebuffer_over_the_types(self):
        # The largest type the card named is its framebuffer.
        self.assertEqual(4, self._max(H100_20C, [H100_20C, 'NVIDIA H100-80C'],
                                      product='ffff'))
        # The guide's board size where the card named only smaller ones.
        self.assertEqual(4, self._max(H100_20C, [H100_20C]))
        self.assertEqual(2, self._max('NVIDIA L40S-24Q', [], product='26b9'))

    def test_unknown_size_offers_the_listing_vfs_and_says_so(self):
        self.assertEqual(7, self._max('NVIDIA H100-1-10C', [], listing=7))
        self.assertIn('mdev_max_instances to NVIDIA H100-1-10C:<count>',
                      self.warnings()[0])
        self.assertEqual(3, self._max('NVIDIA H100-1-10C', [], overrides={
            'NVIDIA H100-1-10C': 3}))

    def test_sizes(self):
        for name, size in ((H100_20C, 20), ('NVIDIA L40-48Q', 48),
                           ('GRID A100D-4C', 4), ('NVIDIA H100-1-10C', None),
                           ('NVIDIA H200X-1-18C', None), ('H100', None),
                           ('NVIDIA L4-1B', 1)):
            self.assertEqual(size, gpu_vfio_card.type_size(name), name)
