"""ARQs created while the scheduler runs (nova_cyborg.flows.boot.early_arqs and
the
hook around ``schedule_and_build_instances``), against recorded HTTP."""

from concurrent import futures
from unittest import mock

import fixtures
from nova import exception as nova_exception
from nova import objects
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import exception
from nova_cyborg.flows.boot import conductor
from nova_cyborg.flows.boot import early_arqs
from nova_cyborg.flows.cleanup import delete as cleanup
from nova_cyborg.hooks import conductor as hooks
from nova_cyborg.model import bookkeeping
from tests.unit import test_client
from tests.unit import test_conductor

ARQS = test_client.ARQS


def _build_request(uuid, dp_name='dp1'):
    specs = {'accel:device_profile': dp_name} if dp_name else {}
    return objects.BuildRequest(
        instance_uuid=uuid, instance=objects.Instance(
            uuid=uuid, project_id='project',
            flavor=objects.Flavor(extra_specs=specs)))


def _done(func, *args):
    """A future already run (the worker, in the test's thread)."""
    future = futures.Future()
    try:
        future.set_result(func(*args))
    except Exception as e:  # noqa: B902 (handed over as the pool would)
        future.set_exception(e)
    return future


class EarlyArqsTest(test_conductor.CreateAndBindTest):
    """The conductor's create and bind, the ARQs created beforehand."""

    def setUp(self):
        super().setUp()
        self.addCleanup(early_arqs._pending.clear)
        self.addCleanup(early_arqs._binding.clear)
        self.requests.patch(ARQS, status_code=202)

    def test_created_early_bound_without_a_second_create(self):
        started = early_arqs.start(self.context,
                                   [_build_request(uuids.inst)])
        self.assertEqual([uuids.inst], started)
        self.assertEqual({uuids.a0, uuids.a1}, set(self.call()))
        self.assertEqual([('POST', None), ('PATCH', None)], self.methods())
        # Taken: nothing left to discard.
        early_arqs.discard(self.context, started)
        self.assertEqual([('POST', None), ('PATCH', None)], self.methods())

    def test_no_profile_starts_nothing(self):
        started = early_arqs.start(
            self.context, [_build_request(uuids.inst, dp_name=None)])
        self.assertEqual([], started)
        self.assertEqual({}, early_arqs._pending)
        self.assertFalse(self.requests.called)

    def test_not_taken_are_deleted(self):
        started = early_arqs.start(self.context,
                                   [_build_request(uuids.inst)])
        early_arqs.discard(self.context, started)
        self.assertEqual(
            [('POST', None), ('DELETE', ['%s,%s' % (uuids.a0, uuids.a1)])],
            self.methods())
        self.assertIsNone(early_arqs.take(uuids.inst))

    def test_failed_early_create_fails_the_bind_as_before(self):
        self.requests.post(ARQS, status_code=503)
        early_arqs.start(self.context, [_build_request(uuids.inst)])
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.call)
        self.assertIn('503', exc.format_message())
        # Not sent again; nothing to delete; the allocation is freed.
        self.assertEqual([('POST', None)], self.methods())
        self.assertEqual([(uuids.inst, True)], self.freed)

    def test_failed_early_create_discarded_quietly(self):
        self.requests.post(ARQS, status_code=503)
        started = early_arqs.start(self.context,
                                   [_build_request(uuids.inst)])
        early_arqs.discard(self.context, started)
        self.assertEqual([('POST', None)], self.methods())

    def start_binding(self):
        hooks.start_binding(self.context, self.instance, 'node1', self.spec)

    def hook_call(self):
        return hooks.create_and_bind_arqs(self.context, self.instance,
                                          'node1', self.spec)

    def test_bind_started_early_is_joined(self):
        early_arqs.start(self.context, [_build_request(uuids.inst)])
        self.start_binding()
        self.assertEqual({uuids.a0, uuids.a1}, set(self.hook_call()))
        self.assertEqual([('POST', None), ('PATCH', None)], self.methods())
        self.assertEqual({}, early_arqs._binding)

    def test_failed_early_bind_raised_at_the_join(self):
        self.requests.patch(ARQS, status_code=503)
        self.start_binding()
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.hook_call)
        self.assertIn('503', exc.format_message())
        # Cleaned up as a bind in the caller's thread was.
        self.assertEqual(
            [('POST', None), ('PATCH', None),
             ('DELETE', ['%s,%s' % (uuids.a0, uuids.a1)])], self.methods())
        self.assertEqual([(uuids.inst, True)], self.freed)

    def test_early_bind_works_on_copies_and_saves_nothing(self):
        # The conductor's thread goes on with the server, its request
        # spec and networks (obj_target_cell swaps the server's context):
        # the worker gets copies, taken before it starts, and records
        # nothing; the ARQs Cyborg could not delete travel in the error
        # and the conductor records them in the server's cell.
        self.instance.system_metadata = {}
        self.requests.patch(ARQS, status_code=500)
        self.requests.delete(ARQS, status_code=503)
        save = self.useFixture(fixtures.MockPatchObject(
            objects.Instance, 'save')).mock
        seen = []
        real = conductor.create_and_bind_arqs

        def bind(context, instance, *args, **kwargs):
            seen.append((instance, args[1], kwargs))
            return real(context, instance, *args, **kwargs)
        spawned = []
        self.useFixture(fixtures.MockPatchObject(
            early_arqs, '_spawn',
            side_effect=lambda func, *args: spawned.append(args) or
            _done(func, *args)))
        early_arqs.start_binding(bind, self.context, self.instance, 'node1',
                                 self.spec)
        (copy, spec, kwargs), = seen
        self.assertIsNot(self.instance, copy)
        self.assertEqual(self.instance.uuid, copy.uuid)
        self.assertIsNot(self.spec, spec)
        self.assertEqual({'record': False, 'free_on_failure': False},
                         kwargs)
        save.assert_not_called()
        self.assertEqual({}, self.instance.system_metadata)
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.hook_call)
        self.assertEqual([uuids.a0, uuids.a1], exc.arqs)
        save.assert_not_called()
        # The conductor's thread, in the server's cell.
        manager = mock.Mock()
        hooks.build_arqs_failed(manager, self.context, self.instance, exc,
                                self.spec)
        self.assertEqual(
            {'nova_cyborg_retired_arq_0': uuids.a0,
             'nova_cyborg_retired_arq_1': uuids.a1},
            self.instance.system_metadata)
        save.assert_called_once_with()
        manager._set_vm_state_and_notify.assert_called_once()

    def test_port_arq_reaches_the_conductors_networks(self):
        # The worker binds on copies: the ARQ UUID it gives a port with a
        # device profile must reach the conductor's own requested
        # networks, which go to nova-compute with the build (the port's
        # binding profile and the guest's interface need it).
        self.instance.flavor.extra_specs = {}
        self.requests.post(ARQS, status_code=201, json={'arqs': [
            test_client._arq(uuids.p0, 0)]})
        self.spec.requested_resources = [objects.RequestGroup(
            requester_id='device_profile_0' + uuids.port,
            provider_uuids=[uuids.rp0])]
        nets = objects.NetworkRequestList(objects=[
            objects.NetworkRequest(port_id=uuids.port, device_profile='dp1'),
            objects.NetworkRequest(port_id=uuids.plain)])
        hooks.start_binding(self.context, self.instance, 'node1', self.spec,
                            nets)
        self.assertFalse(nets[0].obj_attr_is_set('arq_uuid'))
        self.assertEqual([uuids.p0], hooks.create_and_bind_arqs(
            self.context, self.instance, 'node1', self.spec, nets))
        self.assertEqual(uuids.p0, nets[0].arq_uuid)
        self.assertFalse(nets[1].obj_attr_is_set('arq_uuid'))
        self.assertEqual([('POST', None), ('PATCH', None)], self.methods())
        self.assertEqual({}, early_arqs._binding)

    def test_bind_not_joined_is_deleted(self):
        self.start_binding()
        early_arqs.discard(self.context, [uuids.inst])
        self.assertEqual(
            [('POST', None), ('PATCH', None),
             ('DELETE', ['%s,%s' % (uuids.a0, uuids.a1)])], self.methods())

    def test_no_accelerators_no_bind_started(self):
        self.instance.flavor.extra_specs = {}
        self.start_binding()
        self.assertEqual({}, early_arqs._binding)
        self.assertIsNone(self.hook_call())
        self.assertFalse(self.requests.called)


