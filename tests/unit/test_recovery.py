"""A compute restarted in the middle of a move:
nova_cyborg.flows.move.recovery."""

from unittest import mock

import fixtures
from nova.compute import vm_states
from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.clients import cyborg as client
from nova_cyborg import exception
from nova_cyborg.flows.attach import compute as nc_attach
from nova_cyborg.flows.attach import recovery as attach_recovery
from nova_cyborg.flows.move import recovery
from nova_cyborg.model import actions
from nova_cyborg.model import bookkeeping
from nova_cyborg.steps import arqs as arq_steps

DP = 'accel:device_profile'
PARKED = bookkeeping.PARKED_PREFIX


def _arq(uuid, state='Bound', host='src-host', rp=uuids.src_rp):
    return {'uuid': uuid, 'state': state, 'hostname': host,
            'device_rp_uuid': rp, 'instance_uuid': uuids.inst}


class _Clock(object):
    """A clock that moves only when the code sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class RecoveryTestBase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(arq_binding_timeout=10)
        self.context = nova_context.get_admin_context()
        self.cyclient = mock.create_autospec(client.CyborgClient,
                                             instance=True)
        self.get_client = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_client',
            return_value=self.cyclient)).mock
        self.check_bound = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.steps.bound_arqs.check_bound',
            side_effect=lambda arqs, uuids_: [
                a for a in arqs if a['uuid'] in uuids_])).mock
        self.function_check = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.steps.function_check.check')).mock
        self.instance = objects.Instance(
            uuid=uuids.inst, vm_state=vm_states.ACTIVE, host='src-host',
            node='src-host', project_id='owner',
            flavor=objects.Flavor(extra_specs={DP: 'dp'}), old_flavor=None,
            new_flavor=objects.Flavor(extra_specs={DP: 'dp'}),
            system_metadata={
                PARKED + '0': '%s %s src-host' % (uuids.a0, uuids.src_rp)})
        self.save = self.useFixture(fixtures.MockPatchObject(
            self.instance, 'save')).mock
        self.clock = _Clock()


class BindAndPollTest(RecoveryTestBase):

    def _poll(self, bindings):
        return arq_steps.bind_and_poll(
            self.context, self.instance, bindings, clock=self.clock,
            sleep=self.clock.sleep)

    def test_reads_until_bound_in_the_instance_project(self):
        self.cyclient.get_arqs_for_instance.side_effect = [
            [_arq(uuids.a0, 'BindStarted')], [_arq(uuids.a0, 'BindStarted')],
            [_arq(uuids.a0)]]
        arqs = self._poll({uuids.a0: (uuids.src_rp, 'src-host')})
        self.assertEqual([_arq(uuids.a0)], arqs)
        self.get_client.assert_any_call(self.context, instance=self.instance)
        self.cyclient.bind_arqs.assert_called_once_with({uuids.a0: {
            'hostname': 'src-host', 'device_rp_uuid': uuids.src_rp,
            'instance_uuid': uuids.inst}})
        self.assertEqual([0.1, 0.2], self.clock.sleeps)
        self.function_check.assert_called_once_with(
            self.context, self.instance, arqs)

    def test_gives_up_at_the_deadline(self):
        self.check_bound.side_effect = exception.AcceleratorRequestNotBound(
            arq=uuids.a0, state='BindStarted')
        self.cyclient.get_arqs_for_instance.return_value = [
            _arq(uuids.a0, 'BindStarted')]
        self.assertRaises(exception.AcceleratorRequestNotBound, self._poll,
                          {uuids.a0: (uuids.src_rp, 'src-host')})
        self.assertLessEqual(self.clock.now, 10 + arq_steps.POLL_MAX)
        self.assertEqual(arq_steps.POLL_MAX, max(self.clock.sleeps))
        self.function_check.assert_not_called()


class RebindSourceTest(RecoveryTestBase):

    def setUp(self):
        super().setUp()
        self.migration = objects.Migration(
            source_compute='src-host', source_node='src-host',
            dest_compute='dest-host', dest_node='dest-host')
        self.poll = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.steps.arqs.bind_and_poll')).mock

    def test_destination_goes_parked_come_back(self):
        self.cyclient.get_arqs_for_instance.return_value = [
            _arq(uuids.b0, host='dest-host', rp=uuids.dest_rp)]
        recovery.rebind_source(self.context, self.instance, self.migration)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.b0])
        self.poll.assert_called_once_with(
            self.context, self.instance,
            {uuids.a0: (uuids.src_rp, 'src-host')})
        self.assertEqual([], bookkeeping.parked(self.instance))

    def test_still_bound_on_the_source_is_not_bound_twice(self):
        # The compute died before the unbind of the parked ARQ went out.
        self.cyclient.get_arqs_for_instance.return_value = [_arq(uuids.a0)]
        recovery.rebind_source(self.context, self.instance, self.migration)
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.poll.assert_not_called()
        self.assertEqual([], bookkeeping.parked(self.instance))

    def test_same_host_destination_goes_parked_come_back(self):
        # A resize to the same host: the destination's ARQ is bound to the
        # source's host too; it is not parked, so it is the destination's.
        self.cyclient.get_arqs_for_instance.return_value = [
            _arq(uuids.b0, host='src-host', rp=uuids.dest_rp)]
        recovery.rebind_source(self.context, self.instance, self.migration)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.b0])
        self.poll.assert_called_once_with(
            self.context, self.instance,
            {uuids.a0: (uuids.src_rp, 'src-host')})

    def test_bind_failure_keeps_the_parked_entries(self):
        self.cyclient.get_arqs_for_instance.return_value = []
        self.poll.side_effect = exception.CyborgError(
            op='bind', msg='injected', status=503)
        self.assertRaises(exception.CyborgError, recovery.rebind_source,
                          self.context, self.instance, self.migration)
        self.assertEqual([(uuids.a0, uuids.src_rp, 'src-host')],
                         bookkeeping.parked(self.instance))


class ResizeMigratingTest(RecoveryTestBase):

    def setUp(self):
        super().setUp()
        self.manager = mock.Mock()
        self.migration = mock.Mock(spec=objects.Migration,
                                   source_compute='src-host',
                                   source_node='src-host', status='migrating')
        self.rebind = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.flows.move.recovery.rebind_source')).mock
        self.manager.attach_mock(self.rebind, 'rebind_source')
        self.manager.attach_mock(self.migration.save, 'migration_save')

    def test_allocation_then_arqs_then_migration(self):
        recovery.resize_migrating(self.manager, self.context, self.instance,
                                  self.migration)
        self.assertEqual([
            mock.call._revert_allocation(self.context, self.instance,
                                         self.migration),
            mock.call.rebind_source(self.context, self.instance,
                                    self.migration),
            mock.call.migration_save()], self.manager.mock_calls)
        self.assertEqual('error', self.migration.status)
        # What upstream's libvirt finish_revert_migration reads.
        self.assertEqual(self.instance.flavor, self.instance.old_flavor)

    def test_server_without_accelerators_is_left_to_upstream(self):
        self.instance.flavor = objects.Flavor(extra_specs={})
        self.instance.new_flavor = objects.Flavor(extra_specs={})
        self.instance.system_metadata = {}
        recovery.resize_migrating(self.manager, self.context, self.instance,
                                  self.migration)
        self.assertEqual([], self.manager.mock_calls)
        self.assertIsNone(self.instance.old_flavor)
        self.assertEqual('migrating', self.migration.status)

    def test_resize_to_a_profile_is_recovered(self):
        self.instance.flavor = objects.Flavor(extra_specs={})
        self.instance.system_metadata = {}
        recovery.resize_migrating(self.manager, self.context, self.instance,
                                  self.migration)
        self.rebind.assert_called_once_with(self.context, self.instance,
                                            self.migration)


ATTACHED = bookkeeping.ATTACHED_PREFIX
ALLOC = 'nova_cyborg_attached_alloc_'
ATTACHING = 'nova_cyborg_attaching'


class AcceleratorActionInterruptedTest(RecoveryTestBase):
    """A restart in the task state of addAccelerator / removeAccelerator.
    """

    def setUp(self):
        super().setUp()
        self.assertEqual(ALLOC, actions.ALLOC_PREFIX)
        self.assertEqual(ATTACHING, nc_attach.ATTACHING_KEY)
        self.manager = mock.Mock()
        self.allocs = self.manager.reportclient.get_allocs_for_consumer
        self.remove = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.allocations.remove')).mock
        self.retire = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.steps.arqs.retire')).mock
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_device_profile_request_groups',
            return_value=[mock.Mock(resources={'FPGA': 1})]))
        self.instance.system_metadata = {
            ATTACHED + '0': '%s dp' % uuids.a1}

    def _run(self, task_state):
        self.instance.task_state = task_state
        attach_recovery.accelerator_action_interrupted(
            self.manager, self.context, self.instance)

    def test_other_task_states_are_left_alone(self):
        self._run(None)
        self._run('resize_migrating')
        self.save.assert_not_called()
        self.retire.assert_not_called()
        self.assertEqual('resize_migrating', self.instance.task_state)

    def test_attach_without_recorded_allocation_is_rolled_back(self):
        self.cyclient.get_arqs_for_instance.return_value = []
        self.allocs.return_value = {'allocations': {
            uuids.dev_rp: {'resources': {'FPGA': 1}},
            uuids.cn: {'resources': {'VCPU': 2}}}}
        self._run(actions.ADDING)
        self.retire.assert_called_once_with(self.context, self.instance,
                                            [uuids.a1])
        self.remove.assert_called_once_with(
            self.manager.reportclient, self.context, self.instance,
            {uuids.dev_rp: {'resources': {'FPGA': 1}}})
        self.assertEqual({}, self.instance.system_metadata)
        self.assertIsNone(self.instance.task_state)
        self.save.assert_called()

    def test_attach_before_its_arqs_is_rolled_back_from_its_record(self):
        # Stopped after the allocation changed, before any ARQ recorded:
        # only the attach record names the profile.
        self.instance.system_metadata = {ATTACHING: '1 dp'}
        self.cyclient.get_arqs_for_instance.return_value = []
        self.allocs.return_value = {'allocations': {
            uuids.dev_rp: {'resources': {'FPGA': 1}}}}
        self._run(actions.ADDING)
        self.retire.assert_called_once_with(self.context, self.instance, [])
        self.remove.assert_called_once_with(
            self.manager.reportclient, self.context, self.instance,
            {uuids.dev_rp: {'resources': {'FPGA': 1}}})
        self.assertEqual({}, self.instance.system_metadata)
        self.assertIsNone(self.instance.task_state)

    def test_attach_record_of_unknown_version_is_ignored(self):
        self.instance.system_metadata = {ATTACHING: '2 dp'}
        self.cyclient.get_arqs_for_instance.return_value = []
        self.allocs.return_value = {'allocations': {
            uuids.dev_rp: {'resources': {'FPGA': 1}}}}
        self._run(actions.ADDING)
        self.remove.assert_not_called()
        self.assertEqual({}, self.instance.system_metadata)
        self.assertIsNone(self.instance.task_state)

    def test_attach_with_recorded_allocation_is_kept(self):
        self.instance.system_metadata[ALLOC + '0'] = 'dp %s FPGA 1' % (
            uuids.dev_rp)
        arq = _arq(uuids.a1, rp=uuids.dev_rp)
        arq.update(device_profile_name='dp', device_profile_group_id=0)
        self.cyclient.get_arqs_for_instance.return_value = [arq]
        self.cyclient.get_device_profile_groups.return_value = [
            {'resources:FPGA': '1'}]
        self.allocs.return_value = {'allocations': {
            uuids.dev_rp: {'resources': {'FPGA': 1}}}}
        self._run(actions.ADDING)
        self.retire.assert_called_once_with(self.context, self.instance, [])
        self.remove.assert_not_called()
        self.assertEqual(2, len(self.instance.system_metadata))
        self.assertIsNone(self.instance.task_state)

    def test_detach_with_arqs_gone_is_completed(self):
        self.instance.system_metadata[ALLOC + '0'] = 'dp %s FPGA 1' % (
            uuids.dev_rp)
        self.cyclient.get_arqs_for_instance.return_value = []
        self.allocs.return_value = {'allocations': {
            uuids.dev_rp: {'resources': {'FPGA': 1}}}}
        self._run(actions.REMOVING)
        self.remove.assert_called_once_with(
            self.manager.reportclient, self.context, self.instance,
            {uuids.dev_rp: {'resources': {'FPGA': 1}}})
        self.assertEqual({}, self.instance.system_metadata)
        self.assertIsNone(self.instance.task_state)

    def test_detach_whose_allocation_went_already_removes_nothing(self):
        self.instance.system_metadata[ALLOC + '0'] = 'dp %s FPGA 1' % (
            uuids.dev_rp)
        self.cyclient.get_arqs_for_instance.return_value = []
        self.allocs.return_value = {'allocations': {
            uuids.cn: {'resources': {'VCPU': 2}}}}
        self._run(actions.REMOVING)
        self.remove.assert_not_called()
        self.assertEqual({}, self.instance.system_metadata)

    def test_detach_that_deleted_nothing_is_left_undone(self):
        self.cyclient.get_arqs_for_instance.return_value = [_arq(uuids.a1)]
        self._run(actions.REMOVING)
        self.remove.assert_not_called()
        self.assertEqual({ATTACHED + '0': '%s dp' % uuids.a1},
                         self.instance.system_metadata)
        self.assertIsNone(self.instance.task_state)

    def test_failure_is_logged_and_the_task_state_cleared(self):
        self.cyclient.get_arqs_for_instance.side_effect = (
            exception.CyborgError(op='list', msg='injected', status=503))
        self._run(actions.REMOVING)
        self.assertIsNone(self.instance.task_state)
        self.save.assert_called()


class ParkedHereTest(RecoveryTestBase):
    """A revert whose re-bind at the source failed: the next hard reboot,
    power on or rebuild on that host binds the parked ARQs again."""

    def setUp(self):
        super().setUp()
        self.instance.vm_state = vm_states.ERROR
        self.poll = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.steps.arqs.bind_and_poll')).mock

    def test_binds_the_parked_arqs_on_their_host_and_forgets_them(self):
        self.cyclient.get_arqs_for_instance.return_value = []
        recovery.parked_here(self.context, self.instance)
        self.poll.assert_called_once_with(
            self.context, self.instance,
            {uuids.a0: (uuids.src_rp, 'src-host')})
        self.assertEqual([], bookkeeping.parked(self.instance))
        self.save.assert_called_once_with()

    def test_an_arq_still_bound_is_not_bound_twice(self):
        self.cyclient.get_arqs_for_instance.return_value = [_arq(uuids.a0)]
        recovery.parked_here(self.context, self.instance)
        self.poll.assert_not_called()
        self.assertEqual([], bookkeeping.parked(self.instance))

    def test_bind_failure_keeps_them_parked(self):
        self.cyclient.get_arqs_for_instance.return_value = []
        self.poll.side_effect = exception.CyborgError(
            op='bind', msg='down', status=503)
        self.assertRaises(exception.CyborgError, recovery.parked_here,
                          self.context, self.instance)
        self.assertEqual([(uuids.a0, uuids.src_rp, 'src-host')],
                         bookkeeping.parked(self.instance))
        self.save.assert_not_called()

    def test_nothing_in_verify_resize(self):
        # Parked on the source while the guest runs on the destination.
        self.instance.vm_state = vm_states.RESIZED
        recovery.parked_here(self.context, self.instance)
        self.cyclient.get_arqs_for_instance.assert_not_called()
        self.poll.assert_not_called()

    def test_nothing_for_arqs_parked_on_another_host(self):
        self.instance.host = self.instance.node = 'dest-host'
        recovery.parked_here(self.context, self.instance)
        self.poll.assert_not_called()
        self.assertEqual(1, len(bookkeeping.parked(self.instance)))

    def test_nothing_without_parked_arqs(self):
        bookkeeping.store(self.instance, PARKED, [])
        recovery.parked_here(self.context, self.instance)
        self.cyclient.get_arqs_for_instance.assert_not_called()
