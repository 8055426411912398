import os

import fixtures
import testtools

from sidecar import exception
from sidecar import holds
from sidecar import state_cache

A = '0000:81:00.0'
B = '0000:82:00.0'


class HoldsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, holds.FILE)
        self.log = self.useFixture(fixtures.FakeLogger())

    def make(self, admit='disabled'):
        return holds.Holds(self.path, admit_new=admit)

    def test_new_device_held_until_enabled(self):
        h = self.make()
        h.admit([], in_service=set())          # first start, nothing yet
        self.assertEqual([A], h.admit([A]))
        self.assertEqual({holds.NEW}, set(h.reasons(A)))
        self.assertTrue(h.held(A))
        self.assertTrue(h.enable(A))
        self.assertFalse(h.held(A))
        self.assertEqual([], h.admit([A]))
        self.assertFalse(h.held(A))

    def test_admit_enabled_admits(self):
        h = self.make('enabled')
        self.assertEqual([], h.admit([A, B]))
        self.assertFalse(h.held(A))
        self.assertTrue(h.known(B))

    def test_upgrade_admits_devices_in_service(self):
        # No holds.json: devices whose provider is in Placement already
        # were in service before the upgrade; the others are new.
        h = self.make()
        self.assertTrue(h.first_start)
        self.assertEqual([B], h.admit([A, B], in_service={A}))
        self.assertFalse(h.held(A))
        self.assertTrue(h.held(B))
        # Only at the first start.
        C = '0000:83:00.0'
        self.assertEqual([C], h.admit([A, B, C], in_service={C}))

    def test_disable_survives_restart(self):
        h = self.make()
        h.admit([A], in_service={A})
        h.disable(A, 'fan noise')
        again = self.make()
        self.assertFalse(again.first_start)
        self.assertEqual({holds.DISABLED: 'fan noise'}, again.reasons(A))
        again.enable(A)
        self.assertEqual({}, self.make().reasons(A))

    def test_unhealthy_is_not_persisted(self):
        h = self.make()
        h.admit([A], in_service={A})
        h.hold(A, holds.UNHEALTHY, 'AER fatal errors: 3')
        h.disable(A)
        self.assertEqual({holds.UNHEALTHY, holds.DISABLED}, set(h.reasons(A)))
        self.assertEqual({holds.DISABLED}, set(self.make().reasons(A)))
        self.assertTrue(h.release(A, holds.UNHEALTHY))
        self.assertFalse(h.release(A, holds.UNHEALTHY))
        self.assertEqual({holds.DISABLED}, set(h.reasons(A)))

    def test_enable_does_not_release_unhealthy(self):
        h = self.make()
        h.admit([A], in_service={A})
        h.hold(A, holds.UNHEALTHY, 'gone')
        h.enable(A)
        self.assertEqual({holds.UNHEALTHY: 'gone'}, h.reasons(A))

    def test_listener_called_on_change(self):
        h = self.make()
        seen = []
        h.add_listener(seen.append)
        h.admit([A], in_service=set())
        h.disable(A)
        h.disable(A)        # no change: no call
        h.enable(A)
        self.assertEqual([A, A, A, A], seen)   # new, disabled, -disabled, -new

    def test_bad_reason_and_option(self):
        h = self.make()
        self.assertRaises(exception.InvalidArgument, h.hold, A, 'bored')
        self.assertRaises(exception.InvalidArgument, holds.Holds, None,
                          admit_new='maybe')

    def test_corrupt_file_is_quarantined_and_devices_held(self):
        with open(self.path, 'w') as f:
            f.write('{"devices": ')
        h = self.make()
        self.assertIn('is corrupt', self.log.output)
        names = os.listdir(self.dir)
        self.assertEqual(1, len([n for n in names
                                 if n.startswith(holds.FILE + '.corrupt-')]),
                         names)
        # Fail closed: the admin state is lost, so nothing is admitted
        # by the upgrade rule; every device waits for an operator.
        self.assertFalse(h.first_start)
        self.assertEqual([A], h.admit([A], in_service={A}))


class StateFileTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'x.json')
        self.log = self.useFixture(fixtures.FakeLogger(
            format='%(levelname)s %(message)s'))

    def test_missing_and_round_trip(self):
        f = state_cache.StateFile(self.path)
        self.assertIsNone(f.load())
        f.save({'a': [1]})
        self.assertEqual({'a': [1]}, state_cache.StateFile(self.path).load())
        self.assertEqual(['x.json'], os.listdir(self.dir))

    def test_not_an_object_is_quarantined(self):
        with open(self.path, 'w') as f:
            f.write('[1, 2]')
        self.assertEqual({}, state_cache.StateFile(self.path).load())
        self.assertFalse(os.path.exists(self.path))
        self.assertIn('ERROR State file', self.log.output)

    def test_two_quarantines_keep_both(self):
        clock = lambda: 0  # noqa: E731
        for _ in range(2):
            with open(self.path, 'w') as f:
                f.write('garbage')
            state_cache.quarantine(self.path, 'test', clock=clock)
        self.assertEqual(2, len(os.listdir(self.dir)))
