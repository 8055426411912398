"""A revert cut short on the destination:
nova_cyborg.flows.move.revert_recovery."""

from unittest import mock

import fixtures
from nova.compute import task_states
from nova.compute import vm_states
from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.flows.move import revert_recovery
from nova_cyborg.model import bookkeeping

DP = 'accel:device_profile'


class ResizeRevertingTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.manager = mock.Mock(host='dest-host')
        self.manager.driver.instance_exists.return_value = True
        self.migration = objects.Migration(
            id=7, uuid=uuids.migration, status='reverting',
            source_compute='src-host', dest_compute='dest-host')
        self.get_migration = self.useFixture(fixtures.MockPatch(
            'nova.objects.Migration.get_by_id_and_instance',
            return_value=self.migration)).mock
        self.spec = objects.RequestSpec(instance_uuid=uuids.inst)
        self.useFixture(fixtures.MockPatch(
            'nova.objects.RequestSpec.get_by_instance_uuid',
            return_value=self.spec))
        self.instance = self._instance({DP: 'dp'})
        # The server as read again: unchanged unless a test says so.
        self.refresh = self.useFixture(fixtures.MockPatchObject(
            objects.Instance, 'refresh')).mock

    def _instance(self, extra_specs, parked=None):
        meta = {}
        if parked:
            bookkeeping.store(
                instance_meta := objects.Instance(system_metadata={}),
                bookkeeping.PARKED_PREFIX,
                ['%s %s src-host' % (parked, uuids.src_rp)])
            meta = instance_meta.system_metadata
        flavor = objects.Flavor(extra_specs=extra_specs)
        return objects.Instance(
            uuid=uuids.inst, host='dest-host', vm_state=vm_states.RESIZED,
            task_state=task_states.RESIZE_REVERTING, flavor=flavor,
            new_flavor=None, system_metadata=meta,
            migration_context=objects.MigrationContext(migration_id=7))

    def _run(self):
        revert_recovery.resize_reverting(self.manager, self.context,
                                         self.instance)
        return self.manager.compute_rpcapi.revert_resize

    def test_revert_cast_again_to_this_host(self):
        cast = self._run()
        cast.assert_called_once_with(self.context, self.instance,
                                     self.migration, 'dest-host', self.spec)
        self.refresh.assert_called_once_with()

    def test_guest_already_destroyed_is_reverted_too(self):
        self.manager.driver.instance_exists.return_value = False
        self._run().assert_called_once()

    def test_resize_from_a_plain_flavor_is_reverted(self):
        # On the destination the server has the new flavor's profile.
        self.instance = self._instance({DP: 'dp'})
        self._run().assert_called_once()

    def test_resize_to_a_plain_flavor_is_reverted(self):
        # The source's ARQs are parked; the new flavor names none.
        self.instance = self._instance({}, parked=uuids.arq)
        self._run().assert_called_once()

    def test_server_without_accelerators_is_left_as_upstream_leaves_it(self):
        self.instance = self._instance({})
        self._run().assert_not_called()
        self.get_migration.assert_not_called()
        self.manager.driver.instance_exists.assert_not_called()

    def test_other_task_states_read_nothing(self):
        for state in (None, task_states.RESIZE_MIGRATING,
                      task_states.RESIZE_FINISH):
            self.instance.task_state = state
            self._run().assert_not_called()
        self.get_migration.assert_not_called()

    def test_not_the_destination_of_a_revert(self):
        for status, dest in (('finished', 'dest-host'),
                             ('reverting', 'other-host')):
            self.migration.status = status
            self.migration.dest_compute = dest
            self._run().assert_not_called()

    def test_source_took_the_server_over_meanwhile(self):
        def moved():
            self.instance.host = 'src-host'
        self.refresh.side_effect = moved
        self._run().assert_not_called()

    def test_revert_finished_meanwhile(self):
        def done():
            self.instance.task_state = None
        self.refresh.side_effect = done
        self._run().assert_not_called()

    def test_no_migration_context(self):
        self.instance.migration_context = None
        self._run().assert_not_called()

    def test_never_raises(self):
        self.get_migration.side_effect = Exception('database away')
        self._run().assert_not_called()
        self.get_migration.side_effect = None
        self.manager.compute_rpcapi.revert_resize.side_effect = (
            Exception('rabbit away'))
        self._run()
