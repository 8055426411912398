"""Resize and cold migration: parking, binding, rollback, confirm, revert."""

from unittest import mock

import fixtures
from nova.compute import vm_states
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.clients import cyborg as client
from nova_cyborg import exception
from nova_cyborg.flows.move import resize as move
from nova_cyborg.flows.move import revert as move_revert
from nova_cyborg.model import bookkeeping
from nova_cyborg.steps import arqs as arq_steps

DP = 'accel:device_profile'
PARKED = bookkeeping.PARKED_PREFIX
RETIRED = bookkeeping.RETIRED_PREFIX


def _flavor(dp_name=None):
    return objects.Flavor(extra_specs={DP: dp_name} if dp_name else {})


def _arq(uuid, rp=None, host=None, group=0, state='Bound'):
    return {'uuid': uuid, 'state': state, 'device_profile_name': 'dp',
            'device_profile_group_id': group, 'device_rp_uuid': rp,
            'hostname': host, 'instance_uuid': uuids.inst if host else None}


#: The source's ARQs, bound on the source host.
SOURCE = [_arq(uuids.a0, uuids.src_rp0, 'src-host', 0),
          _arq(uuids.a1, uuids.src_rp1, 'src-host', 1)]
SOURCE_PARKED = {
    PARKED + '0': '%s %s src-host' % (uuids.a0, uuids.src_rp0),
    PARKED + '1': '%s %s src-host' % (uuids.a1, uuids.src_rp1)}
#: The new flavor's ARQs, as Cyborg creates them.
NEW = [_arq(uuids.b0, group=0, state='Initial'),
       _arq(uuids.b1, group=1, state='Initial')]
NEW_BINDINGS = {
    uuids.b0: {'hostname': 'dest-node', 'device_rp_uuid': uuids.dest_rp0,
               'instance_uuid': uuids.inst},
    uuids.b1: {'hostname': 'dest-node', 'device_rp_uuid': uuids.dest_rp1,
               'instance_uuid': uuids.inst}}
PARKED_BINDINGS = {
    uuids.a0: {'hostname': 'src-host', 'device_rp_uuid': uuids.src_rp0,
               'instance_uuid': uuids.inst},
    uuids.a1: {'hostname': 'src-host', 'device_rp_uuid': uuids.src_rp1,
               'instance_uuid': uuids.inst}}


class MoveTestBase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.RequestContext(
            'user', 'project', auth_token='user-token')
        self.virtapi = mock.sentinel.virtapi
        # Every call that matters, in order, on one parent mock.
        self.calls = mock.Mock()
        self.cyclient = mock.create_autospec(client.CyborgClient,
                                             instance=True)
        # The real mapping lookup: it does not talk to Cyborg.
        self.cyclient.get_arq_device_rp_uuid.side_effect = (
            client.CyborgClient(self.context).get_arq_device_rp_uuid)
        self.calls.attach_mock(self.cyclient, 'cyborg')
        self.get_client = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_client',
            return_value=self.cyclient)).mock
        self.get_bound = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.steps.bound_arqs.get_bound_arqs')).mock
        self.calls.attach_mock(self.get_bound, 'get_bound_arqs')
        self.instance = objects.Instance(
            uuid=uuids.inst, vm_state=vm_states.ACTIVE,
            host='src-host', node='src-host',
            flavor=_flavor('dp-old'), system_metadata={})
        self.save = self.useFixture(fixtures.MockPatchObject(
            self.instance, 'save')).mock
        self.calls.attach_mock(self.save, 'save')

    def meta(self):
        return dict(self.instance.system_metadata)

    def names(self):
        """The names of the calls made, in order."""
        return [c[0] for c in self.calls.mock_calls]


