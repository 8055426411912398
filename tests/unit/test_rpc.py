"""The RPC of the accelerator actions: cells' message queues, version caps.
"""

from unittest import mock

import fixtures
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova import rpc as nova_rpc
from nova import test
from oslo_config import cfg
import oslo_messaging as messaging
from oslo_utils.fixture import uuidsentinel as uuids
import testtools

from nova_cyborg.clients import compute_rpc as rpc
from nova_cyborg.conf import nova_cyborg as nc_conf
from nova_cyborg import exception
from nova_cyborg.flows.attach import endpoint as rpc_endpoint
from nova_cyborg.model import actions
from nova_cyborg.model import capability


class RouterTest(test.NoDBTestCase):
    """The client honours the message queue of the server's cell, as
    Nova's ComputeAPI does (nova.rpc.ClientRouter)."""

    def setUp(self):
        super().setUp()
        rpc.reset_globals()
        self.addCleanup(rpc.reset_globals)
        self.context = nova_context.get_admin_context()

    def test_targeted_context_uses_the_cells_queue(self):
        cell_transport = messaging.get_rpc_transport(
            cfg.CONF, url='fake://cell1.example.org/')
        self.addCleanup(cell_transport.cleanup)
        # What nova.context.set_target_cell sets once nova-api looked the
        # server up (compute_api.get): the transport of the server's cell.
        self.context.mq_connection = cell_transport
        prepared = rpc._client(self.context, 'compute1')
        self.assertIs(cell_transport, prepared.transport)
        self.assertIsNot(nova_rpc.TRANSPORT, prepared.transport)
        self.assertEqual(('compute', 'nova_cyborg', 'compute1'),
                         (prepared.target.topic, prepared.target.namespace,
                          prepared.target.server))

    def test_untargeted_context_uses_the_global_transport(self):
        self.assertIsNone(self.context.mq_connection)
        self.assertIs(nova_rpc.TRANSPORT,
                      rpc._client(self.context, 'compute1').transport)

    def test_router_made_once(self):
        self.assertIs(rpc.router(), rpc.router())

    def test_pin_caps_the_default_client(self):
        self.flags(nova_cyborg='1.0', group='upgrade_levels')
        self.assertEqual('1.0', rpc.router().version_cap)

    def test_auto_leaves_the_cap_to_each_compute(self):
        self.assertIsNone(rpc.router().version_cap)


class VersionCapTest(test.NoDBTestCase):

    def test_the_oldest_wins(self):
        self.assertEqual('1.0', rpc.version_cap('1.0'))
        # A compute newer than this nova-api gets what nova-api knows.
        with mock.patch.object(rpc, 'VERSION', '1.2'):
            self.assertEqual('1.2', rpc.version_cap('1.7'))
            self.assertEqual('1.1', rpc.version_cap('1.1'))
            self.flags(nova_cyborg='1.0', group='upgrade_levels')
            self.assertEqual('1.0', rpc.version_cap('1.7'))

    def test_options_know_every_version(self):
        self.assertEqual(tuple(v for v, _what in rpc.VERSIONS),
                         nc_conf.RPC_VERSIONS)

    def test_unknown_pin_refused_by_the_option(self):
        self.assertRaises(ValueError, self.flags, nova_cyborg='0.9',
                          group='upgrade_levels')


