"""A DFL card with two ports, served port by port.

Against the real cyborg-conductor, Placement and Nova: the card's two
ports (released, each to its VF: ``DFL_FPGA_FME_PORT_RELEASE``, dfl.c
``dfl_fpga_cdev_config_ports_vf``) are two deployables and two resource
providers, each with its own PR region; a server asking another function
is given the free port, which alone is programmed (cyborg-conductor's
``fpga_program`` names only the card), and the server on the other port
keeps its function, its trait and its state.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

from tests.functional import test_sidecar  # noqa: E402

F_A = test_sidecar.F_A
F_B = test_sidecar.F_B
function_trait = test_sidecar.function_trait


class MultiRegionCardTest(test_sidecar.SidecarTestBase):

    def _profile(self, function_id):
        image = self.create_bitstream(function_id)
        return self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:bitstream_id': image}])[1]

    def test_regions_programmed_one_by_one(self):
        self.start_glance()
        flavor_a, flavor_b = self._profile(F_A), self._profile(F_B)
        self.start_accel_compute('compute1', num_pfs=1, num_vfs=2,
                                 function_ids=[F_A])
        regions = sorted(self.handle_bdfs('compute1'))
        self.assertEqual(2, len(regions))
        names = ['compute1_' + r for r in regions]
        # One provider per region, one accelerator each.
        for name in names:
            inv = self.inventory(name)['FPGA']
            self.assertEqual((1, 0), (inv['total'], inv['reserved']))
            self.assertIn(function_trait(F_A), self.traits(name))
        deployables = {d['name'] for d in self.cyborg.list_deployables()}
        self.assertTrue(set(names) <= deployables)

        first = self.boot(flavor_a)
        (arq,) = self.assert_accelerated(first, 1)
        used = next(r for r, n in zip(regions, names)
                    if self.provider(n)['uuid'] == arq['device_rp_uuid'])
        free = next(r for r in regions if r != used)
        # Region `used` held F_A already: nothing was programmed.
        self.assertEqual([], self.programmed('compute1'))

        # The second server gets the free region, programmed for it
        # while the first server runs on the other one.
        second = self.boot(flavor_b)
        (arq_b,) = self.assert_accelerated(second, 1)
        self.assertEqual(self.provider('compute1_' + free)['uuid'],
                         arq_b['device_rp_uuid'])
        self.assertEqual([(free, F_B)], self.programmed('compute1'))
        self.assertEqual(F_B, self.loaded('compute1', free))
        self.assertEqual(F_A, self.loaded('compute1', used))
        traits_used = self.traits('compute1_' + used)
        self.assertIn(function_trait(F_A), traits_used)
        self.assertNotIn(function_trait(F_B), traits_used)
        traits_free = self.traits('compute1_' + free)
        self.assertIn(function_trait(F_B), traits_free)
        self.assertNotIn(function_trait(F_A), traits_free)
        for name in names:
            self.assertEqual(0, self.inventory(name)['FPGA']['reserved'])
        self.assert_accelerated(self.api.get_server(first['id']), 1)
        # The sidecar's next report agrees with what the conductor wrote.
        self.sidecars['compute1'].cycle()
        self.assertIn(function_trait(F_B), self.traits('compute1_' + free))
        self.assertIn(function_trait(F_A), self.traits('compute1_' + used))
