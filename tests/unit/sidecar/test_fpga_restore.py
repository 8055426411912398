"""After a host reboot each FPGA port holds its card's default function;
the sidecar loads the function of the Bound ARQ on it again, before its
first report (sidecar.program.fpga_restore)."""

from sidecar import exception
from sidecar.program import journal
from sidecar.program import manager as program
from tests.unit.sidecar import test_program
from tests.unit.sidecar import test_program_dfl

PF = test_program.PF
RP = test_program.RP
IMAGE_A, IMAGE_B = test_program.IMAGE_A, test_program.IMAGE_B
TRAIT_A, TRAIT_B = test_program.TRAIT_A, test_program.TRAIT_B


def _bound(consumer, profile, rp=RP, host='compute1', state='Bound'):
    return {'uuid': 'arq-' + consumer, 'instance_uuid': consumer,
            'state': state, 'hostname': host, 'device_rp_uuid': rp,
            'attach_handle_type': 'PCI', 'device_profile_name': profile,
            'device_profile_group_id': 0}


class FakeCyborg(test_program.FakeCyborg):

    def __init__(self):
        super().__init__()
        self.reads = 0

    def bound(self, consumer, profile, **kwargs):
        self.arqs.setdefault(consumer, []).append(
            _bound(consumer, profile, **kwargs))

    def all_arqs(self):
        self.reads += 1
        if self.down:
            raise exception.CyborgError(reason='Cyborg is unreachable')
        return [arq for arqs in self.arqs.values() for arq in arqs]


class FakeImages(test_program.FakeImages):

    def find_by_function(self, function_id):
        (image,) = [i for i, f in test_program.FUNCTIONS.items()
                    if f.lower() == function_id.lower()]
        return self.get_metadata(image)