class InstanceArqsTest(MoveTestBase):

    def test_with_profile(self):
        self.cyclient.get_arqs_for_instance.return_value = SOURCE
        self.assertEqual(SOURCE,
                         arq_steps.instance_arqs(self.context, self.instance))
        self.get_client.assert_called_once_with(self.context)
        self.cyclient.get_arqs_for_instance.assert_called_once_with(
            uuids.inst)

    def test_arqs_of_another_host_are_left_out(self):
        # A resize that failed after the destination's ARQs were bound:
        # the source's guest never gets the destination's devices.
        dest = _arq(uuids.b0, uuids.dest_rp0, 'dest-node')
        self.cyclient.get_arqs_for_instance.return_value = SOURCE + [dest]
        self.assertEqual(SOURCE,
                         arq_steps.instance_arqs(self.context, self.instance))
        self.instance.host = self.instance.node = 'dest-node'
        self.assertEqual([dest],
                         arq_steps.instance_arqs(self.context, self.instance))

    def test_bound_with_the_service_host_name(self):
        self.instance.node = 'src-node.example.com'
        self.cyclient.get_arqs_for_instance.return_value = SOURCE
        self.assertEqual(SOURCE,
                         arq_steps.instance_arqs(self.context, self.instance))

    def test_without_profile(self):
        self.instance.flavor = _flavor()
        self.assertEqual([], arq_steps.instance_arqs(self.context,
                                                     self.instance))
        self.get_client.assert_not_called()

    def test_without_profile_with_attached_accelerator(self):
        self.instance.flavor = _flavor()
        self.instance.system_metadata = {
            bookkeeping.ATTACHED_PREFIX + '0': '%s dp-extra' % uuids.a0}
        self.cyclient.get_arqs_for_instance.return_value = SOURCE[:1]
        self.assertEqual(SOURCE[:1],
                         arq_steps.instance_arqs(self.context, self.instance))
        self.cyclient.get_arqs_for_instance.assert_called_once_with(
            uuids.inst)


@mock.patch('nova_cyborg.clients.cyborg.get_device_profile_request_groups')
class AddProfileGroupsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = mock.sentinel.context
        self.port_group = objects.RequestGroup(requester_id=uuids.port)
        self.spec = objects.RequestSpec(
            requested_resources=[self.port_group])

    def test_with_profile(self, get_groups):
        groups = [objects.RequestGroup(requester_id='device_profile_0'),
                  objects.RequestGroup(requester_id='device_profile_1')]
        get_groups.return_value = groups
        move.add_profile_groups(self.context, self.spec, _flavor('dp-new'))
        get_groups.assert_called_once_with(self.context, 'dp-new')
        self.assertEqual([self.port_group] + groups,
                         self.spec.requested_resources)

    def test_without_profile(self, get_groups):
        move.add_profile_groups(self.context, self.spec, _flavor())
        move.add_profile_groups(self.context, self.spec, None)
        get_groups.assert_not_called()
        self.assertEqual([self.port_group], self.spec.requested_resources)

    def test_profile_error_raised(self, get_groups):
        get_groups.side_effect = exception.DeviceProfileError(
            name='dp-new', msg='no such device profile in Cyborg')
        self.assertRaises(exception.DeviceProfileError,
                          move.add_profile_groups, self.context, self.spec,
                          _flavor('dp-new'))
        self.assertEqual([self.port_group], self.spec.requested_resources)


