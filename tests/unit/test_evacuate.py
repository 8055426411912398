"""An evacuated server takes what was attached with addAccelerator along
(the conductor, :func:`attached_bindings`), or loses it, and is told so."""

from unittest import mock

import fixtures
from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.clients import cyborg as client
from nova_cyborg import exception
from nova_cyborg.model import bookkeeping
from nova_cyborg.steps import evacuation as evacuate

ATTACHED = bookkeeping.ATTACHED_PREFIX
ALLOC = 'nova_cyborg_attached_alloc_'


class DropAttachedTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.cyclient = mock.create_autospec(client.CyborgClient,
                                             instance=True)
        self.get_client = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_client',
            return_value=self.cyclient)).mock
        self.start = self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_start')).mock
        self.finish = self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_finish_with_failure')).mock
        self.instance = objects.Instance(
            uuid=uuids.inst, host='compute2', node='compute2',
            system_metadata={
                ATTACHED + '0': '%s dp-a' % uuids.a0,
                ATTACHED + '1': '%s dp-b' % uuids.a1,
                ALLOC + '0': 'dp-a %s FPGA 1' % uuids.rp,
                'other': 'kept'})
        self.useFixture(fixtures.MockPatchObject(self.instance, 'save'))
        # None of them is bound to the instance any more.
        self.cyclient.get_arqs_for_instance.return_value = [
            {'uuid': uuids.flavor_arq, 'hostname': 'compute2'}]

    def test_deleted_forgotten_and_said(self):
        evacuate.drop_attached(self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.a0, uuids.a1])
        self.assertEqual({'other': 'kept'}, self.instance.system_metadata)
        self.start.assert_called_once_with(
            self.context, uuids.inst, evacuate.EVENT, want_result=False,
            host='compute2')
        message = self.finish.call_args[1]['exc_val']
        self.assertIn('dp-a, dp-b', message)
        self.assertIn('not carried over', message)
        self.assertIsNotNone(self.finish.call_args[1]['exc_tb'])

    def test_cyborg_failing_retires_them(self):
        self.cyclient.delete_arqs_strictly.side_effect = (
            exception.CyborgError(op='delete', msg='down', status=503))
        evacuate.drop_attached(self.context, self.instance)
        self.assertEqual([uuids.a0, uuids.a1],
                         bookkeeping.entries(self.instance,
                                             bookkeeping.RETIRED_PREFIX))
        self.assertEqual([], bookkeeping.entries(self.instance, ATTACHED))
        self.assertTrue(self.finish.called)

    def test_what_was_carried_over_stays(self):
        self.cyclient.get_arqs_for_instance.return_value = [
            {'uuid': uuids.a0, 'hostname': 'compute2'}]
        evacuate.drop_attached(self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.a1])
        self.assertEqual({ATTACHED + '0': '%s dp-a' % uuids.a0,
                          ALLOC + '0': 'dp-a %s FPGA 1' % uuids.rp,
                          'other': 'kept'}, self.instance.system_metadata)
        self.assertIn('dp-b', self.finish.call_args[1]['exc_val'])

    def test_all_carried_over_is_quiet(self):
        self.cyclient.get_arqs_for_instance.return_value = [
            {'uuid': uuids.a0, 'hostname': 'compute2'},
            {'uuid': uuids.a1, 'hostname': 'compute2'}]
        evacuate.drop_attached(self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.start.assert_not_called()

    def test_nothing_attached_asks_nobody(self):
        self.instance.system_metadata = {'other': 'kept'}
        evacuate.drop_attached(self.context, self.instance)
        self.get_client.assert_not_called()
        self.start.assert_not_called()

    def test_event_failure_does_not_raise(self):
        self.start.side_effect = ValueError('no action')
        evacuate.drop_attached(self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.a0, uuids.a1])


