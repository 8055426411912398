"""Programming one region of a card with several."""

from sidecar import exception
from sidecar import model
from tests.unit.sidecar import test_program as base

PF = base.PF
REGIONS = base.VFS  # each region is served by its VF
RPS = ['rp-compute1_' + r for r in REGIONS]


def _cpid(address):
    domain, bus, slot, function = model.parse_bdf(address)
    return {'cpid_type': 'PCI', 'cpid_info': {
        'domain': domain, 'bus': bus, 'device': slot, 'function': function}}


class FakeCard(base.FakeFpga):
    """A card with a region on each of its two VFs."""

    def __init__(self):
        super().__init__()
        self.functions = {r: None for r in REGIONS}

    def device(self, address):
        if address != PF:
            return None
        deps = []
        for region in REGIONS:
            traits = ('OWNER_CYBORG',)
            if self.functions[region]:
                traits += ('CUSTOM_FPGA_FUNCTION_ID_INTEL_%s'
                           % self.functions[region],)
            deps.append(model.Deployable(
                name=region, resource_class='FPGA', num_accelerators=1,
                traits=traits,
                attach_handles=(model.AttachHandle('PCI', region),),
                driver_name='intel'))
        return model.Device('FPGA', '8086', '09c4', PF, tuple(deps))

    def program(self, address, path, driver_name=None):
        self.driver_names.append(driver_name)
        with open(path) as f:
            self.functions[address] = f.read()
        self.programmed.append((address, self.functions[address]))


class FakeCyborg(base.FakeCyborg):

    def bind(self, consumer, profile, rp=RPS[0], state='Bound'):
        super().bind(consumer, profile, rp)
        self.arqs[consumer][-1]['state'] = state

    def all_arqs(self):
        return [a for arqs in self.arqs.values() for a in arqs]


class RegionProgramTest(base.ProgramTestBase):

    def setUp(self):
        super().setUp()
        self.fpga = FakeCard()
        self.cyborg = FakeCyborg()
        self.manager = self._manager()
        # Region 0 holds function A for server-0, which runs on it.
        self.fpga.functions[REGIONS[0]] = 'AAAA1111'
        self._allocate('server-0', 'dp-a', RPS[0])
        self.domains.users = {REGIONS[0]: 'instance-0'}

    def _binding(self, consumer, profile, rp):
        """``consumer`` is scheduled to ``rp``; its ARQ is being bound."""
        self.placement.allocated.setdefault(rp, []).append(consumer)
        self.cyborg.bind(consumer, profile, rp, state='BindStarted')

    def test_region1_programmed_while_region0_in_use(self):
        self._binding('server-1', 'dp-b', RPS[1])
        self.assertTrue(self._program(base.IMAGE_B))
        self.assertEqual([(REGIONS[1], 'BBBB2222')], self.fpga.programmed)
        # Only region 1's provider was reserved and given the trait.
        self.assertEqual([('reserve', RPS[1]),
                          ('restore', RPS[1], {'FPGA': 0})],
                         self.placement.history)
        self.assertEqual({RPS[1]: [base.TRAIT_B]}, self.placement.traits)
        self.assertEqual('AAAA1111', self.fpga.functions[REGIONS[0]])

    def test_region0_refused_while_its_provider_is_promised(self):
        # A server scheduled to region 0 beside server-0 asks function B:
        # server-0 holds an allocation on region 0 and wants A, loaded.
        self.domains.users = {}
        self._binding('server-2', 'dp-b', RPS[0])
        ex = self.assertRaises(exception.DeviceBusy, self._program,
                               base.IMAGE_B)
        self.assertIn('server-0', str(ex))
        self.assertIn(REGIONS[0], str(ex))
        self.assertEqual([], self.fpga.programmed)
        self.assertEqual([], self.placement.history)

    def test_region0_refused_while_a_domain_uses_it(self):
        self._binding('server-2', 'dp-b', RPS[0])
        ex = self.assertRaises(exception.DeviceBusy, self._program,
                               base.IMAGE_B)
        self.assertIn('instance-0', str(ex))
        self.assertEqual([], self.fpga.programmed)

    def test_a_region_already_holding_it_is_not_programmed(self):
        self.fpga.functions[REGIONS[1]] = 'BBBB2222'
        self._binding('server-1', 'dp-b', RPS[1])
        self.assertTrue(self._program(base.IMAGE_B))
        self.assertEqual([], self.fpga.programmed)

    def test_the_card_alone_names_no_region(self):
        # Cyborg's deployable program API: no ARQ says which region.
        ex = self.assertRaises(exception.InvalidArgument, self._program,
                               base.IMAGE_B)
        self.assertIn('2 regions', str(ex))
        self.assertIn('name the region', str(ex))
        self.assertEqual([], self.fpga.programmed)

    def test_an_arq_asking_another_function_names_no_region(self):
        self._binding('server-1', 'dp-a', RPS[1])
        self.assertRaises(exception.InvalidArgument, self._program,
                          base.IMAGE_B)

    def test_region_named_by_its_address(self):
        self.assertTrue(self._program(base.IMAGE_B, _cpid(REGIONS[1])))
        self.assertEqual([(REGIONS[1], 'BBBB2222')], self.fpga.programmed)
        self.assertEqual({RPS[1]: [base.TRAIT_B]}, self.placement.traits)
