"""Releasing the ARQs of a server deleted while its host was down."""

from unittest import mock

from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import exception
from nova_cyborg.flows.cleanup import delete as cleanup
from nova_cyborg.model import bookkeeping


def _instance(extra_specs):
    flavor = objects.Flavor(extra_specs=extra_specs)
    return objects.Instance(uuid=uuids.inst, flavor=flavor,
                            system_metadata={})


@mock.patch('nova_cyborg.clients.cyborg.get_client')
class DeleteArqsOfDeletedInstanceTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()

    def test_deletes(self, get_client):
        cleanup.delete_arqs_of_deleted_instance(
            self.context, _instance({'accel:device_profile': 'dp1'}))
        get_client.assert_called_once_with(self.context)
        get_client.return_value.delete_arqs_for_instance \
            .assert_called_once_with(uuids.inst, owners=(uuids.inst,))

    def test_no_profile(self, get_client):
        cleanup.delete_arqs_of_deleted_instance(self.context, _instance({}))
        get_client.assert_not_called()

    def test_flavor_not_loadable_asks_cyborg(self, get_client):
        instance = objects.Instance(self.context, uuid=uuids.inst)
        with mock.patch.object(objects.Instance, 'obj_load_attr',
                               side_effect=Exception('gone')):
            cleanup.delete_arqs_of_deleted_instance(self.context, instance)
        # Its records unreadable: under both owners (the default).
        get_client.return_value.delete_arqs_for_instance \
            .assert_called_once_with(uuids.inst, owners=None)

    def test_failure_is_logged_not_raised(self, get_client):
        get_client.return_value.delete_arqs_for_instance.side_effect = (
            exception.CyborgError(op='delete', msg='down'))
        with mock.patch.object(cleanup.LOG, 'error') as error:
            cleanup.delete_arqs_of_deleted_instance(
                self.context, _instance({'accel:device_profile': 'dp1'}))
        self.assertTrue(error.called)


@mock.patch('nova_cyborg.clients.cyborg.get_client')
class DeleteArqsOfDeletingInstanceTest(test.NoDBTestCase):
    """A Cyborg failure does not fail the user's delete (as upstream)."""

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()

    def test_deletes_bound_and_parked(self, get_client):
        instance = _instance({'accel:device_profile': 'dp1'})
        instance.system_metadata['nova_cyborg_parked_arq_0'] = (
            '%s %s host1' % (uuids.parked, uuids.rp))
        cleanup.delete_arqs_of_deleting_instance(self.context, instance)
        cyclient = get_client.return_value
        # Never live-migrated: one delete, under its own UUID.
        cyclient.delete_arqs_for_instance.assert_called_once_with(
            uuids.inst, owners=(uuids.inst,))
        cyclient.delete_arqs_strictly.assert_called_once_with([uuids.parked])

    def test_live_migrated_deletes_under_both_owners(self, get_client):
        instance = _instance({'accel:device_profile': 'dp1'})
        alias = bookkeeping.alias(uuids.inst)
        bookkeeping.set_owner(instance, alias)
        cleanup.delete_arqs_of_deleting_instance(self.context, instance)
        get_client.return_value.delete_arqs_for_instance \
            .assert_called_once_with(uuids.inst, owners=(uuids.inst, alias))

    def test_deletes_a_live_migrations_destination_arqs(self, get_client):
        # Deleted while a live migration was under way (or after a
        # conductor stopped between the create and the bind): the
        # destination's ARQs may not be bound to the server at all.
        instance = _instance({'accel:device_profile': 'dp1'})
        instance.system_metadata['nova_cyborg_live_dest_arq_0'] = uuids.dest
        cleanup.delete_arqs_of_deleting_instance(self.context, instance)
        cyclient = get_client.return_value
        cyclient.delete_arqs_for_instance.assert_called_once_with(
            uuids.inst, owners=(uuids.inst, bookkeeping.alias(uuids.inst)))
        cyclient.delete_arqs_strictly.assert_called_once_with([uuids.dest])

    def test_cyborg_failure_is_logged_not_raised(self, get_client):
        get_client.return_value.delete_arqs_for_instance.side_effect = (
            exception.CyborgError(op='delete', msg='down', status=503))
        with mock.patch.object(cleanup.LOG, 'error') as error:
            cleanup.delete_arqs_of_deleting_instance(
                self.context, _instance({'accel:device_profile': 'dp1'}))
        self.assertIn(uuids.inst, str(error.call_args))

    def test_attached_only(self, get_client):
        instance = _instance({})
        instance.system_metadata['nova_cyborg_attached_arq_0'] = (
            '%s dp2' % uuids.arq)
        cleanup.delete_arqs_of_deleting_instance(self.context, instance)
        get_client.return_value.delete_arqs_for_instance \
            .assert_called_once_with(uuids.inst, owners=(uuids.inst,))

    def test_no_accelerators_asks_nobody(self, get_client):
        cleanup.delete_arqs_of_deleting_instance(self.context, _instance({}))
        get_client.assert_not_called()


