"""nova_cyborg.hooks.compute_utils: nothing for a plain server."""

from unittest import mock

from nova import context as nova_context
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.hooks import compute_utils as hooks
from nova_cyborg.model import bookkeeping


class DeleteArqsIfNeededTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.instance = objects.Instance(
            self.context, uuid=uuids.inst,
            flavor=objects.Flavor(extra_specs={}))
        self.delete = self.useFixture(test.fixtures.MockPatch(
            'nova_cyborg.flows.cleanup.delete.delete_arqs_if_needed')).mock

    def test_plain_server_loads_and_deletes_nothing(self):
        with mock.patch.object(objects.Instance, 'obj_load_attr') as load:
            hooks.delete_arqs_if_needed(self.context, self.instance)
        load.assert_not_called()
        self.delete.assert_not_called()

    def test_arq_uuids_are_deleted(self):
        hooks.delete_arqs_if_needed(self.context, self.instance, [uuids.a])
        self.delete.assert_called_once_with(self.context, self.instance,
                                            [uuids.a])

    def test_device_profile_or_records_delete(self):
        self.instance.flavor.extra_specs = {
            bookkeeping.DP_EXTRA_SPEC: 'dp1'}
        hooks.delete_arqs_if_needed(self.context, self.instance)
        self.instance.flavor.extra_specs = {}
        self.instance.system_metadata = {
            bookkeeping.RETIRED_PREFIX + '0': uuids.retired}
        hooks.delete_arqs_if_needed(self.context, self.instance)
        self.assertEqual(2, self.delete.call_count)
