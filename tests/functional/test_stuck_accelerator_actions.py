"""An attach or detach that lost its RPC ends (issue 26).

nova-api sets the server's task state and casts addAccelerator or
removeAccelerator to its nova-compute, which clears the task state when it
is done. After a RabbitMQ restart the compute's handler failed with
MessagingTimeout while recording the instance action's event, before the
work that clears the task state began: the server stayed in
``adding_accelerator`` for good, every other action refused. The owner (of
project A) acts; a cloud admin of project C checks the server, Cyborg and
Placement (nova_cyborg.flows.attach.stuck_actions).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.objects import instance_action  # noqa: E402
from oslo_concurrency import lockutils  # noqa: E402
import oslo_messaging as messaging  # noqa: E402

from nova_cyborg.clients import compute_rpc as rpc  # noqa: E402
from nova_cyborg.flows.attach import endpoint as rpc_endpoint  # noqa: E402
from nova_cyborg.flows.attach import stuck_actions  # noqa: E402
from tests.functional.harness import waits  # noqa: E402


class StuckAcceleratorActionTest(attach_base.AttachTestBase):

    def setUp(self):
        super().setUp()
        self.plain = self._create_flavor(name='plain')
        with self.acting(self.owner_api):
            self.server = self.boot(self.plain)

    def owner_acts(self, action, dp):
        self.owner_api.post_server_action(
            self.server['id'], {action: {'device_profile': dp}})

    def task_state(self):
        """As the cloud admin of project C sees it."""
        return self.cloud_admin_api.get_server(
            self.server['id'])['OS-EXT-STS:task_state']

    def assert_usable_without_accelerator(self):
        """Nothing attached, nothing held; the owner attaches and detaches
        again."""
        self.assertEqual(
            ('ACTIVE', None), tuple(self.cloud_admin_api.get_server(
                self.server['id'])[key] for key in (
                    'status', 'OS-EXT-STS:task_state')))
        self.assertEqual([], self.cyborg.list_arqs(self.server['id']))
        self.assertEqual({}, self._device_allocations(self.server['id']))
        self.assertEqual([], self.hostdev_bdfs(self.server))
        self.accelerator_action(self.owner_api, self.server, 'addAccelerator',
                                self.dp)
        with self.acting(self.cloud_admin_api):
            self.assert_owner_has_devices(self.server, 'compute1', 1)
        self.accelerator_action(self.owner_api, self.server,
                                'removeAccelerator', self.dp)
        self.assertEqual([], self.cyborg.list_arqs(self.server['id']))

    def run_periodic_task(self):
        """nova-compute's periodic task, as its timer would run it."""
        manager = self.computes['compute1'].manager
        manager._settle_stuck_accelerator_actions(
            nova_context.get_admin_context())

    def compute_sees_its_devices(self):
        """A cast nova-compute never got announces nothing: its periodic
        task looks for one on a host with devices, as its report client's
        provider tree cache shows them (refreshed every
        ``[compute] resource_provider_association_refresh`` seconds, here
        1, by the resource tracker's periodic update)."""
        self.flags(resource_provider_association_refresh=1, group='compute')
        manager = self.computes['compute1'].manager

        def sees():
            manager.update_available_resource(
                nova_context.get_admin_context())
            return stuck_actions._has_devices(manager)
        waits.wait_until(sees, 'nova-compute sees its devices')

    def event_recording_times_out_once(self, action):
        """The conductor's RPC that records the compute's event of
        ``action`` times out once, as right after a RabbitMQ restart."""
        real = instance_action.InstanceActionEvent.event_start
        failed = []

        def event_start(context, instance_uuid, event_name, *args, **kw):
            if (event_name == attach_base.ACTION_EVENTS[action] and
                    not failed):
                failed.append(event_name)
                raise messaging.MessagingTimeout('RabbitMQ restarted')
            return real(context, instance_uuid, event_name, *args, **kw)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.instance_action.InstanceActionEvent.event_start',
            staticmethod(event_start)))
        return failed

    def test_event_recording_times_out(self):
        failed = self.event_recording_times_out_once('addAccelerator')
        self.owner_acts('addAccelerator', self.dp)
        waits.wait_until(lambda: failed, 'the event recording failed')
        waits.wait_until(lambda: self.task_state() is None,
                         'the task state cleared')
        self.assert_usable_without_accelerator()

    def test_detach_event_recording_times_out(self):
        # The detach never began: the accelerator stays attached, the task
        # state is cleared, and the owner detaches it again.
        self.accelerator_action(self.owner_api, self.server, 'addAccelerator',
                                self.dp)
        failed = self.event_recording_times_out_once('removeAccelerator')
        self.owner_acts('removeAccelerator', self.dp)
        waits.wait_until(lambda: failed, 'the event recording failed')
        waits.wait_until(lambda: self.task_state() is None,
                         'the task state cleared')
        with self.acting(self.cloud_admin_api):
            self.assert_owner_has_devices(self.server, 'compute1', 1)
        self.accelerator_action(self.owner_api, self.server,
                                'removeAccelerator', self.dp)
        self.assertEqual([], self.cyborg.list_arqs(self.server['id']))
        self.assertEqual({}, self._device_allocations(self.server['id']))
        self.assertEqual([], self.hostdev_bdfs(self.server))

    def test_cast_lost(self):
        # The cast never reaches nova-compute (RabbitMQ lost its queue):
        # its periodic task ends the action once it is older than
        # [nova_cyborg] stuck_accelerator_action_timeout.
        self.flags(stuck_accelerator_action_timeout=1, group='nova_cyborg')
        real = rpc.cast
        lost = []

        def cast(*args, **kwargs):
            if not lost:
                lost.append(args)
                return
            return real(*args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.compute_rpc.cast', cast))
        self.compute_sees_its_devices()
        self.owner_acts('addAccelerator', self.dp)
        self.assertEqual('adding_accelerator', self.task_state())

        def ended():
            self.run_periodic_task()
            return self.task_state() is None
        waits.wait_until(ended, 'the periodic task ended the action')
        self.assert_usable_without_accelerator()

    def test_stale_cast_is_refused(self):
        # The first addAccelerator's cast is held back (a slow broker),
        # the periodic task ends that action, the owner asks again and
        # that cast is held too; then the first cast arrives. It must not
        # act on the second request's task state: nova-compute refuses it
        # by its request id, and the second cast attaches the device.
        self.flags(stuck_accelerator_action_timeout=1, group='nova_cyborg')
        real = rpc.cast
        held = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.compute_rpc.cast',
            lambda *args, **kwargs: held.append((args, kwargs))))
        self.compute_sees_its_devices()
        self.owner_acts('addAccelerator', self.dp)

        def ended():
            self.run_periodic_task()
            return self.task_state() is None
        waits.wait_until(ended, 'the periodic task ended the first action')
        self.owner_acts('addAccelerator', self.dp)
        self.assertEqual(2, len(held))
        self.assertEqual('adding_accelerator', self.task_state())
        first, second = [args[0].request_id for args, _kw in held]

        with fixtures.MockPatchObject(rpc_endpoint.LOG, 'warning') as warning:
            real(*held[0][0], **held[0][1])
            waits.wait_until(lambda: warning.mock.called,
                             'nova-compute refused the stale cast')
        self.assertIn(first, str(warning.mock.call_args))
        # Untouched: the second action's task state, nothing attached.
        self.assertEqual('adding_accelerator', self.task_state())
        self.assertEqual([], self.cyborg.list_arqs(self.server['id']))

        real(*held[1][0], **held[1][1])
        self._wait_for_instance_action_event(
            self.server, 'addAccelerator', 'compute_add_accelerator',
            'Success')
        waits.wait_until(lambda: self.task_state() is None,
                         'the second action ended')
        with self.acting(self.cloud_admin_api):
            self.assert_owner_has_devices(self.server, 'compute1', 1)
        # The first action has no event from nova-compute; the second
        # has its success.
        events = {
            action['request_id']: [
                e['event'] for e in self.cloud_admin_api.api_get(
                    '/servers/%s/os-instance-actions/%s' % (
                        self.server['id'], action['request_id'])
                ).body['instanceAction']['events']]
            for action in self.cloud_admin_api.get_instance_actions(
                self.server['id'])
            if action['action'] == 'addAccelerator'}
        self.assertEqual({first: [], second: ['compute_add_accelerator']},
                         events)

    def test_action_under_way_is_left_alone(self):
        # A handler that runs (here waiting for the instance's lock) is not
        # ended by the periodic task, however old its task state.
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.flows.attach.stuck_actions.timeutils.is_older_than',
            return_value=True))
        with lockutils.lock(self.server['id']):
            self.owner_acts('addAccelerator', self.dp)
            waits.wait_until(
                lambda: self.server['id'] in stuck_actions._running,
                'the handler running')
            self.run_periodic_task()
            self.assertEqual('adding_accelerator', self.task_state())
        self._wait_for_instance_action_event(
            self.server, 'addAccelerator', 'compute_add_accelerator',
            'Success')
        self.assertIsNone(self.task_state())
        with self.acting(self.cloud_admin_api):
            self.assert_owner_has_devices(self.server, 'compute1', 1)