class SwapToDestinationTest(MoveTestBase):

    def setUp(self):
        super().setUp()
        self.flags(arq_binding_timeout=7)
        self.spec = objects.RequestSpec(requested_resources=[
            objects.RequestGroup(requester_id=uuids.port,
                                 provider_uuids=[uuids.bw_rp]),
            objects.RequestGroup(requester_id='device_profile_0',
                                 provider_uuids=[uuids.dest_rp0]),
            objects.RequestGroup(requester_id='device_profile_1',
                                 provider_uuids=[uuids.dest_rp1])])
        self.migration = objects.Migration(dest_compute='dest-host',
                                           dest_node='dest-node')
        self.cyclient.get_arqs_for_instance.return_value = SOURCE
        self.cyclient.create_arqs.return_value = NEW
        # What the system metadata held when the source's ARQs were
        # unbound.
        self.at_unbind = []
        self.cyclient.unbind_arqs.side_effect = (
            lambda arq_uuids: self.at_unbind.append(self.meta()))

    def swap(self, new_profile='dp-new'):
        return move.swap_to_destination(
            self.virtapi, self.context, self.instance, _flavor(new_profile),
            self.spec, self.migration, self.calls.power_off,
            self.calls.power_on)

    def assert_rolled_back(self, exc, reason, powered_on=True):
        """The state of the source is restored and the reason given."""
        self.assertIsInstance(exc.inner_exception,
                              exception.AcceleratorRequestBindingFailed)
        self.assertIn(reason, exc.inner_exception.format_message())
        self.assertIn(reason, exc.format_message())
        # The parked ARQs are bound again to their own provider and host.
        self.assertEqual(mock.call(PARKED_BINDINGS),
                         self.cyclient.bind_arqs.call_args)
        self.assertEqual(
            mock.call(self.virtapi, self.context, self.instance,
                      [uuids.a0, uuids.a1]),
            self.get_bound.call_args)
        self.assertEqual({}, self.meta())
        if powered_on:
            # With the ARQs the instance has once they are bound again.
            self.assertEqual(
                [mock.call.cyborg.get_arqs_for_instance(uuids.inst),
                 mock.call.power_on(SOURCE)],
                self.calls.mock_calls[-2:])
        else:
            self.calls.power_on.assert_not_called()

    def test_no_profile_on_either_flavor(self):
        self.instance.flavor = _flavor()
        self.assertIsNone(self.swap(new_profile=None))
        self.get_client.assert_not_called()
        self.assertEqual([], self.calls.mock_calls)
        self.assertEqual({}, self.meta())

    def test_profile_to_profile(self):
        self.swap()
        self.assertEqual([
            mock.call.cyborg.get_arqs_for_instance(uuids.inst),
            mock.call.power_off(),
            mock.call.save(),
            mock.call.cyborg.unbind_arqs([uuids.a0, uuids.a1]),
            mock.call.cyborg.create_arqs('dp-new'),
            mock.call.cyborg.get_arq_device_rp_uuid(
                NEW[0], self.spec.get_request_group_mapping(), None),
            mock.call.cyborg.get_arq_device_rp_uuid(
                NEW[1], self.spec.get_request_group_mapping(), None),
            mock.call.cyborg.bind_arqs(NEW_BINDINGS),
            mock.call.get_bound_arqs(self.virtapi, self.context,
                                     self.instance, [uuids.b0, uuids.b1]),
        ], self.calls.mock_calls)
        # Remembered (and saved) before they were unbound; kept until the
        # move is confirmed or reverted.
        self.assertEqual([SOURCE_PARKED], self.at_unbind)
        self.assertEqual(SOURCE_PARKED, self.meta())

    def test_profile_to_none(self):
        self.swap(new_profile=None)
        self.assertEqual([
            mock.call.cyborg.get_arqs_for_instance(uuids.inst),
            mock.call.power_off(),
            mock.call.save(),
            mock.call.cyborg.unbind_arqs([uuids.a0, uuids.a1]),
        ], self.calls.mock_calls)
        self.assertEqual(SOURCE_PARKED, self.meta())

    def test_none_to_profile(self):
        self.instance.flavor = _flavor()
        self.cyclient.get_arqs_for_instance.return_value = []
        self.swap()
        self.assertEqual(
            ['cyborg.get_arqs_for_instance', 'cyborg.create_arqs',
             'cyborg.get_arq_device_rp_uuid', 'cyborg.get_arq_device_rp_uuid',
             'cyborg.bind_arqs', 'get_bound_arqs'], self.names())
        self.cyclient.create_arqs.assert_called_once_with('dp-new')
        self.cyclient.bind_arqs.assert_called_once_with(NEW_BINDINGS)
        self.assertEqual({}, self.meta())

    def test_stopped_instance_is_also_parked(self):
        self.instance.vm_state = vm_states.STOPPED
        self.swap()
        self.assertEqual(SOURCE_PARKED, self.meta())
        self.cyclient.bind_arqs.assert_called_once_with(NEW_BINDINGS)

    def test_retired_arqs_are_deleted_first(self):
        self.instance.system_metadata = {RETIRED + '0': uuids.r0,
                                         RETIRED + '1': uuids.r1}
        self.swap()
        self.assertEqual(
            [mock.call.cyborg.get_arqs_for_instance(uuids.inst),
             mock.call.cyborg.delete_arqs_strictly([uuids.r0, uuids.r1]),
             mock.call.save()],
            self.calls.mock_calls[:3])
        self.assertEqual(SOURCE_PARKED, self.meta())

    def test_retired_arqs_are_deleted_without_profiles(self):
        self.instance.flavor = _flavor()
        self.instance.system_metadata = {RETIRED + '0': uuids.r0}
        self.swap(new_profile=None)
        self.assertEqual(
            [mock.call.cyborg.delete_arqs_strictly([uuids.r0]),
             mock.call.save()], self.calls.mock_calls)
        self.assertEqual({}, self.meta())

    def test_retired_arqs_still_not_deletable_are_kept(self):
        self.instance.system_metadata = {RETIRED + '0': uuids.r0}
        self.cyclient.delete_arqs_strictly.side_effect = (
            exception.CyborgError(op='delete', msg='unreachable'))
        self.swap()
        self.assertEqual(dict(SOURCE_PARKED, **{RETIRED + '0': uuids.r0}),
                         self.meta())
        self.cyclient.bind_arqs.assert_called_once_with(NEW_BINDINGS)

    def test_create_fails(self):
        self.cyclient.create_arqs.side_effect = exception.CyborgError(
            op='create', status=500, msg='Cyborg answered HTTP 500: boom')
        self.cyclient.get_arqs_for_instance.side_effect = [SOURCE, SOURCE]
        exc = self.assertRaises(nova_exception.InstanceFaultRollback,
                                self.swap)
        self.assert_rolled_back(exc, 'Cyborg answered HTTP 500: boom')
        # Nothing was created, so nothing is deleted.
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.assertEqual(
            ['cyborg.get_arqs_for_instance', 'power_off', 'save',
             'cyborg.unbind_arqs', 'cyborg.create_arqs', 'cyborg.bind_arqs',
             'get_bound_arqs', 'save', 'cyborg.get_arqs_for_instance',
             'power_on'], self.names())

    def test_bind_fails(self):
        self.cyclient.bind_arqs.side_effect = [
            exception.AcceleratorRequestBindingFailed(
                arqs=[uuids.b0, uuids.b1], msg='no free attach handle'),
            None]
        exc = self.assertRaises(nova_exception.InstanceFaultRollback,
                                self.swap)
        self.assert_rolled_back(exc, 'no free attach handle')
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.b0, uuids.b1])
        self.assertEqual(
            [mock.call(NEW_BINDINGS), mock.call(PARKED_BINDINGS)],
            self.cyclient.bind_arqs.call_args_list)
        # The new ARQs go before the parked ones are bound again.
        names = self.names()
        self.assertLess(names.index('cyborg.delete_arqs_strictly'),
                        names.index('get_bound_arqs'))

    def test_wait_fails(self):
        self.get_bound.side_effect = [nova_exception.InstanceEventTimeout(),
                                      SOURCE]
        exc = self.assertRaises(nova_exception.InstanceFaultRollback,
                                self.swap)
        self.assert_rolled_back(
            exc, 'Timed out after 7 seconds waiting for Cyborg to bind')
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.b0, uuids.b1])
        self.assertEqual(
            [mock.call(self.virtapi, self.context, self.instance,
                       [uuids.b0, uuids.b1]),
             mock.call(self.virtapi, self.context, self.instance,
                       [uuids.a0, uuids.a1])],
            self.get_bound.call_args_list)

    def test_no_provider_for_a_group(self):
        self.spec.requested_resources.pop()
        exc = self.assertRaises(nova_exception.InstanceFaultRollback,
                                self.swap)
        self.assert_rolled_back(exc, 'device_profile_1')
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.b0, uuids.b1])
        # Only the parked ARQs were bound.
        self.cyclient.bind_arqs.assert_called_once_with(PARKED_BINDINGS)

    def test_failure_of_stopped_instance_does_not_power_on(self):
        self.instance.vm_state = vm_states.STOPPED
        self.cyclient.create_arqs.side_effect = exception.CyborgError(
            op='create', msg='boom')
        exc = self.assertRaises(nova_exception.InstanceFaultRollback,
                                self.swap)
        self.assert_rolled_back(exc, 'boom', powered_on=False)

    def test_failure_new_arqs_not_deletable_are_retired(self):
        self.get_bound.side_effect = [nova_exception.InstanceEventTimeout(),
                                      SOURCE]
        self.cyclient.delete_arqs_strictly.side_effect = (
            exception.CyborgError(op='delete', msg='unreachable'))
        exc = self.assertRaises(nova_exception.InstanceFaultRollback,
                                self.swap)
        self.assertIsInstance(exc.inner_exception,
                              exception.AcceleratorRequestBindingFailed)
        self.assertEqual({RETIRED + '0': uuids.b0, RETIRED + '1': uuids.b1},
                         self.meta())
        self.cyclient.bind_arqs.assert_called_with(PARKED_BINDINGS)
        self.calls.power_on.assert_called_once_with(SOURCE)

    def test_failure_to_bind_parked_again_keeps_them(self):
        self.cyclient.create_arqs.side_effect = exception.CyborgError(
            op='create', msg='boom')
        self.cyclient.bind_arqs.side_effect = (
            exception.AcceleratorRequestBindingFailed(
                arqs=[uuids.a0, uuids.a1], msg='Cyborg is gone'))
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.swap)
        # Not a rollback (the server goes to ERROR), and both reasons are
        # given: the move's first, then the restore's.
        msg = exc.format_message()
        self.assertIn('boom', msg)
        self.assertIn('restoring the source failed too', msg)
        self.assertIn('Cyborg is gone', msg)
        self.assertLess(msg.index('boom'), msg.index('Cyborg is gone'))
        # Not forgotten: a later revert or cleanup can still find them.
        self.assertEqual(SOURCE_PARKED, self.meta())
        self.calls.power_on.assert_not_called()

    def test_power_on_failing_keeps_the_first_error(self):
        self.cyclient.create_arqs.side_effect = exception.CyborgError(
            op='create', msg='boom')
        self.calls.power_on.side_effect = ValueError('libvirt said no')
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.swap)
        self.assertIn('boom', exc.format_message())
        self.assertIn('libvirt said no', exc.format_message())

    def test_unbind_failure_binds_nothing_twice(self):
        # The unbind fails: the source's ARQs are still Bound; the restore
        # asks Cyborg and binds none of them again.
        self.cyclient.unbind_arqs.side_effect = exception.CyborgError(
            op='unbind', msg='injected 503', status=503)
        exc = self.assertRaises(nova_exception.InstanceFaultRollback,
                                self.swap)
        self.assertIn('injected 503', exc.format_message())
        self.cyclient.bind_arqs.assert_not_called()
        self.cyclient.create_arqs.assert_not_called()
        self.assertEqual({}, self.meta())
        self.calls.power_on.assert_called_once_with(SOURCE)

    def test_partial_unbind_binds_only_the_unbound_again(self):
        def unbind(arq_uuids):
            self.cyclient.get_arqs_for_instance.return_value = SOURCE[1:]
            raise exception.CyborgError(op='unbind', msg='half', status=503)
        self.cyclient.unbind_arqs.side_effect = unbind
        self.assertRaises(nova_exception.InstanceFaultRollback, self.swap)
        self.cyclient.bind_arqs.assert_called_once_with(
            {uuids.a0: PARKED_BINDINGS[uuids.a0]})

    def test_arqs_of_another_host_are_deleted_not_parked(self):
        stale = _arq(uuids.stale, uuids.dest_rp0, 'dest-node')
        self.cyclient.get_arqs_for_instance.return_value = SOURCE + [stale]
        self.swap()
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.stale])
        self.cyclient.unbind_arqs.assert_called_once_with(
            [uuids.a0, uuids.a1])
        self.assertEqual(SOURCE_PARKED, self.meta())

    def test_none_to_profile_failure_does_not_reboot_the_guest(self):
        self.instance.flavor = _flavor()
        self.cyclient.get_arqs_for_instance.return_value = []
        self.cyclient.create_arqs.side_effect = exception.CyborgError(
            op='create', msg='boom')
        exc = self.assertRaises(nova_exception.InstanceFaultRollback,
                                self.swap)
        self.assertIn('boom', exc.format_message())
        self.calls.power_off.assert_not_called()
        self.calls.power_on.assert_not_called()

    def test_get_source_arqs_fails_changes_nothing(self):
        self.cyclient.get_arqs_for_instance.side_effect = (
            exception.CyborgError(op='get', msg='unreachable'))
        self.assertRaises(exception.CyborgError, self.swap)
        self.assertEqual(['cyborg.get_arqs_for_instance'], self.names())