class ScheduleAndBuildHookTest(test_client.ClientTestBase):
    """The decorator of ``schedule_and_build_instances``."""

    def setUp(self):
        super().setUp()
        self.addCleanup(early_arqs._pending.clear)
        self.requests.post(ARQS, status_code=201, json={'arqs': [
            test_client._arq(uuids.a0)]})
        self.requests.delete(ARQS, status_code=204)

    def methods(self):
        return [(r.method, r.qs.get('arqs')) for r in
                self.requests.request_history]

    def test_untaken_arqs_deleted_when_the_build_fails(self):
        seen = []

        @hooks.arqs_while_scheduling
        def schedule_and_build_instances(manager, context, build_requests,
                                         request_specs, image):
            seen.append((manager, request_specs, image))
            raise ValueError('no host')

        self.assertRaises(
            ValueError, schedule_and_build_instances, 'manager',
            self.context, build_requests=[_build_request(uuids.inst)],
            request_specs=['spec'], image={})
        self.assertEqual([('manager', ['spec'], {})], seen)
        self.assertEqual([('POST', None), ('DELETE', [uuids.a0])],
                         self.methods())

    def test_scheduling_failed_deletes_them_at_once(self):
        requests = [_build_request(uuids.inst),
                    _build_request(uuids.plain, dp_name=None)]
        early_arqs.start(self.context, requests)
        hooks.scheduling_failed(self.context, requests)
        self.assertEqual([('POST', None), ('DELETE', [uuids.a0])],
                         self.methods())
        self.assertEqual({}, early_arqs._pending)

    def test_server_without_accelerators_calls_nothing(self):
        @hooks.arqs_while_scheduling
        def schedule_and_build_instances(manager, context, build_requests):
            return 'built'

        self.assertEqual('built', schedule_and_build_instances(
            'manager', self.context,
            [_build_request(uuids.inst, dp_name=None)]))
        self.assertFalse(self.requests.called)