class CheckComputeTest(test.NoDBTestCase):
    """nova-api decides from the capability versions the compute reports
    in Placement and from Nova's servicegroup API: no RPC call."""

    def setUp(self):
        super().setUp()
        rpc.reset_globals()
        self.addCleanup(rpc.reset_globals)
        self.context = nova_context.get_admin_context()
        self.instance = objects.Instance(uuid=uuids.inst, host='compute1')
        self.service = self.useFixture(fixtures.MockPatch(
            'nova.objects.Service.get_by_compute_host')).mock
        self.is_up = self.useFixture(fixtures.MockPatch(
            'nova.servicegroup.API.service_is_up', return_value=True)).mock
        self.call = self.useFixture(fixtures.MockPatchObject(
            messaging.RPCClient, 'call')).mock

    def check(self, capabilities, method=actions.ADD_METHOD):
        return rpc.check_compute(self.context, self.instance, method,
                                 capabilities)

    def test_patched_compute_serves_the_version_of_its_capability(self):
        self.assertEqual('1.0', self.check(['1.0', '1.1']))
        self.service.assert_called_once_with(self.context, 'compute1')
        self.is_up.assert_called_once_with(self.service.return_value)
        self.call.assert_not_called()

    def test_unpatched_compute_refused(self):
        error = self.assertRaises(exception.OperationRefused,
                                  self.check, [])
        self.assertIn('does not serve RPC namespace nova_cyborg 1.0',
                      error.format_message())
        self.service.assert_not_called()

    def test_compute_down_refused(self):
        self.is_up.return_value = False
        error = self.assertRaises(exception.OperationRefused,
                                  self.check, ['1.0'])
        self.assertEqual('nova-compute on host compute1 is down: try again '
                         'once it is up.', error.format_message())
        self.service.side_effect = nova_exception.ComputeHostNotFound(
            host='compute1')
        self.is_up.return_value = True
        self.assertRaises(exception.OperationRefused, self.check, ['1.0'])

    def test_method_newer_than_the_compute_refused(self):
        # This nova-api knows 1.1, the compute (older) serves 1.0.
        with mock.patch.dict(rpc.METHOD_VERSIONS,
                             {actions.ADD_METHOD: '1.1'}), \
                mock.patch.object(rpc, 'VERSION', '1.1'), \
                mock.patch.object(rpc, 'VERSIONS', rpc.VERSIONS + (
                    ('1.1', 'new'),)), \
                mock.patch.dict(rpc.SERVED_WITH, {'1.1': '1.2'}):
            error = self.assertRaises(exception.OperationRefused,
                                      self.check, ['1.0', '1.1'])
            self.assertEqual('1.1', self.check(['1.0', '1.1', '1.2']))
        self.assertIn('cannot run add_accelerator: it needs RPC namespace '
                      'nova_cyborg 1.1; the compute serves 1.0 and '
                      '[upgrade_levels] nova_cyborg allows auto',
                      error.format_message())

    def test_pin_refuses_a_newer_method(self):
        self.flags(nova_cyborg='1.0', group='upgrade_levels')
        with mock.patch.dict(rpc.METHOD_VERSIONS,
                             {actions.ADD_METHOD: '1.1'}), \
                mock.patch.object(rpc, 'VERSION', '1.1'), \
                mock.patch.object(rpc, 'VERSIONS', rpc.VERSIONS + (
                    ('1.1', 'new'),)), \
                mock.patch.dict(rpc.SERVED_WITH, {'1.1': '1.2'}):
            self.assertRaises(exception.OperationRefused,
                              self.check, ['1.0', '1.1', '1.2'])

    def test_every_version_has_its_capability(self):
        self.assertEqual({v for v, _what in rpc.VERSIONS},
                         set(rpc.SERVED_WITH))
        self.assertTrue(set(rpc.SERVED_WITH.values()) <= {
            v for v, _what in capability.VERSIONS})

    def test_cast_carries_the_version_and_the_cap(self):
        instance = objects.Instance(uuid=uuids.inst, host='compute1')
        prepared = mock.Mock()
        with mock.patch.object(rpc, '_client',
                               return_value=prepared) as client:
            rpc.cast(self.context, instance, actions.REMOVE_METHOD, 'dp',
                     '1.0')
        client.assert_called_once_with(self.context, 'compute1',
                                       version='1.0', version_cap='1.0')
        prepared.cast.assert_called_once_with(
            self.context, actions.REMOVE_METHOD, instance=instance,
            device_profile='dp')

    def test_cast_over_the_cap_is_not_sent(self):
        instance = objects.Instance(uuid=uuids.inst, host='compute1')
        with mock.patch.dict(rpc.METHOD_VERSIONS, {actions.ADD_METHOD: '1.1'}):
            with testtools.ExpectedException(messaging.RPCVersionCapError):
                rpc.cast(self.context, instance, actions.ADD_METHOD, 'dp',
                         '1.0')


class EndpointTest(test.TestCase):
    """nova-compute's handlers: the work on the long-task pool, a stale
    cast refused by its request id."""

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.instance = objects.Instance(
            self.context, uuid=uuids.server, host='compute1',
            project_id=self.context.project_id,
            user_id=self.context.user_id, vm_state='active',
            task_state=actions.ADDING)
        self.instance.create()
        self.manager = mock.Mock(host='compute1')
        self.endpoint = rpc_endpoint.AcceleratorEndpoint(self.manager)
        self.spawn = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.compat.spawn_long_task')).mock

    def action(self, request_id):
        context = self.context.elevated()
        context.request_id = request_id
        objects.InstanceAction.action_start(
            context, self.instance.uuid, 'addAccelerator',
            want_result=False)
        return context

    def test_work_goes_to_the_long_task_pool(self):
        context = self.action('req-' + uuids.first)
        self.assertIsNone(self.endpoint.add_accelerator(
            context, self.instance, 'dp'))
        self.spawn.assert_called_once_with(
            self.manager, actions.ADD_METHOD, self.instance, context,
            self.endpoint._actions.add_accelerator, context, self.instance,
            'dp')
        # The event of the action is named after the RPC method.
        self.assertEqual(actions.ADD_METHOD,
                         self.endpoint._actions.add_accelerator.__name__)

    def test_remove_goes_to_the_long_task_pool(self):
        context = self.action('req-' + uuids.first)
        self.endpoint.remove_accelerator(context, self.instance, 'dp')
        self.assertEqual(
            (actions.REMOVE_METHOD, self.endpoint._actions.remove_accelerator),
            (self.spawn.call_args[0][1], self.spawn.call_args[0][4]))

    def test_stale_cast_is_refused(self):
        # The first request's cast comes late: its task state was cleared
        # (the periodic task) and a second action began meanwhile.
        stale = self.action('req-' + uuids.first)
        self.action('req-' + uuids.second)
        with mock.patch.object(rpc_endpoint.LOG, 'warning') as warning:
            self.endpoint.add_accelerator(stale, self.instance, 'dp')
        self.spawn.assert_not_called()
        self.assertIn('req-' + uuids.first, str(warning.call_args))
        self.assertEqual(actions.ADDING, objects.Instance.get_by_uuid(
            self.context, self.instance.uuid).task_state)

    def test_latest_request_is_current(self):
        self.action('req-' + uuids.first)
        latest = self.action('req-' + uuids.second)
        self.assertTrue(rpc_endpoint.current(latest, self.instance))

    def test_no_recorded_action_is_not_current(self):
        context = self.context.elevated()
        context.request_id = 'req-' + uuids.nothing
        self.assertFalse(rpc_endpoint.current(context, self.instance))

    def test_without_request_id_is_current(self):
        context = self.context.elevated()
        context.request_id = None
        self.assertTrue(rpc_endpoint.current(context, self.instance))
