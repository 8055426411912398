"""Waits with a deadline, for tests that must hold on a busy machine.

Nova's functional helpers (``nova.tests.functional.integrated_helpers``)
wait by counting polls: ``_wait_for_state_change`` looks 10 times, half a
second apart, so a boot gets about 5 s, and an instance action event or a
migration status as long. A boot that programs an FPGA through the sidecar
and Cyborg, or a move, takes longer than that when both cores of the
machine are busy, and the test fails for no fault of the product.

:class:`DeadlineWaits` gives those helpers a deadline of :data:`DEADLINE`
seconds instead (or longer, if a caller's ``max_retries`` asked for more).
A state that is reached ends the wait as soon as it is seen, so a passing
test is no slower; what a wait checks is unchanged. Put it before Nova's
base in a test class's bases.
"""

import time

from nova.tests.functional.api import client as api_client

from tests import waiting

#: How long a wait for a state lasts at most, in seconds.
DEADLINE = 180
#: Seconds between two looks.
POLL = 0.25


def deadline(max_retries=0, poll=POLL):
    """The monotonic time at which a wait gives up: DEADLINE from now, or
    the time ``max_retries`` polls would take if that is longer."""
    return time.monotonic() + max(DEADLINE, max_retries * poll)


def wait_until(predicate, what, timeout=DEADLINE, poll=POLL):
    """Poll ``predicate`` until it returns something true; return that.

    :raises: AssertionError naming ``what`` after ``timeout`` seconds.
    """
    return waiting.wait_until(predicate, what, timeout, poll)


class DeadlineWaits(object):
    """Nova's wait helpers with a deadline instead of a count of polls."""

    #: Scales OS_TEST_TIMEOUT (oslotest): a test made of several waits may
    #: need more than one deadline on a busy machine.
    TIMEOUT_SCALING_FACTOR = 2

    def _wait_for_server_parameter(self, server, expected_params,
                                   max_retries=10, api=None,
                                   wait_for_fault_key=True):
        api = api or getattr(self, 'admin_api', self.api)
        # Nova sets ERROR before it records the fault: a test that waits
        # for ERROR wants the fault too.
        wait_for_fault = (wait_for_fault_key and
                          expected_params.get('status') == 'ERROR')
        end = deadline(max_retries)
        while True:
            server = api.get_server(server['id'])
            if all(server[attr] == value
                   for attr, value in expected_params.items()):
                if not wait_for_fault or 'fault' in server:
                    return server
            if time.monotonic() >= end:
                self.fail('Wait for state change failed, expected_params=%s, '
                          'server=%s, wait_for_fault=%s'
                          % (expected_params, server, wait_for_fault))
            time.sleep(POLL)

    def _wait_until_deleted(self, server):
        initially_in_error = server.get('status') == 'ERROR'
        end = deadline()
        while True:
            try:
                server = self.api.get_server(server['id'])
            except api_client.OpenStackApiNotFoundException:
                return
            if not initially_in_error and server['status'] == 'ERROR':
                self.fail('Server went to error state instead of '
                          'disappearing.')
            if time.monotonic() >= end:
                self.fail('Server failed to delete.')
            time.sleep(POLL)

    def _wait_for_instance_action_event(self, server, action_name,
                                        event_name, event_result):
        api = getattr(self, 'admin_api', self.api)
        actions = events = []
        end = deadline()
        while True:
            actions = api.get_instance_actions(server['id'])
            # The newest action first.
            for action in actions:
                if action['action'] != action_name:
                    continue
                events = api.get_instance_action_details(
                    server['id'], action['request_id'])['events']
                for event in events:
                    result = event['result']
                    if (event['event'] == event_name and
                            result is not None and
                            result.lower() == event_result.lower()):
                        return event
            if time.monotonic() >= end:
                self.fail('Timed out waiting for %s instance action event. '
                          'Current instance actions: %s. Events in the last '
                          'matching action: %s'
                          % (event_name, actions, events))
            time.sleep(POLL)

    def _wait_for_migration_status(self, server, expected_statuses):
        api = getattr(self, 'admin_api', self.api)
        statuses = [status.lower() for status in expected_statuses]
        actual = None
        end = deadline()
        while True:
            for migration in api.api_get('/os-migrations').body[
                    'migrations']:
                if migration['instance_uuid'] == server['id']:
                    actual = migration['status']
                    if actual.lower() in statuses:
                        return migration
            if time.monotonic() >= end:
                self.fail('Timed out waiting for migration with status for '
                          'instance %s (expected "%s", got "%s")'
                          % (server['id'], expected_statuses, actual))
            time.sleep(POLL)

    def _wait_for_assert(self, assert_func, max_retries=10, sleep=POLL):
        end = deadline(max_retries, sleep)
        while True:
            try:
                return assert_func()
            except AssertionError:
                if time.monotonic() >= end:
                    raise
            time.sleep(sleep)
