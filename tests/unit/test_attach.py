"""The attach record of nova_cyborg.flows.attach.compute (what recovery rolls
back)."""

from unittest import mock

import fixtures
from nova.compute import vm_states
from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.clients import cyborg as client
from nova_cyborg import exception
from nova_cyborg.flows.attach import compute as attach
from nova_cyborg.model import bookkeeping

KEY = 'nova_cyborg_attaching'


class _AttachTestBase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.cyclient = mock.create_autospec(client.CyborgClient,
                                             instance=True)
        self.cyclient.get_arqs_for_instance.return_value = []
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_client',
            return_value=self.cyclient))
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_device_profile_request_groups',
            return_value=[mock.Mock(resources={'FPGA': 1})]))
        self.useFixture(fixtures.MockPatch(
            'nova.objects.ComputeNode.get_by_host_and_nodename',
            return_value=mock.Mock(uuid=uuids.cn)))
        self.instance = objects.Instance(
            uuid=uuids.inst, vm_state=vm_states.STOPPED, host='host',
            node='host', system_metadata={})
        self.saved = []
        self.useFixture(fixtures.MockPatchObject(
            self.instance, 'save', side_effect=lambda **kw: self.saved.append(
                dict(self.instance.system_metadata))))
        self.add = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.allocations.add')).mock
        self.manager = mock.Mock()


class AttachingRecordTest(_AttachTestBase):

    def test_record_is_saved_before_the_allocation_changes(self):
        def add(*args):
            self.assertEqual({KEY: '1 dp'}, self.saved[-1])
            raise exception.AcceleratorAttachFailed(reason='no device')
        self.add.side_effect = add
        self.assertRaises(exception.AcceleratorAttachFailed, attach._add,
                          self.manager, self.context, self.instance, 'dp')
        self.add.assert_called_once()
        # Nothing changed in the allocation: the record goes.
        self.assertEqual({}, self.saved[-1])

    def test_record_goes_with_the_attach_recorded(self):
        self.add.return_value = (
            {uuids.rp: {'resources': {'FPGA': 1}}}, {'g0': [uuids.rp]})
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.flows.attach.compute._bind', return_value=[]))
        attach._add(self.manager, self.context, self.instance, 'dp')
        # The stopped guest's definition gets the device: the virt
        # driver's interface is asked, not its internals.
        self.manager.driver.attach_accelerators.assert_called_once_with(
            self.context, self.instance, [])
        self.assertEqual([], self.manager.driver._host.mock_calls)
        # Cleared in the same save that records the allocation added.
        self.assertEqual({attach.ALLOC_PREFIX + '0': 'dp %s FPGA 1' % (
            uuids.rp)}, self.saved[-1])

    def test_a_driver_without_the_methods_fails_the_attach(self):
        self.add.return_value = (
            {uuids.rp: {'resources': {'FPGA': 1}}}, {'g0': [uuids.rp]})
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.flows.attach.compute._bind', return_value=[]))
        self.useFixture(fixtures.MockPatch('nova_cyborg.steps.arqs.retire'))
        remove = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.allocations.remove')).mock
        self.manager.driver.attach_accelerators.side_effect = (
            NotImplementedError())
        exc = self.assertRaises(exception.AcceleratorAttachFailed,
                                attach._add, self.manager, self.context,
                                self.instance, 'dp')
        self.assertIn('virt driver cannot attach', str(exc))
        # Everything is put back.
        remove.assert_called_once()
        self.assertEqual({}, self.saved[-1])

    def test_failed_attach_clears_the_record(self):
        self.add.return_value = (
            {uuids.rp: {'resources': {'FPGA': 1}}}, {'g0': [uuids.rp]})
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.flows.attach.compute._bind',
            side_effect=exception.CyborgError(op='create', msg='injected',
                                              status=503)))
        remove = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.allocations.remove')).mock
        self.useFixture(fixtures.MockPatch('nova_cyborg.steps.arqs.retire'))
        self.assertRaises(exception.AcceleratorAttachFailed, attach._add,
                          self.manager, self.context, self.instance, 'dp')
        remove.assert_called_once()
        self.assertEqual({}, self.saved[-1])

    def test_unknown_version_is_refused(self):
        self.instance.system_metadata[KEY] = '2 dp'
        self.assertRaises(ValueError, attach.attaching, self.instance)
        attach.mark_attaching(self.instance, 'my profile')
        self.assertEqual('my profile', attach.attaching(self.instance))


class CyborgDownDuringColdPlugTest(_AttachTestBase):
    """A stopped server with accelerators gets profile B; Cyborg goes
    down right after its own ARQ was parked (unbound): the bind fails and
    so does every Cyborg call of the roll back."""

    def setUp(self):
        super().setUp()
        self.add.return_value = (
            {uuids.rp_b: {'resources': {'FPGA': 1}}}, {'g0': [uuids.rp_b]})
        self.instance.system_metadata = {}
        self.cyclient.get_arqs_for_instance.return_value = [
            {'uuid': uuids.flavor_arq, 'state': 'Bound'}]
        self.cyclient.create_arqs.return_value = [
            {'uuid': uuids.new_arq, 'device_profile_group_id': 0}]
        self.cyclient.get_arq_device_rp_uuid.return_value = uuids.rp_b
        down = exception.CyborgError(op='bind', msg='503', status=503)

        def park(context, instance, existing):
            bookkeeping.store(instance, bookkeeping.PARKED_PREFIX,
                              ['%s %s host' % (uuids.flavor_arq, uuids.rp_a)])
            self.cyclient.get_arqs_for_instance.side_effect = down
            self.cyclient.delete_arqs_strictly.side_effect = down
        self.useFixture(fixtures.MockPatch('nova_cyborg.steps.arqs.park',
                                           side_effect=park))
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.steps.arqs.bind_and_wait', side_effect=down))
        self.remove = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.allocations.remove')).mock

    def test_allocation_put_back_records_cleared_parked_kept(self):
        exc = self.assertRaises(exception.AcceleratorAttachFailed,
                                attach._add, self.manager, self.context,
                                self.instance, 'dp-b')
        self.assertIn('not put back', exc.format_message())
        self.assertIn('binding the parked', exc.format_message())
        # The allocation loses what the attach added.
        self.remove.assert_called_once_with(
            self.manager.reportclient, self.context, self.instance,
            {uuids.rp_b: {'resources': {'FPGA': 1}}})
        meta = self.saved[-1]
        # No attach, attaching or allocation record of B; its ARQ is
        # retired (Cyborg could not delete it); the flavor's ARQ stays
        # parked for the next start to bind.
        self.assertNotIn(KEY, meta)
        self.assertEqual(
            {'nova_cyborg_parked_arq_0':
                '%s %s host' % (uuids.flavor_arq, uuids.rp_a),
             'nova_cyborg_retired_arq_0': uuids.new_arq}, meta)

    def test_record_kept_when_placement_fails_too(self):
        self.remove.side_effect = exception.AcceleratorAttachFailed(
            reason='Placement unreachable')
        exc = self.assertRaises(exception.AcceleratorAttachFailed,
                                attach._add, self.manager, self.context,
                                self.instance, 'dp-b')
        self.assertIn('allocation', exc.format_message())
        # Restart rolls it back: the attach record stays.
        self.assertEqual('1 dp-b', self.saved[-1][KEY])
