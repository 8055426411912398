"""A card is promised to every consumer allocated on it (seed 004)."""

import fixtures

from sidecar import exception
from sidecar.program import promises
from tests.unit.sidecar import test_program as base

IMAGE_A, IMAGE_B = base.IMAGE_A, base.IMAGE_B
TRAIT_B = base.TRAIT_B


class PromiseTest(base.ProgramTestBase):
    """fpga_program against the allocations of the card's providers."""

    def _refused(self, image=IMAGE_A, *words):
        history = list(self.placement.history)
        programmed = list(self.fpga.programmed)
        ex = self.assertRaises(exception.DeviceBusy, self._program, image)
        for word in words:
            self.assertIn(word, str(ex))
        # Nothing reserved, nothing loaded.
        self.assertEqual(history, self.placement.history)
        self.assertEqual(programmed, self.fpga.programmed)
        return ex

    def _bound_on_b(self, profile='dp-b'):
        """The card holds B; server-b is bound to it (the conductor
        skipped programming) and not started: no domain."""
        self.fpga.function = 'BBBB2222'
        self._allocate('server-b', profile)

    def test_refused_while_a_bound_server_relies_on_the_function(self):
        # The hole: no domain, no earlier programming call for server-b.
        self._bound_on_b()
        self._allocate('server-a', 'dp-a')
        self._refused(IMAGE_A, 'server-b', TRAIT_B)
        self.assertEqual('BBBB2222', self.fpga.function)

    def test_refused_for_a_function_id_profile(self):
        self._bound_on_b('dp-fn-b')
        self._refused(IMAGE_A, 'server-b', TRAIT_B)

    def test_refused_for_a_trait_profile(self):
        # The trait only in Placement (the card reports no function).
        self._allocate('server-b', 'dp-trait-b')
        self.placement.traits[base.RP] = [TRAIT_B]
        self._refused(IMAGE_A, 'server-b', TRAIT_B)

    def test_refused_for_a_consumer_asking_no_function(self):
        self._allocate('server-x', 'dp-any')
        self._refused(IMAGE_A, 'server-x', 'asks no function')

    def test_refused_for_a_consumer_without_an_arq_for_the_card(self):
        self._allocate('server-x')
        self._refused(IMAGE_A, 'server-x', 'no accelerator request')
        # An ARQ bound to another provider does not count.
        self.cyborg.bind('server-x', 'dp-a', rp='rp-other')
        self._refused(IMAGE_A, 'server-x', 'no accelerator request')

    def _settling(self, on_sleep):
        """Give consumers without an ARQ 3 polls, calling ``on_sleep()``
        at each (on a fake clock)."""
        checker = self.manager._promises
        now = [0.0]
        checker._clock = lambda: now[0]

        def sleep(seconds):
            now[0] += seconds
            on_sleep()
        checker._sleep = sleep
        self.useFixture(fixtures.MockPatch(
            'sidecar.program.promises.SETTLE_SECONDS',
            3 * promises.SETTLE_POLL))

    def test_a_consumer_whose_allocation_goes_while_settling(self):
        # Its build failed here: its ARQs are deleted, then its allocation.
        self._allocate('server-x')
        self._settling(lambda: self.placement.allocated[base.RP].remove(
            'server-x'))
        self.assertTrue(self._program(IMAGE_A))
        self.assertEqual('AAAA1111', self.fpga.function)

    def test_a_consumer_whose_arq_comes_while_settling(self):
        # Just scheduled: its ARQ appears and asks the loaded function.
        self._bound_on_b()
        self.cyborg.arqs.pop('server-b', None)
        self._settling(lambda: self.cyborg.bind('server-b', 'dp-b',
                                                base.RP))
        self._refused(IMAGE_A, 'server-b', TRAIT_B)

    def test_a_consumer_without_an_arq_after_settling(self):
        self._allocate('server-x')
        self._settling(lambda: None)
        self._refused(IMAGE_A, 'server-x', 'no accelerator request')

    def test_a_consumer_not_bound_yet_counts_by_its_profile(self):
        # Its ARQ is not bound (no device_rp_uuid): its profile says what
        # the bind will want here.
        self.fpga.function = 'BBBB2222'
        self._allocate('server-b')
        self.cyborg.bind('server-b', 'dp-trait-b', rp=None)
        self._refused(IMAGE_A, 'server-b', TRAIT_B)
        self.cyborg.arqs['server-b'][0]['device_profile_name'] = 'dp-a'
        self.assertTrue(self._program(IMAGE_A))

    def test_refused_when_cyborg_is_down(self):
        self._allocate('server-a', 'dp-a')
        self.cyborg.down = True
        self._refused(IMAGE_A, 'server-a', 'Cyborg is unreachable')

    def test_refused_when_a_profile_is_unreadable(self):
        self._allocate('server-a', 'dp-gone')
        self._refused(IMAGE_A, 'server-a', 'dp-gone')

    def test_refused_when_a_bitstream_is_unreadable(self):
        self._allocate('server-a', 'dp-a')
        images = base.FakeImages()
        real = images.get_metadata
        self.manager._promises._images = images

        def get_metadata(image_id):
            if image_id == IMAGE_A:
                raise exception.BitstreamError(image_id=image_id,
                                               reason='no such image')
            return real(image_id)
        images.get_metadata = get_metadata
        self._refused(IMAGE_A, 'server-a', 'no such image')

    def test_refused_when_placement_is_down(self):
        self.placement.down = True
        self._refused(IMAGE_A, 'not programmed blind')

    def test_refused_when_allocations_are_unreadable(self):
        self.placement.allocations = lambda rp: (_ for _ in ()).throw(
            exception.PlacementError(reason='HTTP 503'))
        self._refused(IMAGE_A, 'not programmed blind', 'HTTP 503')

    def test_allowed_when_every_consumer_wants_it(self):
        self.fpga.function = 'BBBB2222'
        self._allocate('server-a', 'dp-a')
        self._allocate('server-a2', 'dp-a')
        self.assertTrue(self._program(IMAGE_A))
        self.assertEqual([(base.PF, 'AAAA1111')], self.fpga.programmed)

    def test_allowed_without_consumers(self):
        self.fpga.function = 'BBBB2222'
        self.assertTrue(self._program(IMAGE_A))
        self.assertEqual('AAAA1111', self.fpga.function)

    def test_a_consumer_of_a_function_not_loaded_does_not_block(self):
        # Two servers asking different functions of a blank card: the
        # first request wins; the other is then refused.
        self._allocate('server-a', 'dp-a')
        self._allocate('server-b', 'dp-b')
        self.assertTrue(self._program(IMAGE_A))
        self._refused(IMAGE_B, 'server-a')
        self.assertEqual('AAAA1111', self.fpga.function)

    def test_promise_ends_with_the_allocation(self):
        self._bound_on_b()
        self._refused(IMAGE_A, 'server-b')
        self.placement.allocated.clear()
        self.assertTrue(self._program(IMAGE_A))
        self.assertEqual('AAAA1111', self.fpga.function)

    def test_already_loaded_needs_no_check(self):
        # Holding the wanted function answers True without reading
        # Placement or Cyborg, and writes no promise.
        self._bound_on_b()
        self.cyborg.down = self.placement.down = True
        self.assertTrue(self._program(IMAGE_B))
        self.assertEqual([], self.fpga.programmed)
