"""A card with several FPGA regions: one deployable per region."""

import os

from sidecar.drivers import fpga
from sidecar import exception
from sidecar import model
from tests.unit.sidecar import simhost

CARD = '0000:81:00.0'
VFS = ['0000:81:00.1', '0000:81:00.2']
FUNCTION_TRAIT = ('CUSTOM_FPGA_FUNCTION_ID_INTEL_' +
                  simhost.FUNCTION_ID.upper())
OTHER_ID = 'a' * 32


class MultiRegionCardTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = self.host(fpgas=[{
            'num_vfs': 2, 'function_id': simhost.FUNCTION_ID,
            'address': CARD, 'region_per_vf': True}])
        self.source = self.write(self.sim)
        self.driver = fpga.FpgaDriver(self.conf, self.source)

    def _card(self):
        devices = self.driver.discover()
        self.assertEqual([CARD], [d.address for d in devices])
        return devices[0]

    def test_one_deployable_per_region(self):
        card = self._card()
        self.assertEqual(VFS, [dep.name for dep in card.deployables])
        for dep, vf in zip(card.deployables, VFS):
            self.assertEqual(1, dep.num_accelerators)
            self.assertEqual((model.AttachHandle('PCI', vf),),
                             dep.attach_handles)
            self.assertIn(FUNCTION_TRAIT, dep.traits)
        self.assertEqual([], self.warnings())

    def test_each_region_reports_its_own_function(self):
        self.sim.set_function_id(VFS[1], OTHER_ID)
        card = self._card()
        traits = [[t for t in dep.traits
                   if t.startswith(fpga.FUNCTION_ID_PREFIX)]
                  for dep in card.deployables]
        self.assertEqual([[FUNCTION_TRAIT],
                          [fpga.function_trait('intel', OTHER_ID)]], traits)
        self.assertEqual(OTHER_ID, self.driver.loaded_function(VFS[1]))
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(VFS[0]))

    def test_region_of_each_vf(self):
        self._card()
        for index, vf in enumerate(VFS):
            region = self.driver.region(vf)
            self.assertEqual(vf, region.address)
            self.assertEqual(
                os.path.join(self.root, 'class/fpga_manager/fpga%d' % index),
                region.manager)
        # The card's PF names no one region.
        self.assertRaises(exception.UnknownDevice, self.driver.region, CARD)

    def test_health_of_each_region(self):
        card = self._card()
        self.assertEqual((), self.driver.health(card).problems)
        self.sim.write_attr(VFS[1], 'fpga_region/region1/state', 'unknown')
        problems = self.driver.health(card).problems
        self.assertEqual(1, len(problems))
        self.assertIn('region1', problems[0])