@mock.patch('nova_cyborg.clients.cyborg.get_client')
@mock.patch.object(cleanup, '_booted_with_profile')
@mock.patch.object(cleanup, '_instance_row')
class DeleteArqsBeforeHostTest(test.NoDBTestCase):
    """A server deleted before it had a host (nova-api's local delete)."""

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()

    def test_bound_and_unbound_deleted(self, row, spec, get_client):
        instance = _instance({'accel:device_profile': 'dp1'})
        instance.system_metadata['nova_cyborg_retired_arq_0'] = uuids.arq
        row.return_value = instance
        get_client.return_value.delete_arqs_by_uuid.return_value = []
        cleanup.delete_arqs_before_host(self.context, uuids.inst)
        cyclient = get_client.return_value
        # Never live-migrated: its own UUID only.
        cyclient.delete_arqs_for_instance.assert_called_once_with(
            uuids.inst, owners=(uuids.inst,))
        cyclient.delete_arqs_by_uuid.assert_called_once_with([uuids.arq])
        spec.assert_not_called()

    def test_no_accelerators_asks_nobody(self, row, spec, get_client):
        row.return_value = _instance({})
        cleanup.delete_arqs_before_host(self.context, uuids.inst)
        get_client.assert_not_called()

    def test_not_in_a_cell_read_from_the_request_spec(self, row, spec,
                                                      get_client):
        row.return_value = None
        spec.return_value = True
        cleanup.delete_arqs_before_host(self.context, uuids.inst)
        # Its records unknown: under both owners (the default).
        get_client.return_value.delete_arqs_for_instance \
            .assert_called_once_with(uuids.inst, owners=None)
        spec.return_value = False
        get_client.reset_mock()
        cleanup.delete_arqs_before_host(self.context, uuids.inst)
        get_client.assert_not_called()

    def test_cyborg_failure_is_logged_not_raised(self, row, spec,
                                                 get_client):
        row.return_value = _instance({'accel:device_profile': 'dp1'})
        get_client.return_value.delete_arqs_for_instance.side_effect = (
            exception.CyborgError(op='delete', msg='down'))
        with mock.patch.object(cleanup.LOG, 'error') as error:
            cleanup.delete_arqs_before_host(self.context, uuids.inst)
        self.assertIn('nova-cyborg-sweep-arqs', error.call_args[0][0])


class MayHaveArqsBeforeHostTest(test.NoDBTestCase):
    """Decided from what nova-api loaded: a plain server's local delete
    reads nothing more than upstream's."""

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()

    def server(self, **fields):
        # With a context: a field not loaded would be lazy-loaded (a query).
        instance = objects.Instance(context=self.context, uuid=uuids.inst,
                                    **fields)
        instance.obj_reset_changes()
        return instance

    @mock.patch.object(objects.Instance, 'obj_load_attr')
    def test_plain_server_needs_no_query(self, load):
        # As nova-api's servers controller loads it (flavor), with or
        # without system metadata (a build request's instance has it).
        for fields in ({'flavor': objects.Flavor(extra_specs={})},
                       {'flavor': objects.Flavor(
                           extra_specs={'accel:device_profile': ''}),
                        'system_metadata': {'image_os_type': 'linux'}}):
            self.assertFalse(cleanup.may_have_arqs_before_host(
                self.server(**fields)))
        load.assert_not_called()

    @mock.patch.object(objects.Instance, 'obj_load_attr')
    def test_flavor_with_a_profile(self, load):
        self.assertTrue(cleanup.may_have_arqs_before_host(self.server(
            flavor=objects.Flavor(
                extra_specs={'accel:device_profile': 'dp1'}))))
        load.assert_not_called()

    def test_arqs_in_system_metadata(self):
        flavor = objects.Flavor(extra_specs={})
        for key, value in (
                ('nova_cyborg_attached_arq_0', '%s dp1' % uuids.arq),
                ('nova_cyborg_retired_arq_0', uuids.arq)):
            self.assertTrue(cleanup.may_have_arqs_before_host(self.server(
                flavor=flavor, system_metadata={key: value})), key)

    @mock.patch.object(objects.Instance, 'obj_load_attr')
    def test_flavor_not_loaded_looks_the_server_up(self, load):
        self.assertTrue(cleanup.may_have_arqs_before_host(self.server()))
        load.assert_not_called()
