"""A first build cast before Cyborg answers its bind: the conductor's side
(nova_cyborg.flows.boot.early_arqs), the word it sends and the compute's
wait for it (nova_cyborg.model.bind_outcome, nova_cyborg.steps.bound_arqs),
and the capability read that allows it (nova_cyborg.model.capability)."""

import threading
from unittest import mock

import fixtures
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import exception
from nova_cyborg.flows.boot import early_arqs
from nova_cyborg.hooks import compute as compute_hooks
from nova_cyborg.hooks import conductor as hooks
from nova_cyborg.model import bind_outcome
from nova_cyborg.model import capability
from nova_cyborg.steps import bound_arqs
from tests.unit import test_client
from tests.unit import test_conductor
from tests.unit import test_early_arqs

ARQS = test_client.ARQS
CAST_FIRST = 'CUSTOM_NOVA_CYBORG_1_2'
DEADLINE = 60


def _event(status, tag=bind_outcome.TAG, data=None, uuid=uuids.inst):
    return objects.InstanceExternalEvent(
        instance_uuid=uuid, name='accelerator-request-bound', tag=tag,
        status=status, data=data or {})


class ConductorCastFirstTest(test_conductor.CreateAndBindBase):
    """The conductor's join, with Cyborg's bind held until released."""

    def setUp(self):
        super().setUp()
        self.addCleanup(early_arqs._pending.clear)
        self.addCleanup(early_arqs._binding.clear)
        self.requests.patch(ARQS, status_code=202)
        self.node_traits = {'node1': {CAST_FIRST}}
        self.sent = []
        self.told = threading.Event()

        def send(context, instance, nodename, event):
            self.sent.append((instance.uuid, nodename, event.status,
                              dict(event.data)))
            self.told.set()
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.compute_rpc.send_bind_outcome',
            side_effect=send))
        # Cyborg answers the bind once the test says so.
        self.release = threading.Event()
        original = early_arqs._bind_copies

        def held(*args):
            self.assertTrue(self.release.wait(DEADLINE))
            return original(*args)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.flows.boot.early_arqs._bind_copies', held))
        self.instance.system_metadata = {}
        self.context.request_id = 'req-1'

    def start(self):
        early_arqs.start(self.context,
                         [test_early_arqs._build_request(uuids.inst)])
        hooks.start_binding(self.context, self.instance, 'node1', self.spec)

    def join(self):
        return hooks.create_and_bind_arqs(self.context, self.instance,
                                          'node1', self.spec)

    def test_cast_before_the_bind_answers(self):
        self.start()
        self.assertEqual([uuids.a0, uuids.a1], self.join())
        # Marked for the node and this request; not saved here.
        self.assertEqual('node1 req-1', self.instance.system_metadata[
            bind_outcome.KEY])
        self.assertEqual([], self.sent)
        self.release.set()
        self.assertTrue(self.told.wait(DEADLINE))
        self.assertEqual([(uuids.inst, 'node1', 'completed', {})],
                         self.sent)
        self.assertEqual([('POST', None), ('PATCH', None)], self.methods())
        # Left to its thread: nothing for the scheduling's cleanup.
        self.assertEqual({}, early_arqs._binding)
        self.assertEqual([], self.freed)

    def test_failed_bind_tells_the_compute_and_frees_nothing(self):
        self.requests.patch(ARQS, status_code=503,
                            json={'error_message': 'injected'})
        self.requests.delete(ARQS, status_code=503)
        self.start()
        self.join()
        self.release.set()
        self.assertTrue(self.told.wait(DEADLINE))
        (uuid, node, status, data), = self.sent
        self.assertEqual((uuids.inst, 'node1', 'failed'),
                         (uuid, node, status))
        self.assertIn('503', data['reason'])
        # The ARQs it could not delete, for the compute to remember.
        self.assertEqual('%s,%s' % (uuids.a0, uuids.a1), data['arqs'])
        # The compute frees the allocation when it fails the build.
        self.assertEqual([], self.freed)

    def test_compute_without_the_capability_is_joined(self):
        self.node_traits = {'node1': {'CUSTOM_NOVA_CYBORG_1_1'}}
        self.start()
        joined = threading.Thread(target=self.join)
        joined.start()
        joined.join(0.2)
        self.assertTrue(joined.is_alive())  # waiting for Cyborg
        self.release.set()
        joined.join(DEADLINE)
        self.assertFalse(joined.is_alive())
        self.assertNotIn(bind_outcome.KEY, self.instance.system_metadata)
        self.assertEqual([], self.sent)

    def test_failed_joined_bind_frees_the_allocation(self):
        self.node_traits = {}
        self.requests.patch(ARQS, status_code=503)
        self.start()
        self.release.set()
        self.assertRaises(exception.AcceleratorRequestBindingFailed,
                          self.join)
        self.assertEqual([(uuids.inst, True)], self.freed)
        self.assertEqual([], self.sent)

    def test_port_with_a_profile_is_joined(self):
        nets = objects.NetworkRequestList(objects=[
            objects.NetworkRequest(port_id=uuids.port, device_profile='dp1')])
        self.requests.post(ARQS, status_code=201, json={'arqs': [
            test_client._arq(uuids.a0, 0), test_client._arq(uuids.a1, 1),
            ]})
        early_arqs.start(self.context,
                         [test_early_arqs._build_request(uuids.inst)])
        hooks.start_binding(self.context, self.instance, 'node1', self.spec,
                            nets)
        self.assertFalse(early_arqs._binding[uuids.inst].castable)

    def test_capability_read_once_per_node(self):
        for _n in range(2):
            self.assertTrue(capability.serves(self.context, 'node1', '1.2'))
        self.assertFalse(capability.serves(self.context, 'node2', '1.2'))
        self.assertEqual(2, len(self.placement_reads))
        self.assertIn('name=node1', self.placement_reads[0])
        self.assertIn('required=%s' % CAST_FIRST, self.placement_reads[0])

    def test_placement_unreadable_means_joined(self):
        self.useFixture(fixtures.MockPatchObject(
            self, 'get', side_effect=nova_exception.NovaException('down')))
        self.assertFalse(capability.serves(self.context, 'node1', '1.2'))


class BindOutcomeTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(bind_outcome._KEPT.clear)

    def test_cyborgs_own_events_go_to_nova(self):
        self.assertFalse(bind_outcome.offer(_event('completed',
                                                   tag=uuids.arq)))
        self.assertEqual({}, bind_outcome._KEPT)

    def test_word_before_the_wait(self):
        self.assertTrue(compute_hooks.external_event(
            None, _event('failed', data={'reason': 'r', 'arqs': ''})))
        self.assertEqual(('failed', {'reason': 'r', 'arqs': ''}),
                         bind_outcome.wait(uuids.inst, DEADLINE))
        # Taken once.
        self.assertIsNone(bind_outcome.wait(uuids.inst, 0))

    def test_word_after_the_wait_began(self):
        got = []
        waiter = threading.Thread(target=lambda: got.append(
            bind_outcome.wait(uuids.inst, DEADLINE)))
        waiter.start()
        bind_outcome.offer(_event('completed'))
        waiter.join(DEADLINE)
        self.assertEqual([('completed', {})], got)

    def test_no_word_in_time(self):
        self.assertIsNone(bind_outcome.wait(uuids.inst, 0.01))

    def test_oldest_go_first(self):
        self.useFixture(fixtures.MockPatchObject(bind_outcome, 'MAX_KEPT',
                                                 2))
        for uuid in (uuids.one, uuids.two, uuids.three):
            bind_outcome.offer(_event('completed', uuid=uuid))
        self.assertEqual({uuids.two, uuids.three}, set(bind_outcome._KEPT))

    def test_pending_only_for_this_node_and_request(self):
        context = nova_context.RequestContext('u', 'p', request_id='req-1')
        other = nova_context.RequestContext('u', 'p', request_id='req-2')
        for ctxt, node, expected in ((context, 'node1', True),
                                     (other, 'node1', False),
                                     (context, 'node2', False)):
            instance = objects.Instance(uuid=uuids.inst, node=node,
                                        system_metadata={})
            bind_outcome.mark(context, instance, 'node1')
            self.assertEqual(expected, bind_outcome.pending(ctxt, instance))
            # Removed whatever it named.
            self.assertEqual({}, instance.system_metadata)
        self.assertFalse(bind_outcome.pending(context, objects.Instance(
            uuid=uuids.inst, node='node1', system_metadata={})))


class ComputeWaitsForTheWordTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(bind_outcome._KEPT.clear)
        self.flags(arq_binding_timeout=1)
        self.context = nova_context.RequestContext('u', 'p',
                                                   request_id='req-1')
        self.instance = objects.Instance(uuid=uuids.inst, node='node1',
                                         system_metadata={})
        bind_outcome.mark(self.context, self.instance, 'node1')
        self.virtapi = mock.Mock()
        self.virtapi.wait_for_instance_event.return_value = (
            mock.MagicMock())
        self.read = self.useFixture(fixtures.MockPatchObject(
            bound_arqs, '_read_resolved', return_value=[
                {'uuid': uuids.a0, 'state': 'Bound'}])).mock
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_client'))
        self.useFixture(fixtures.MockPatchObject(
            bound_arqs, 'check_bound', side_effect=lambda arqs, u: arqs))
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.steps.function_check.check'))

    def get(self):
        return bound_arqs.get_bound_arqs(self.virtapi, self.context,
                                         self.instance, [uuids.a0])

    def test_completed_goes_on_to_cyborgs_events(self):
        bind_outcome.offer(_event('completed'))
        self.get()
        # Cyborg's events were waited for before the word: those that
        # came meanwhile reached their waiter.
        self.virtapi.wait_for_instance_event.assert_called_once()
        self.read.assert_called_once()
        self.assertNotIn(bind_outcome.KEY, self.instance.system_metadata)

    def test_failed_aborts_with_the_conductors_reason(self):
        bind_outcome.offer(_event('failed', data={
            'reason': 'Cyborg answered HTTP 503 to PATCH', 'arqs': uuids.a1}))
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.get)
        self.read.assert_not_called()
        save = self.useFixture(fixtures.MockPatchObject(
            objects.Instance, 'save')).mock
        failure = bound_arqs.build_failure(self.instance, exc)
        # No reschedule: the build ends in ERROR saying why.
        self.assertIsInstance(failure, nova_exception.BuildAbortException)
        # The fault the conductor gave it, not behind "Build of instance".
        self.assertEqual('Failed to bind accelerator requests: Cyborg '
                         'answered HTTP 503 to PATCH',
                         failure.format_message())
        # The ARQ the conductor could not delete goes with the server.
        self.assertEqual({'nova_cyborg_retired_arq_0': uuids.a1},
                         self.instance.system_metadata)
        save.assert_called_once_with()

    def test_no_word_times_out(self):
        # (in [DEFAULT] arq_binding_timeout: 1 s here)
        exc = self.assertRaises(bound_arqs.NoWordOnTheBind, self.get)
        self.read.assert_not_called()
        # Not a reschedule; the fault says what was waited for.
        failure = bound_arqs.build_failure(self.instance, exc)
        self.assertIsInstance(failure, nova_exception.BuildAbortException)
        self.assertIn('Timed out after 1 seconds', failure.format_message())

    def test_unmarked_build_does_not_wait(self):
        self.instance.system_metadata = {}
        self.get()
        self.read.assert_called_once()