class ConfirmTest(MoveTestBase):

    def test_parked_deleted_and_cleared(self):
        self.instance.system_metadata = dict(SOURCE_PARKED, other='kept')
        move.confirm(self.context, self.instance)
        self.assertEqual(
            [mock.call.cyborg.delete_arqs_strictly([uuids.a0, uuids.a1]),
             mock.call.save()], self.calls.mock_calls)
        self.assertEqual({'other': 'kept'}, self.meta())

    def test_retired_deleted_with_parked(self):
        self.instance.system_metadata = dict(
            SOURCE_PARKED, **{RETIRED + '0': uuids.r0})
        move.confirm(self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.r0, uuids.a0, uuids.a1])
        self.assertEqual({}, self.meta())

    def test_entries_in_numeric_order(self):
        arqs = [getattr(uuids, 'p%d' % i) for i in range(12)]
        self.instance.system_metadata = {
            PARKED + str(i): '%s rp host' % arq for i, arq in enumerate(arqs)}
        move.confirm(self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(arqs)

    def test_cyborg_failing_retires_them(self):
        self.instance.system_metadata = dict(SOURCE_PARKED)
        self.cyclient.delete_arqs_strictly.side_effect = (
            exception.CyborgError(op='delete', msg='unreachable'))
        with mock.patch.object(arq_steps.LOG, 'error') as error:
            self.assertIsNone(move.confirm(self.context, self.instance))
        self.assertEqual({RETIRED + '0': uuids.a0, RETIRED + '1': uuids.a1},
                         self.meta())
        self.save.assert_called_once_with()
        self.assertTrue(error.called)

    def test_nothing_parked(self):
        move.confirm(self.context, self.instance)
        self.get_client.assert_not_called()
        self.save.assert_not_called()


class RevertTest(MoveTestBase):

    def test_at_destination_deletes_nothing(self):
        # The destination's ARQs stay Bound under its guest until the
        # guest is destroyed: the source deletes them (rebind_at_source).
        self.assertTrue(move_revert.revert_at_destination(
            self.context, self.instance, mock.Mock()))
        self.cyclient.get_arqs_for_instance.assert_called_once_with(
            uuids.inst)
        self.cyclient.delete_arqs_for_instance.assert_not_called()
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.cyclient.unbind_arqs.assert_not_called()

    def test_at_destination_from_flavor_without_profile(self):
        # Resized from a flavor with a profile to one without.
        self.instance.flavor = _flavor()
        self.instance.system_metadata = dict(SOURCE_PARKED)
        self.assertTrue(move_revert.revert_at_destination(
            self.context, self.instance))
        self.cyclient.get_arqs_for_instance.assert_called_once_with(
            uuids.inst)
        self.cyclient.delete_arqs_for_instance.assert_not_called()
        self.assertEqual(SOURCE_PARKED, self.meta())

    def test_at_destination_without_accelerators(self):
        self.instance.flavor = _flavor()
        move_revert.revert_at_destination(self.context, self.instance)
        self.get_client.assert_not_called()

    def test_at_destination_cyborg_down_leaves_the_revert_retriable(self):
        self.cyclient.get_arqs_for_instance.side_effect = (
            exception.CyborgError(op='get', msg='unreachable'))
        migration = mock.Mock(status='reverting')
        self.instance.task_state = 'resize_reverting'
        with mock.patch.object(objects.InstanceActionEvent,
                               'event_start') as start, \
                mock.patch.object(objects.InstanceActionEvent,
                                  'event_finish_with_failure') as failed:
            self.assertFalse(move_revert.revert_at_destination(
                self.context, self.instance, migration))
        # Revertable (and confirmable) again: what the API looks for.
        self.assertEqual('finished', migration.status)
        migration.save.assert_called_once_with()
        self.assertIsNone(self.instance.task_state)
        self.save.assert_called_once_with()
        start.assert_called_once_with(self.context, uuids.inst,
                                      move_revert.REVERT_EVENT,
                                      want_result=False,
                                      host=self.instance.host)
        message = failed.call_args[1]['exc_val']
        self.assertIn('unreachable', message)
        self.assertIn('Nothing was changed', message)
        self.cyclient.delete_arqs_for_instance.assert_not_called()

    def test_at_destination_leaves_the_guest_alone(self):
        # A vGPU guest is no longer powered off here: its mdevs go with
        # its ARQs only once the destination destroyed it.
        driver = mock.Mock()
        self.cyclient.get_arqs_for_instance.return_value = [
            {'uuid': uuids.b0, 'attach_handle_type': 'MDEV',
             'hostname': 'dest-node', 'state': 'Bound'}]
        self.assertTrue(move_revert.revert_at_destination(
            self.context, self.instance, mock.Mock(), driver))
        self.assertEqual([], driver.mock_calls)

    def _at_source(self):
        """The instance as _finish_revert_resize() has it: on the source
        again, the destination's ARQs still bound there."""
        self.instance.system_metadata = dict(SOURCE_PARKED, other='kept')
        self.cyclient.get_arqs_for_instance.return_value = [
            dict(NEW[0], state='Bound', hostname='dest-node'),
            dict(NEW[1], state='Bound', hostname='dest-node')]

    def test_rebind_at_source_deletes_the_destination_first(self):
        self._at_source()
        move_revert.rebind_at_source(self.virtapi, self.context, self.instance)
        self.assertEqual([
            mock.call.cyborg.get_arqs_for_instance(uuids.inst),
            mock.call.cyborg.delete_arqs_strictly([uuids.b0, uuids.b1]),
            mock.call.cyborg.bind_arqs(PARKED_BINDINGS),
            mock.call.get_bound_arqs(self.virtapi, self.context,
                                     self.instance, [uuids.a0, uuids.a1]),
            mock.call.save(),
        ], self.calls.mock_calls)
        self.assertEqual({'other': 'kept'}, self.meta())

    def test_rebind_at_source_delete_failure_keeps_parked(self):
        # Cyborg would refuse the bind next to the destination's ARQs:
        # the revert fails, those remembered, the source's still parked.
        self._at_source()
        self.cyclient.delete_arqs_strictly.side_effect = (
            exception.CyborgError(op='delete', msg='unreachable'))
        self.assertRaises(exception.CyborgError, move_revert.rebind_at_source,
                          self.virtapi, self.context, self.instance)
        self.cyclient.bind_arqs.assert_not_called()
        meta = self.meta()
        self.assertEqual(SOURCE_PARKED['%s0' % PARKED], meta[PARKED + '0'])
        self.assertEqual({uuids.b0, uuids.b1},
                         {v for k, v in meta.items()
                          if k.startswith(RETIRED)})

    def test_rebind_at_source_keeps_the_source_bound_ones(self):
        # Nothing of the destination left (deleted by an earlier try):
        # only the parked ARQs are bound.
        self.instance.system_metadata = dict(SOURCE_PARKED)
        self.cyclient.get_arqs_for_instance.return_value = []
        move_revert.rebind_at_source(self.virtapi, self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.cyclient.bind_arqs.assert_called_once_with(PARKED_BINDINGS)

    def test_rebind_at_source_failure_keeps_parked(self):
        self.instance.system_metadata = dict(SOURCE_PARKED)
        self.get_bound.side_effect = nova_exception.InstanceEventTimeout()
        self.assertRaises(nova_exception.InstanceEventTimeout,
                          move_revert.rebind_at_source, self.virtapi,
                          self.context, self.instance)
        self.assertEqual(SOURCE_PARKED, self.meta())

    def test_rebind_at_source_nothing_parked(self):
        move_revert.rebind_at_source(self.virtapi, self.context, self.instance)
        self.cyclient.bind_arqs.assert_not_called()
        self.get_bound.assert_not_called()

    def test_rebind_at_source_without_accelerators(self):
        self.instance.flavor = _flavor()
        move_revert.rebind_at_source(self.virtapi, self.context, self.instance)
        self.get_client.assert_not_called()

    def test_rebind_at_source_same_host_deletes_the_destination(self):
        # allow_resize_to_same_host: the destination's ARQs are bound to
        # the source's host too. They are not parked: they go first, or
        # Cyborg refuses the bind of the parked ones next to them.
        self.instance.system_metadata = dict(SOURCE_PARKED)
        self.cyclient.get_arqs_for_instance.return_value = [
            dict(SOURCE[0], state='Unbound', hostname=None),
            dict(SOURCE[1], state='Unbound', hostname=None),
            dict(NEW[0], state='Bound', hostname='src-host'),
            dict(NEW[1], state='Bound', hostname='src-host')]
        move_revert.rebind_at_source(self.virtapi, self.context, self.instance)
        self.assertEqual([
            mock.call.cyborg.get_arqs_for_instance(uuids.inst),
            mock.call.cyborg.delete_arqs_strictly([uuids.b0, uuids.b1]),
            mock.call.cyborg.bind_arqs(PARKED_BINDINGS),
            mock.call.get_bound_arqs(self.virtapi, self.context,
                                     self.instance, [uuids.a0, uuids.a1]),
            mock.call.save(),
        ], self.calls.mock_calls)

    def test_rebind_at_source_run_again_keeps_the_source(self):
        # A second run after the parked ARQs were bound again: nothing is
        # parked, the flavor has its profile: the ARQs on this host are
        # the source's own and stay.
        self.cyclient.get_arqs_for_instance.return_value = SOURCE
        move_revert.rebind_at_source(self.virtapi, self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.cyclient.bind_arqs.assert_not_called()

    def test_rebind_at_source_same_host_from_a_flavor_without_profile(self):
        # The source had no accelerator, nothing parked: every ARQ is the
        # destination's, even bound to this host.
        self.instance.flavor = _flavor()
        self.instance.new_flavor = _flavor('dp-new')
        self.cyclient.get_arqs_for_instance.return_value = [
            dict(NEW[0], state='Bound', hostname='src-host')]
        move_revert.rebind_at_source(self.virtapi, self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.b0])
        self.cyclient.bind_arqs.assert_not_called()


class UndoSwapTest(MoveTestBase):
    """The resize failed on the source after the swap (the disk copy)."""

    def setUp(self):
        super().setUp()
        self.migration = objects.Migration(
            source_compute='src-host', source_node='src-host',
            dest_compute='dest-host', dest_node='dest-node')
        self.instance.system_metadata = dict(SOURCE_PARKED)
        self.instance.new_flavor = _flavor('dp-new')
        self.dest = [_arq(uuids.b0, uuids.dest_rp0, 'dest-node'),
                     _arq(uuids.b1, uuids.dest_rp1, 'dest-node')]
        self.cyclient.get_arqs_for_instance.return_value = self.dest

    def test_destination_deleted_source_bound_again(self):
        move.undo_swap(self.virtapi, self.context, self.instance,
                       self.migration)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.b0, uuids.b1])
        self.cyclient.bind_arqs.assert_called_once_with(PARKED_BINDINGS)
        names = self.names()
        self.assertLess(names.index('cyborg.delete_arqs_strictly'),
                        names.index('cyborg.bind_arqs'))
        self.assertEqual({}, self.meta())

    def test_swap_already_undone(self):
        # swap_to_destination rolled back itself: nothing parked, nothing
        # on the destination.
        self.instance.system_metadata = {}
        self.cyclient.get_arqs_for_instance.return_value = SOURCE
        move.undo_swap(self.virtapi, self.context, self.instance,
                       self.migration)
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.cyclient.bind_arqs.assert_not_called()

    def test_no_accelerators_asks_nobody(self):
        self.instance.system_metadata = {}
        self.instance.flavor = _flavor()
        self.instance.new_flavor = _flavor()
        move.undo_swap(self.virtapi, self.context, self.instance,
                       self.migration)
        self.get_client.assert_not_called()

    def test_cyborg_failing_is_logged_not_raised(self):
        self.cyclient.bind_arqs.side_effect = (
            exception.AcceleratorRequestBindingFailed(arqs=[], msg='gone'))
        with mock.patch.object(move.LOG, 'error') as error:
            move.undo_swap(self.virtapi, self.context, self.instance,
                           self.migration)
        self.assertIn('gone', str(error.call_args))
        # Still remembered for a later cleanup.
        self.assertEqual(SOURCE_PARKED, self.meta())

    def test_same_host_destination_deleted_source_bound_again(self):
        self.cyclient.get_arqs_for_instance.return_value = [
            dict(SOURCE[0], state='Unbound', hostname=None),
            dict(SOURCE[1], state='Unbound', hostname=None),
            _arq(uuids.b0, uuids.dest_rp0, 'src-host'),
            _arq(uuids.b1, uuids.dest_rp1, 'src-host')]
        move.undo_swap(self.virtapi, self.context, self.instance,
                       self.migration)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.b0, uuids.b1])
        self.cyclient.bind_arqs.assert_called_once_with(PARKED_BINDINGS)
        self.assertEqual({}, self.meta())