# Only the tests above: CreateAndBindTest's own run in test_conductor.
for _name in dir(test_conductor.CreateAndBindTest):
    if _name.startswith('test_') and _name not in vars(EarlyArqsTest):
        setattr(EarlyArqsTest, _name, None)


class RecordTest(test_client.ClientTestBase):
    """The worker records the ARQs it created in the server's build
    request; deleting the build request deletes them."""

    def setUp(self):
        super().setUp()
        self.build_request = _build_request(uuids.inst)
        self.build_request.instance.system_metadata = {}
        self.get = self.useFixture(fixtures.MockPatch(
            'nova.objects.BuildRequest.get_by_instance_uuid',
            return_value=self.build_request)).mock
        self.save = self.useFixture(fixtures.MockPatchObject(
            self.build_request, 'save')).mock

    def test_recorded_on_a_copy_read_from_the_api_database(self):
        early_arqs._record(self.context, uuids.inst,
                           [{'uuid': uuids.a0}, {'uuid': uuids.a1}])
        self.get.assert_called_once_with(self.context, uuids.inst)
        self.save.assert_called_once_with()
        self.assertEqual([uuids.a0, uuids.a1],
                         bookkeeping.early_arqs(self.build_request))

    def test_build_request_gone_records_nothing(self):
        self.get.side_effect = nova_exception.BuildRequestNotFound(
            uuid=uuids.inst)
        early_arqs._record(self.context, uuids.inst, [{'uuid': uuids.a0}])
        self.save.assert_not_called()

    def test_a_failing_save_does_not_fail_the_creation(self):
        self.save.side_effect = ValueError('database away')
        early_arqs._record(self.context, uuids.inst, [{'uuid': uuids.a0}])

    def test_deleting_the_build_request_deletes_them(self):
        self.requests.delete(ARQS, status_code=204)
        early_arqs._record(self.context, uuids.inst, [{'uuid': uuids.a0}])
        cleanup.delete_early_arqs(self.context, self.build_request)
        (request,) = self.requests.request_history
        self.assertEqual(('DELETE', [uuids.a0]),
                         (request.method, request.qs.get('arqs')))

    def test_nothing_recorded_asks_cyborg_nothing(self):
        cleanup.delete_early_arqs(self.context, self.build_request)
        self.assertFalse(self.requests.called)

    def test_cyborg_failing_is_logged_not_raised(self):
        self.requests.delete(ARQS, status_code=503)
        early_arqs._record(self.context, uuids.inst, [{'uuid': uuids.a0}])
        cleanup.delete_early_arqs(self.context, self.build_request)