class AttachedBindingsTest(test.NoDBTestCase):
    """The conductor carries what was attached over to the new host."""

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.cyclient = mock.create_autospec(client.CyborgClient,
                                             instance=True)
        self.cyclient.create_arqs.side_effect = lambda dp: [
            {'uuid': getattr(uuids, 'new-' + dp)}]
        self.cyclient.get_arq_device_rp_uuid.return_value = uuids.new_rp
        self.add = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.allocations.add')).mock
        self.add.return_value = (
            {uuids.new_rp: {'resources': {'FPGA': 1}}}, {'g': [uuids.new_rp]})
        self.groups = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_device_profile_request_groups')
        ).mock
        self.useFixture(fixtures.MockPatch(
            'nova.scheduler.client.report.report_client_singleton'))
        self.useFixture(fixtures.MockPatch(
            'nova.objects.ComputeNode.get_by_nodename',
            return_value=objects.ComputeNode(uuid=uuids.node2)))
        self.start = self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_start')).mock
        self.finish = self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_finish_with_failure')).mock
        self.instance = objects.Instance(
            uuid=uuids.inst, host='compute1', node='compute1',
            system_metadata={
                ATTACHED + '0': '%s dp-a' % uuids.a0,
                ATTACHED + '1': '%s dp-b' % uuids.a1,
                ALLOC + '0': 'dp-a %s FPGA 1' % uuids.rp,
                ALLOC + '1': 'dp-b %s FPGA 1' % uuids.rp,
                'other': 'kept'})
        self.save = self.useFixture(fixtures.MockPatchObject(
            self.instance, 'save')).mock

    def call(self, hostname='compute2'):
        self.created = []
        return evacuate.attached_bindings(self.context, self.instance,
                                          hostname, self.cyclient,
                                          self.created)

    def test_carried_over_with_their_allocation(self):
        bindings = self.call()
        self.assertEqual({
            getattr(uuids, 'new-' + dp): {
                'hostname': 'compute2', 'instance_uuid': uuids.inst,
                'device_rp_uuid': uuids.new_rp} for dp in ('dp-a', 'dp-b')},
            bindings)
        self.assertEqual(sorted(bindings), sorted(self.created))
        # Allocated in the new host's tree.
        self.assertEqual([uuids.node2, uuids.node2],
                         [c[0][4] for c in self.add.call_args_list])
        self.assertEqual(['%s dp-a' % getattr(uuids, 'new-dp-a'),
                          '%s dp-b' % getattr(uuids, 'new-dp-b')],
                         bookkeeping.entries(self.instance, ATTACHED))
        self.assertEqual(['dp-a %s FPGA 1' % uuids.new_rp,
                          'dp-b %s FPGA 1' % uuids.new_rp],
                         bookkeeping.entries(self.instance, ALLOC))
        self.save.assert_called_once_with()
        self.start.assert_not_called()

    def test_no_device_there_drops_it_and_says_why(self):
        self.add.side_effect = [
            exception.AcceleratorAttachFailed(reason='no free device'),
            self.add.return_value]
        bindings = self.call()
        self.assertEqual([getattr(uuids, 'new-dp-b')], list(bindings))
        self.assertEqual(['%s dp-b' % getattr(uuids, 'new-dp-b')],
                         bookkeeping.entries(self.instance, ATTACHED))
        self.assertEqual(['dp-b %s FPGA 1' % uuids.new_rp],
                         bookkeeping.entries(self.instance, ALLOC))
        message = self.finish.call_args[1]['exc_val']
        self.assertIn('dp-a (', message)
        self.assertIn('no free device', message)
        self.assertNotIn('dp-b', message)

    def test_not_an_evacuation_does_nothing(self):
        self.assertEqual({}, self.call(hostname='compute1'))
        self.instance.host = None
        self.assertEqual({}, self.call())
        self.add.assert_not_called()
        self.cyclient.create_arqs.assert_not_called()

    def test_cyborg_failing_to_create_raises(self):
        self.cyclient.create_arqs.side_effect = exception.CyborgError(
            op='create', msg='down', status=503)
        self.assertRaises(exception.CyborgError, self.call)
        self.save.assert_not_called()
