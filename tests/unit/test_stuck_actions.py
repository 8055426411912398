"""Attach and detach actions that nothing would end."""

import datetime
from unittest import mock

import fixtures
from nova.compute import provider_tree
from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids
from oslo_utils import timeutils
import oslo_messaging as messaging
import testtools

from nova_cyborg.flows.attach import endpoint as rpc_endpoint
from nova_cyborg.flows.attach import stuck_actions
from nova_cyborg.hooks import compute as compute_hooks
from nova_cyborg.model import actions


def _manager(host, devices=0):
    """A nova-compute whose node has ``devices`` child providers in its
    report client's provider tree cache."""
    manager = mock.Mock(host=host)
    node = objects.ComputeNode(uuid=getattr(uuids, host))
    tree = provider_tree.ProviderTree()
    tree.new_root(host, node.uuid)
    for index in range(devices):
        tree.new_child('%s_dev%d' % (host, index), node.uuid)
    manager.reportclient._provider_tree = tree
    manager.rt.compute_nodes = {host: node}
    return manager


def _instance(uuid, task_state, age):
    return objects.Instance(
        uuid=uuid, task_state=task_state, created_at=None,
        updated_at=timeutils.utcnow() - datetime.timedelta(seconds=age))


@mock.patch('nova_cyborg.flows.attach.recovery.accelerator_action_interrupted')
@mock.patch.object(objects.Instance, 'get_by_uuid')
class StuckActionsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.manager = _manager('compute1')
        self.flags(stuck_accelerator_action_timeout=300, group='nova_cyborg')
        stuck_actions.announce(self.manager)

    def at(self, when):
        """Now is ``when``."""
        if not hasattr(self, 'now'):
            self.useFixture(fixtures.MockPatch(
                'oslo_utils.timeutils.utcnow',
                side_effect=lambda *args, **kwargs: self.now))
        self.now = when

    def test_failed_handler_settles_then_raises(self, get, settle):
        instance = _instance(uuids.inst, actions.ADDING, 0)
        get.return_value = instance
        with testtools.ExpectedException(messaging.MessagingTimeout):
            with stuck_actions.running(self.manager, self.context, instance,
                                       actions.ADDING):
                self.assertIn(uuids.inst, stuck_actions._running)
                raise messaging.MessagingTimeout('event not recorded')
        settle.assert_called_once_with(self.manager, self.context, instance)
        self.assertNotIn(uuids.inst, stuck_actions._running)

    def test_handler_that_ended_the_action_is_left(self, get, settle):
        # The work cleared the task state before the failure.
        get.return_value = _instance(uuids.inst, None, 0)
        with testtools.ExpectedException(ValueError):
            with stuck_actions.running(self.manager, self.context,
                                       get.return_value, actions.REMOVING):
                raise ValueError('after the work')
        settle.assert_not_called()

    def test_conductor_still_away_is_left_to_the_periodic_task(self, get,
                                                               settle):
        get.side_effect = messaging.MessagingTimeout('still away')
        instance = _instance(uuids.inst, actions.ADDING, 0)
        with mock.patch.object(stuck_actions.LOG, 'warning') as warning:
            with testtools.ExpectedException(messaging.MessagingTimeout):
                with stuck_actions.running(self.manager, self.context,
                                           instance, actions.ADDING):
                    raise messaging.MessagingTimeout('event not recorded')
        self.assertIn('tries again', warning.call_args[0][0])
        settle.assert_not_called()

    @mock.patch.object(objects.InstanceList, 'get_by_filters')
    def test_periodic_task_settles_old_idle_actions(self, get_by_filters,
                                                    get, settle):
        old = _instance(uuids.old, actions.ADDING, 301)
        fresh = _instance(uuids.fresh, actions.REMOVING, 10)
        busy = _instance(uuids.busy, actions.ADDING, 301)
        get_by_filters.return_value = [old, fresh, busy]
        get.return_value = old
        stuck_actions._running.add(uuids.busy)
        self.addCleanup(stuck_actions._running.discard, uuids.busy)
        stuck_actions.settle_stuck(self.manager, self.context)
        get_by_filters.assert_called_once_with(
            self.context, {'host': 'compute1', 'deleted': False,
                           'task_state': [actions.ADDING, actions.REMOVING]},
            expected_attrs=[])
        get.assert_called_once_with(
            self.context, uuids.old,
            expected_attrs=['system_metadata', 'flavor'])
        settle.assert_called_once_with(self.manager, self.context, old)

    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       return_value=[])
    def test_no_query_until_an_action_is_announced(self, get_by_filters,
                                                   get, settle):
        stuck_actions._announced.pop(self.manager, None)
        stuck_actions.settle_stuck(self.manager, self.context)
        get_by_filters.assert_not_called()
        # A nova-api of an older nova-cyborg asks the compute's version
        # before it sets a task state.
        rpc_endpoint.AcceleratorEndpoint(self.manager).version(self.context)
        stuck_actions.settle_stuck(self.manager, self.context)
        get_by_filters.assert_called_once()

    @mock.patch.object(rpc_endpoint, 'current', return_value=True)
    @mock.patch('nova_cyborg.compat.spawn_long_task')
    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       return_value=[])
    def test_cast_announces_before_its_work_starts(
            self, get_by_filters, spawn, current, get, settle):
        stuck_actions._announced.pop(self.manager, None)
        rpc_endpoint.AcceleratorEndpoint(self.manager).add_accelerator(
            self.context, _instance(uuids.inst, actions.ADDING, 0), 'dp')
        spawn.assert_called_once()
        self.assertIn(self.manager, stuck_actions._announced)

    @mock.patch.object(objects.InstanceList, 'get_by_filters')
    def test_host_with_devices_looks_for_lost_casts_once_per_timeout(
            self, get_by_filters, get, settle):
        # No cast arrived, nothing announced: a host with devices looks
        # once per timeout, one without never does.
        manager = _manager('compute3', devices=2)
        self.addCleanup(stuck_actions._looked.pop, manager, None)
        self.addCleanup(stuck_actions._announced.pop, manager, None)
        get_by_filters.return_value = []
        start = timeutils.utcnow()
        self.at(start)
        stuck_actions.settle_stuck(manager, self.context)
        stuck_actions.settle_stuck(manager, self.context)
        self.at(start + datetime.timedelta(seconds=299))
        stuck_actions.settle_stuck(manager, self.context)
        self.assertEqual(1, get_by_filters.call_count)
        self.assertNotIn(manager, stuck_actions._announced)
        # A cast lost: found on the next look, settled once old enough,
        # looked for every interval meanwhile.
        lost = _instance(uuids.lost, actions.ADDING, 0)
        get_by_filters.return_value = [lost]
        self.at(start + datetime.timedelta(seconds=301))
        stuck_actions.settle_stuck(manager, self.context)
        self.assertIn(manager, stuck_actions._announced)
        settle.assert_not_called()
        lost.updated_at = start - datetime.timedelta(seconds=10)
        get.return_value = lost
        self.at(start + datetime.timedelta(seconds=302))
        stuck_actions.settle_stuck(manager, self.context)
        settle.assert_called_once_with(manager, self.context, lost)
        self.assertEqual(3, get_by_filters.call_count)
        without = _manager('compute4')
        for seconds in (0, 400, 800):
            self.at(start + datetime.timedelta(seconds=seconds))
            stuck_actions.settle_stuck(without, self.context)
        self.assertEqual(3, get_by_filters.call_count)

    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       return_value=[])
    def test_looks_until_nothing_is_left_after_the_timeout(
            self, get_by_filters, get, settle):
        start = timeutils.utcnow()
        self.at(start)
        stuck_actions.announce(self.manager)
        # Within the timeout and its margin: a task state may still come.
        self.at(start + datetime.timedelta(seconds=300 + stuck_actions.MARGIN))
        stuck_actions.settle_stuck(self.manager, self.context)
        self.assertEqual(start, stuck_actions._announced[self.manager])
        # Later, nothing found: the task stops looking.
        self.at(start + datetime.timedelta(seconds=301 + stuck_actions.MARGIN))
        stuck_actions.settle_stuck(self.manager, self.context)
        self.assertNotIn(self.manager, stuck_actions._announced)
        stuck_actions.settle_stuck(self.manager, self.context)
        self.assertEqual(2, get_by_filters.call_count)

    @mock.patch.object(objects.InstanceList, 'get_by_filters')
    def test_keeps_looking_while_an_action_is_set(self, get_by_filters, get,
                                                  settle):
        start = timeutils.utcnow()
        self.at(start)
        stuck_actions.announce(self.manager)
        busy = _instance(uuids.busy, actions.ADDING, 0)
        get_by_filters.return_value = [busy]
        stuck_actions._running.add(uuids.busy)
        self.addCleanup(stuck_actions._running.discard, uuids.busy)
        self.at(start + datetime.timedelta(seconds=3600))
        stuck_actions.settle_stuck(self.manager, self.context)
        self.assertEqual(start, stuck_actions._announced[self.manager])

    @mock.patch.object(objects.InstanceList, 'get_by_filters')
    def test_handler_announces(self, get_by_filters, get, settle):
        stuck_actions._announced.pop(self.manager, None)
        with stuck_actions.running(self.manager, self.context,
                                   _instance(uuids.inst, actions.ADDING, 0),
                                   actions.ADDING):
            pass
        self.assertIn(self.manager, stuck_actions._announced)

    def test_interval_zero_disables_the_task(self, get, settle):
        self.assertEqual(60, stuck_actions.spacing())
        self.flags(stuck_accelerator_action_interval=0, group='nova_cyborg')
        self.assertEqual(-1, stuck_actions.spacing())
        with mock.patch.object(objects.InstanceList,
                               'get_by_filters') as get_by_filters:
            stuck_actions.settle_stuck(self.manager, self.context)
        get_by_filters.assert_not_called()

    def test_found_at_restart_announces(self, get, settle):
        stuck_actions._announced.pop(self.manager, None)
        compute_hooks.accelerator_action_at_restart(
            self.manager, self.context, _instance(uuids.plain, None, 0))
        self.assertNotIn(self.manager, stuck_actions._announced)
        compute_hooks.accelerator_action_at_restart(
            self.manager, self.context,
            _instance(uuids.inst, actions.ADDING, 0))
        self.assertIn(self.manager, stuck_actions._announced)
        self.assertEqual(2, settle.call_count)

    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       return_value=[])
    def test_each_compute_looks_for_its_own(self, get_by_filters, get,
                                            settle):
        other = _manager('compute2')
        stuck_actions.settle_stuck(other, self.context)
        get_by_filters.assert_not_called()
        rpc_endpoint.AcceleratorEndpoint(other).version(self.context)
        stuck_actions.settle_stuck(other, self.context)
        get_by_filters.assert_called_once()
