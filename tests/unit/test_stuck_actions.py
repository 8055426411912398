"""Attach and detach actions that nothing would end."""

import datetime
from unittest import mock

from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids
from oslo_utils import timeutils
import oslo_messaging as messaging
import testtools

from nova_cyborg import rpc
from nova_cyborg import stuck_actions


def _instance(uuid, task_state, age):
    return objects.Instance(
        uuid=uuid, task_state=task_state, created_at=None,
        updated_at=timeutils.utcnow() - datetime.timedelta(seconds=age))


@mock.patch('nova_cyborg.recovery.accelerator_action_interrupted')
@mock.patch.object(objects.Instance, 'get_by_uuid')
class StuckActionsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.manager = mock.Mock(host='compute1')
        self.flags(stuck_accelerator_action_timeout=300, group='nova_cyborg')

    def test_failed_handler_settles_then_raises(self, get, settle):
        instance = _instance(uuids.inst, rpc.ADDING, 0)
        get.return_value = instance
        with testtools.ExpectedException(messaging.MessagingTimeout):
            with stuck_actions.running(self.manager, self.context, instance,
                                       rpc.ADDING):
                self.assertIn(uuids.inst, stuck_actions._running)
                raise messaging.MessagingTimeout('event not recorded')
        settle.assert_called_once_with(self.manager, self.context, instance)
        self.assertNotIn(uuids.inst, stuck_actions._running)

    def test_handler_that_ended_the_action_is_left(self, get, settle):
        # The work cleared the task state before the failure.
        get.return_value = _instance(uuids.inst, None, 0)
        with testtools.ExpectedException(ValueError):
            with stuck_actions.running(self.manager, self.context,
                                       get.return_value, rpc.REMOVING):
                raise ValueError('after the work')
        settle.assert_not_called()

    def test_conductor_still_away_is_left_to_the_periodic_task(self, get,
                                                               settle):
        get.side_effect = messaging.MessagingTimeout('still away')
        instance = _instance(uuids.inst, rpc.ADDING, 0)
        with mock.patch.object(stuck_actions.LOG, 'warning') as warning:
            with testtools.ExpectedException(messaging.MessagingTimeout):
                with stuck_actions.running(self.manager, self.context,
                                           instance, rpc.ADDING):
                    raise messaging.MessagingTimeout('event not recorded')
        self.assertIn('tries again', warning.call_args[0][0])
        settle.assert_not_called()

    @mock.patch.object(objects.InstanceList, 'get_by_filters')
    def test_periodic_task_settles_old_idle_actions(self, get_by_filters,
                                                    get, settle):
        old = _instance(uuids.old, rpc.ADDING, 301)
        fresh = _instance(uuids.fresh, rpc.REMOVING, 10)
        busy = _instance(uuids.busy, rpc.ADDING, 301)
        get_by_filters.return_value = [old, fresh, busy]
        get.return_value = old
        stuck_actions._running.add(uuids.busy)
        self.addCleanup(stuck_actions._running.discard, uuids.busy)
        stuck_actions.settle_stuck(self.manager, self.context)
        get_by_filters.assert_called_once_with(
            self.context, {'host': 'compute1', 'deleted': False,
                           'task_state': [rpc.ADDING, rpc.REMOVING]},
            expected_attrs=[])
        get.assert_called_once_with(
            self.context, uuids.old,
            expected_attrs=['system_metadata', 'flavor'])
        settle.assert_called_once_with(self.manager, self.context, old)