class RestoreTest(test_program.ProgramTestBase):

    def setUp(self):
        super().setUp()
        self.cyborg = FakeCyborg()
        self.manager = program.ProgramManager(
            'compute1', self.fpga, self.fpga, FakeImages(), self.placement,
            self.domains, journal.Journal(self.state), self.cyborg)

    def _server(self, consumer='server-a', profile='dp-a', **kwargs):
        self.placement.allocated.setdefault(RP, []).append(consumer)
        self.cyborg.bound(consumer, profile, **kwargs)

    def test_bitstream_loaded_again_once(self):
        # The card's default function after the reboot: not the server's.
        self.fpga.function = None
        self._server()
        self.manager.restore_functions()
        self.assertEqual([(PF, 'AAAA1111')], self.fpga.programmed)
        self.assertEqual(['intel'], self.fpga.driver_names)
        # The same job as fpga_program: reserved meanwhile, given back,
        # the trait set, the journal closed.
        self.assertEqual([('reserve', RP), ('restore', RP, {'FPGA': 0})],
                         self.placement.history)
        self.assertEqual([TRAIT_A], self.placement.traits[RP])
        self.assertEqual([], journal.Journal(self.state).jobs.items())
        # Done: the ARQs are not read again by this sidecar.
        self.manager.restore_functions()
        self.assertEqual(1, self.cyborg.reads)
        self.assertEqual(1, len(self.fpga.programmed))

    def test_port_holding_its_function_is_left(self):
        self.fpga.function = 'AAAA1111'
        self._server()
        self.manager.restore_functions()
        self.assertEqual(([], []), (self.fpga.programmed,
                                    self.placement.history))
        self.manager.restore_functions()
        self.assertEqual(1, self.cyborg.reads)

    def test_function_id_looked_up_in_glance(self):
        # accel:function_id: the one image naming it, as cyborg-conductor
        # finds it at bind.
        self._server(profile='dp-fn-b')
        self.manager.restore_functions()
        self.assertEqual([(PF, 'BBBB2222')], self.fpga.programmed)
        self.assertEqual([TRAIT_B], self.placement.traits[RP])

    def test_profiles_asking_no_bitstream_are_left(self):
        self._server('server-t', 'dp-trait-b')
        self._server('server-x', 'dp-any')
        self.manager.restore_functions()
        self.assertEqual([], self.fpga.programmed)
        self.manager.restore_functions()
        self.assertEqual(1, self.cyborg.reads)

    def test_other_arqs_are_left(self):
        self.cyborg.bound('other-host', 'dp-a', host='compute2')
        self.cyborg.bound('unbound', 'dp-a', state='Unbound')
        self.cyborg.bound('elsewhere', 'dp-a', rp='rp-compute1_0000:82:00.0')
        self.manager.restore_functions()
        self.assertEqual([], self.fpga.programmed)

    def test_failure_is_retried_next_cycle(self):
        self._server()
        self.fpga.fail = 'the FME refused the load'
        log = self.useFixture(test_program.fixtures.FakeLogger())
        self.manager.restore_functions()
        self.assertEqual([], self.fpga.programmed)
        self.assertIn('loading its FPGA function on %s again failed' % PF,
                      log.output)
        self.assertIn('the FME refused the load', log.output)
        # Its provider is given back (allocated to its server), its trait
        # untouched, the journal closed.
        self.assertEqual([('reserve', RP), ('restore', RP, {'FPGA': 0})],
                         self.placement.history)
        self.assertNotIn(RP, self.placement.traits)
        self.assertEqual([], journal.Journal(self.state).jobs.items())
        self.fpga.fail = None
        self.manager.restore_functions()
        self.assertEqual([(PF, 'AAAA1111')], self.fpga.programmed)
        self.assertEqual(2, self.cyborg.reads)
        self.manager.restore_functions()
        self.assertEqual(2, self.cyborg.reads)

    def test_cyborg_unreadable_is_retried(self):
        self._server()
        self.cyborg.down = True
        self.manager.restore_functions()
        self.assertEqual([], self.fpga.programmed)
        self.cyborg.down = False
        self.manager.restore_functions()
        self.assertEqual([(PF, 'AAAA1111')], self.fpga.programmed)

    def test_not_under_a_running_domain(self):
        self._server()
        self.domains.users = {test_program.VFS[0]: 'instance-1'}
        self.manager.restore_functions()
        self.assertEqual(([], []), (self.fpga.programmed,
                                    self.placement.history))
        self.domains.users = {}
        self.manager.restore_functions()
        self.assertEqual([(PF, 'AAAA1111')], self.fpga.programmed)

    def test_promise_of_another_consumer_refuses(self):
        # Another consumer allocated on the port relies on what it holds.
        self.fpga.function = 'BBBB2222'
        self._server()
        self._allocate('server-b', 'dp-b')
        self.manager.restore_functions()
        self.assertEqual([], self.fpga.programmed)


class SriovRestoreTest(test_program_dfl.DflProgramBase):
    """An N6000-shaped card whose port is released to its VF, as a boot's
    configuration leaves it, holding its default function: the real dfl
    programmer assigns the port back around the load as fpga_program
    does."""

    PROFILE = 'd5005'
    SRIOV = True

    def setUp(self):
        super().setUp()
        self.cyborg = FakeCyborg()
        self.manager = program.ProgramManager(
            'compute1', self.inventory, test_program_dfl.programmers.ByDriver(
                self.conf), self.images, self.placement, self.domains,
            journal.Journal(self.state), self.cyborg)

    def test_port_assigned_back_around_the_load(self):
        self.placement.allocated.setdefault(self.rp, []).append('server-b')
        self.cyborg.bound('server-b', 'dp-b', rp=self.rp)
        self.manager.restore_functions()
        dfl_sriov = test_program_dfl.dfl_sriov
        self.assertEqual(
            [dfl_sriov.FME_PORT_ASSIGN,
             test_program_dfl.dfl_abi.DFL_FPGA_FME_PORT_PR,
             dfl_sriov.FME_PORT_RELEASE], [r for r, _a in self.ioctls])
        self.assertEqual(['0', '1'], [v for r, v in self.kernel.writes
                                      if r.endswith('/sriov_numvfs')])
        self.assertTrue(self.sim.bound(test_program_dfl.VF))
        self.assertEqual(test_program_dfl.F_B, self._afu_id())
        self.assertEqual([test_program_dfl.TRAIT_B],
                         self.placement.traits[self.rp])
