"""The function affinity weigher in the real scheduler (seed 004).

Two hosts with one FPGA port each (a DFL card with one port); compute1
has more RAM, and Nova's RAM weigher is the only one of Nova's here, so it
always prefers compute1. With ``nova_cyborg.weigher.FunctionAffinityWeigher``
in ``[filter_scheduler] weight_classes`` too, a server asking a function
lands on the host whose port already holds it, and nothing is reprogrammed
or rescheduled. Without the weigher the same boot goes to compute1, whose
port is reprogrammed (``WithoutWeigherTest`` shows it).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402

from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402

F_A = test_sidecar.F_A
F_B = test_sidecar.F_B
#: Of Nova's weighers only RAM's (so that compute1 stays preferred after it
#: took a server: CPU, disk and I/O would spread the second server anyway,
#: as on hosts of one size), and the function affinity weigher.
NOVA_WEIGHERS = ['nova.scheduler.weights.ram.RAMWeigher']
WEIGHT_CLASSES = NOVA_WEIGHERS + [
    'nova_cyborg.weigher.FunctionAffinityWeigher']


class RescheduleCounter(fixtures.Fixture):
    """Counts reschedules: a compute that gives a build up sends it back to
    the conductor's ``build_instances`` (a first boot goes through
    ``schedule_and_build_instances``)."""

    def _setUp(self):
        from nova.conductor import manager
        self.count = 0
        real = manager.ComputeTaskManager.build_instances
        counter = self

        def build_instances(self, *args, **kwargs):
            counter.count += 1
            return real(self, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.conductor.manager.ComputeTaskManager.build_instances',
            build_instances))


class AffinityTestBase(test_sidecar.SidecarTestBase):

    WEIGHER = True
    NUM_VFS = 1

    def _setup_scheduler_service(self):
        self.flags(weight_classes=(WEIGHT_CLASSES if self.WEIGHER
                                   else NOVA_WEIGHERS),
                   group='filter_scheduler')
        return super()._setup_scheduler_service()

    def setUp(self):
        super().setUp()
        self.reschedules = self.useFixture(RescheduleCounter())

    def _function_profile(self, function_id):
        """A profile asking the function itself (``accel:function_id``);
        cyborg-conductor finds its bitstream in Glance."""
        self.create_bitstream(function_id)
        return self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:function_id': function_id}])[1]

    def _two_hosts(self, function_ids=(None, None)):
        self.start_glance()
        for name, memory, function_id in zip(
                ('compute1', 'compute2'), (32, 16), function_ids):
            self.start_accel_compute(
                name, memory_gb=memory,
                function_ids=[function_id] if function_id else None)
            if function_id:
                (pf,) = self.handle_bdfs(name)
                trait = test_sidecar.function_trait(function_id)
                waits.wait_until(
                    lambda: trait in self.traits(name + '_' + pf),
                    '%s on %s' % (trait, name))

    def _boot_b_after_a(self):
        """Boot A and wait for it, then B (blank cards)."""
        self._two_hosts()
        flavor_a = self._function_profile(F_A)
        flavor_b = self._function_profile(F_B)
        first = self.boot(flavor_a)
        self.assertEqual('compute1', first['OS-EXT-SRV-ATTR:host'])
        return first, self.boot(flavor_b)


class WeigherTest(AffinityTestBase):

    def test_lands_on_the_card_holding_the_function(self):
        # compute1 (more RAM) holds A, compute2 holds B: B goes to compute2
        # and nothing is programmed. Without the weigher it went to
        # compute1, which was reprogrammed from A to B.
        self._two_hosts((F_A, F_B))
        server = self.boot(self._function_profile(F_B))
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assert_accelerated(server, 1)
        self.assertEqual([], self.programmed('compute1'))
        self.assertEqual([], self.programmed('compute2'))
        (pf1,) = self.handle_bdfs('compute1')
        self.assertEqual(F_A, self.loaded('compute1', pf1))
        self.assertEqual(0, self.reschedules.count)

    def test_second_function_goes_to_the_other_card(self):
        # A holds compute1's port; B is sent to compute2's blank port at
        # once and programmed there.
        first, second = self._boot_b_after_a()
        self.assertEqual('compute2', second['OS-EXT-SRV-ATTR:host'])
        self.assert_accelerated(second, 1)
        (pf2,) = self.handle_bdfs('compute2')
        self.assertEqual([(pf2, F_B)], self.programmed('compute2'))
        self.assertEqual(0, self.reschedules.count)


class WithoutWeigherTest(AffinityTestBase):
    """The same boots with Nova's weighers only: what the weigher avoids."""

    WEIGHER = False

    def test_card_holding_the_function_is_ignored(self):
        self._two_hosts((F_A, F_B))
        server = self.boot(self._function_profile(F_B))
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        (pf1,) = self.handle_bdfs('compute1')
        self.assertEqual([(pf1, F_B)], self.programmed('compute1'))
