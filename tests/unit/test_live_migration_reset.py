"""The source's nova-compute restarted in the middle of a live migration."""

from unittest import mock

from nova.compute import power_state
from nova.compute import vm_states
from nova import exception as nova_exception
from nova.virt import hardware
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import exception
from nova_cyborg.flows.live_migration import conductor as lm
from nova_cyborg.flows.live_migration import reset as lmr
from nova_cyborg.model import bookkeeping
from tests.unit import test_live_migration as base

ALIAS = base.ALIAS
MIGRATION = base.objects.Migration(uuid=uuids.mig, dest_node='dest-node',
                                   dest_compute='dest-host')


class ResetTest(base.Base):

    def setUp(self):
        super().setUp()
        self.arqs[uuids.inst] = [base._arq(uuids.a0, bdf='0000:81:00.1')]
        self.arqs[ALIAS] = [base._arq(uuids.b0, 'dest', bdf='0000:81:00.3',
                                      owner=ALIAS)]
        lm.record(self.instance, [uuids.b0])
        self.save.reset_mock()
        self.manager = mock.Mock(host='src-host')
        self.guest(power_state.RUNNING)
        fault = mock.patch('nova.compute.utils.add_instance_fault_from_exc')
        self.fault = fault.start()
        self.addCleanup(fault.stop)

    def guest(self, state=None, error=None):
        if state is None:
            self.manager.driver.get_info.side_effect = (
                error or nova_exception.InstanceNotFound(
                    instance_id=uuids.inst))
        else:
            self.manager.driver.get_info.return_value = (
                hardware.InstanceInfo(state=state))

    def assert_error(self, cls, *words):
        fault = self.fault.call_args[0][2]
        self.assertIsInstance(fault, cls)
        for word in words:
            self.assertIn(word, fault.format_message())
        self.assertEqual(vm_states.ERROR, self.instance.vm_state)
        self.manager._revert_allocation.assert_not_called()

    def test_guest_here_rolls_back(self):
        for state in (power_state.RUNNING, power_state.PAUSED):
            self.manager.reset_mock()
            self.cyclient.delete_arqs_by_uuid.reset_mock()
            self.manager._revert_allocation.side_effect = (
                lambda *a: self.cyclient.delete_arqs_by_uuid.
                assert_not_called())
            self.guest(state)
            lmr.reset(self.manager, self.context, self.instance, MIGRATION)
            self.manager._revert_allocation.assert_called_once_with(
                self.context, self.instance, MIGRATION)
            self.cyclient.delete_arqs_by_uuid.assert_called_once_with(
                [uuids.b0])
            self.assertEqual([], lm.recorded(self.instance))
            self.fault.assert_not_called()
            self.assertEqual(vm_states.ACTIVE, self.instance.vm_state)

    def test_guest_here_goes_on_when_placement_fails(self):
        self.manager._revert_allocation.side_effect = (
            nova_exception.AllocationMoveFailed(
                source_consumer=uuids.mig, target_consumer=uuids.inst,
                error='placement down'))
        lmr.reset(self.manager, self.context, self.instance, MIGRATION)
        self.cyclient.delete_arqs_by_uuid.assert_called_once_with([uuids.b0])

    def test_guest_here_without_a_running_migration(self):
        lmr.reset(self.manager, self.context, self.instance, None)
        self.manager._revert_allocation.assert_not_called()
        self.cyclient.delete_arqs_by_uuid.assert_called_once_with([uuids.b0])

    def test_guest_left_before_post_live_migration(self):
        # The server's ARQs are still the source's, Bound here: they go,
        # the destination's owner becomes the server's.
        self.guest()
        lmr.reset(self.manager, self.context, self.instance, MIGRATION)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.a0])
        self.cyclient.delete_arqs_by_uuid.assert_not_called()
        self.assertEqual(ALIAS, bookkeeping.arq_owner(self.instance))
        self.assertEqual([], lm.recorded(self.instance))
        self.manager._delete_allocation_after_move.assert_called_once_with(
            self.context, self.instance, MIGRATION)
        self.assert_error(lmr.LiveMigrationLeftHost, uuids.mig, 'dest-host')
        self.assertEqual(power_state.NOSTATE, self.instance.power_state)

    def test_guest_left_after_the_owner_switched(self):
        # The server's ARQs are the destination's: none deleted.
        self.guest()
        bookkeeping.set_owner(self.instance, ALIAS)
        self.arqs[uuids.inst] = []
        lmr.reset(self.manager, self.context, self.instance, MIGRATION)
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.cyclient.delete_arqs_by_uuid.assert_not_called()
        self.assertEqual(ALIAS, bookkeeping.arq_owner(self.instance))
        self.manager._delete_allocation_after_move.assert_called_once_with(
            self.context, self.instance, MIGRATION)
        self.assert_error(lmr.LiveMigrationLeftHost, uuids.mig)

    def test_guest_left_cyborg_down(self):
        self.guest()
        self.cyclient.get_arqs_for_instance.side_effect = (
            exception.CyborgError(op='get', msg='down'))
        lmr.reset(self.manager, self.context, self.instance, MIGRATION)
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.manager._delete_allocation_after_move.assert_called_once_with(
            self.context, self.instance, MIGRATION)
        self.assert_error(lmr.LiveMigrationLeftHost, uuids.mig)

    def test_guest_left_placement_fails(self):
        self.guest()
        self.manager._delete_allocation_after_move.side_effect = (
            nova_exception.AllocationDeleteFailed(consumer_uuid=uuids.mig,
                                                  error='down'))
        lmr.reset(self.manager, self.context, self.instance, MIGRATION)
        self.assert_error(lmr.LiveMigrationLeftHost, uuids.mig)

    def test_guest_stopped_here_changes_nothing(self):
        for state, error in ((power_state.SHUTDOWN, None),
                             (None, RuntimeError('libvirt down'))):
            self.manager.reset_mock()
            self.guest(state, error)
            lmr.reset(self.manager, self.context, self.instance, MIGRATION)
            self.cyclient.delete_arqs_strictly.assert_not_called()
            self.cyclient.delete_arqs_by_uuid.assert_not_called()
            self.manager._delete_allocation_after_move.assert_not_called()
            self.assertEqual(uuids.inst, bookkeeping.arq_owner(self.instance))
            self.assertEqual([uuids.b0], lm.recorded(self.instance))
            self.assert_error(lmr.LiveMigrationGuestUnknown, uuids.mig,
                              'dest-host')

    def test_guest_gone_without_a_migration_changes_nothing(self):
        self.guest()
        lmr.reset(self.manager, self.context, self.instance, None)
        self.cyclient.delete_arqs_strictly.assert_not_called()
        self.cyclient.delete_arqs_by_uuid.assert_not_called()
        self.manager._delete_allocation_after_move.assert_not_called()
        self.assert_error(lmr.LiveMigrationGuestUnknown)

    def test_fault_fits_the_database(self):
        # instance_faults.message keeps 255 characters.
        for cls in (lmr.LiveMigrationLeftHost,
                    lmr.LiveMigrationGuestUnknown):
            names = {'migration': uuids.mig, 'dest': 'd' * 24,
                     'source': 's' * 24, 'state': 'shutdown'}
            self.assertLessEqual(len(cls(**names).format_message()), 255)
            names.update(dest='d' * 63, source='s' * 63)
            self.assertIn('d' * 63, cls(**names).format_message()[:255])
