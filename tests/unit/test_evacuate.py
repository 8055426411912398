"""An evacuated server loses what was attached with addAccelerator."""

from unittest import mock

import fixtures
from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import client
from nova_cyborg import evacuate
from nova_cyborg import exception
from nova_cyborg import move

ATTACHED = move.ATTACHED_PREFIX
ALLOC = 'nova_cyborg_attached_alloc_'


class DropAttachedTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.cyclient = mock.create_autospec(client.CyborgClient,
                                             instance=True)
        self.get_client = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.client.get_client',
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
                         move.entries(self.instance, move.RETIRED_PREFIX))
        self.assertEqual([], move.entries(self.instance, ATTACHED))
        self.assertTrue(self.finish.called)

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
