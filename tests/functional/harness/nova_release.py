"""What differs between the Nova releases in Nova's own test fixtures.

The functional harness runs on Nova 34.0.x in native threading mode
(``OS_NOVA_DISABLE_EVENTLET_PATCHING=1``) and on Nova 33.0.x (tox env
``functional-nova33``) on eventlet, as 2026.1 deploys it. Each difference
in the fixtures Nova's functional base brings is decided here, by what the
installed Nova has, never by its version string; nothing else in the
harness asks:

* Nova 33's ``FakeVersionedNotifier`` finds the test that sent a
  notification by walking eventlet's greenlet parents, which in threading
  mode ends at ``None`` (``AttributeError`` in every notification, so in
  every boot). Nova 34 skips that check in threading mode; Nova 33 in
  threading mode (not what the tox envs run; its database fixtures are not
  thread-safe) takes the sender to be the running test, as Nova 34 does.
"""

import inspect

import fixtures
from nova.tests.fixtures import notifications
from nova import utils


def _running_test(notifier):
    return notifier.test_case_id


class NovaReleaseFixture(fixtures.Fixture):
    """Nova 34's behaviour of Nova's test fixtures on Nova 33."""

    def _setUp(self):
        notifier = notifications.FakeVersionedNotifier
        sender = inspect.getattr_static(notifier, '_get_sender_test_case_id')
        if isinstance(sender, staticmethod) and (
                utils.concurrency_mode_threading()):
            # A method, not a staticmethod: fixtures.MonkeyPatch would keep
            # the replacement static.
            notifier._get_sender_test_case_id = _running_test
            self.addCleanup(setattr, notifier, '_get_sender_test_case_id',
                            sender)
