"""Which server actions a server with accelerators may take."""

from unittest import mock

from nova import exception as nova_exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids
import requests

from nova_cyborg import exception
from nova_cyborg.flows import server_actions as api
from nova_cyborg.model import bookkeeping
from tests.unit import test_client

PROFILES = test_client.PROFILES


def _instance(extra_specs):
    return objects.Instance(uuid=uuids.inst, system_metadata={},
                            flavor=objects.Flavor(extra_specs=extra_specs),
                            vm_state='active', task_state=None)


class CheckOperationTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.instance = _instance({'accel:device_profile': 'dp1'})

    def test_flavor_without_profile_allows_everything(self):
        instance = _instance({'hw:cpu_policy': 'dedicated'})
        for operation in ('live_migrate', 'resize', 'no_such_action'):
            self.assertIsNone(api.check_operation(operation, instance))

    def test_supported(self):
        # Live migration's devices are checked with the arguments
        # (check_hosts, LiveMigrationCheckTest).
        for operation in ('evacuate', 'live_migrate', 'rebuild', 'resize',
                          'shelve', 'suspend'):
            self.assertIsNone(api.check_operation(operation, self.instance))

    def test_other_decorated_operation_refused(self):
        exc = self.assertRaises(exception.OperationRefused,
                                api.check_operation, 'unshelve_to_mars',
                                self.instance)
        self.assertEqual('The unshelve_to_mars action is not supported for '
                         'a server with accelerators.', exc.format_message())
        self.assertEqual(400, exc.code)

    def test_attached_accelerator_without_profile(self):
        instance = _instance({})
        instance.system_metadata = {
            bookkeeping.ATTACHED_PREFIX + '0': '%s dp-extra' % uuids.a0}
        for operation in ('rebuild', 'resize', 'shelve'):
            exc = self.assertRaises(exception.OperationRefused,
                                    api.check_operation, operation, instance)
            self.assertIn('The %s action would drop the accelerators '
                          'attached' % operation, exc.format_message())
            self.assertIn('removeAccelerator', exc.format_message())
        for operation in ('evacuate', 'suspend', 'live_migrate'):
            self.assertIsNone(api.check_operation(operation, instance))


class CheckNewFlavorTest(test_client.ClientTestBase):

    def check(self, dp_name='dp1'):
        return api.check_new_flavor(self.context, objects.Flavor(
            extra_specs={'accel:device_profile': dp_name} if dp_name else {}))

    def assert_refused(self, *words):
        exc = self.assertRaises(exception.OperationRefused, self.check)
        self.assertIsInstance(exc, nova_exception.ForbiddenWithAccelerators)
        self.assertEqual(400, exc.code)
        self.assertIn('Device profile dp1: ', exc.format_message())
        for word in words:
            self.assertIn(word, exc.format_message())

    @mock.patch('nova_cyborg.clients.cyborg.get_client')
    def test_no_profile_asks_nobody(self, get_client):
        self.assertIsNone(self.check(None))
        get_client.assert_not_called()
        self.assertFalse(self.requests.called)

    def test_valid_profile(self):
        self.requests.get(PROFILES + '?name=dp1', json={'device_profiles': [
            {'name': 'dp1', 'groups': [{'resources:FPGA': '1'}]}]})
        self.assertIsNone(self.check())
        self.assertEqual({'name': ['dp1']}, self.requests.last_request.qs)

    def test_profile_not_found(self):
        self.requests.get(PROFILES, json={'device_profiles': []})
        self.assert_refused('no such device profile in Cyborg')

    def test_malformed_profile(self):
        self.requests.get(PROFILES, json={'device_profiles': [
            {'name': 'dp1', 'groups': [{'resources:FPGA': '1',
                                        'color': 'blue'}]}]})
        self.assert_refused('group 0', "unknown key 'color'")

    def test_cyborg_error(self):
        self.requests.get(PROFILES, status_code=503,
                          json={'error_message': 'down for maintenance'})
        self.assert_refused('HTTP 503', 'down for maintenance')

    def test_cyborg_unreachable(self):
        self.requests.get(PROFILES, exc=requests.exceptions.ConnectionError)
        self.assert_refused('could not reach Cyborg')

    @mock.patch('nova_cyborg.clients.cyborg.get_device_profile_request_groups')
    def test_cyborg_error_raised_as_such(self, get_groups):
        get_groups.side_effect = exception.CyborgError(op='get',
                                                       msg='HTTP 500')
        exc = self.assertRaises(exception.OperationRefused, self.check)
        self.assertEqual('Failed to get accelerator requests: HTTP 500',
                         exc.format_message())
        get_groups.assert_called_once_with(self.context, 'dp1')


def live_migrate(self, context, instance, block_migration, disk_over_commit,
                 host_name, force=None, async_=False):
    """The signature of ``nova.compute.api.API.live_migrate``."""


RP_OK = uuids.rp_migratable
RP_NO = uuids.rp_not_migratable


class LiveMigrationCheckTest(test_client.ClientTestBase):
    """nova-api refuses a live migration whose devices cannot move."""

    def setUp(self):
        super().setUp()
        self.instance = _instance({'accel:device_profile': 'dp1'})
        self.arqs = [
            test_client._arq(uuids.arq_a, state='Bound', hostname='compute1',
                             device_rp_uuid=RP_OK,
                             instance_uuid=uuids.inst),
            test_client._arq(uuids.arq_b, group=1, state='Bound',
                             hostname='compute1', device_rp_uuid=RP_OK,
                             instance_uuid=uuids.inst)]
        self.requests.get(test_client.ARQS, json=lambda *a: {
            'arqs': self.arqs})
        self.traits = {RP_OK: {'HW_PCI_LIVE_MIGRATABLE', 'OWNER_CYBORG'},
                       RP_NO: {'OWNER_CYBORG'}}
        self.placement = mock.Mock()
        self.placement.get_provider_traits.side_effect = (
            lambda ctxt, rp: mock.Mock(traits=self.traits[rp]))
        self.placement.get.return_value.json.return_value = {
            'name': 'compute1_0000:81:00.0'}
        self.useFixture(test.fixtures.MockPatch(
            'nova.scheduler.client.report.report_client_singleton',
            return_value=self.placement))
        # The hosts' capability traits: tests.unit.test_capability.
        self.hosts_checked = self.useFixture(test.fixtures.MockPatch(
            'nova_cyborg.model.capability.check_hosts')).mock

    def check(self, host_name=None, force=False):
        # As the API controller calls it: every argument positional.
        return api.check_hosts(self.context, live_migrate, self.instance,
                               None, None, host_name, force, False)

    def assert_refused(self, *words, **kwargs):
        exc = self.assertRaises(exception.OperationRefused, self.check,
                                **kwargs)
        # Nova's API turns upstream's exception into HTTP 400.
        self.assertIsInstance(exc, nova_exception.ForbiddenWithAccelerators)
        self.assertEqual(400, exc.code)
        message = exc.format_message()
        self.assertIn('Live migration of this server with accelerators is '
                      'refused: ', message)
        for word in words:
            self.assertIn(word, message)
        return message

    def test_every_device_migratable(self):
        self.assertIsNone(self.check())
        self.assertEqual({'instance': [uuids.inst]},
                         self.requests.last_request.qs)
        self.placement.get_provider_traits.assert_has_calls(
            [mock.call(self.context, RP_OK)] * 2)
        self.placement.get.assert_not_called()
        # A host the scheduler checks (force false) is not forced.
        self.assertIsNone(self.check(host_name='compute2', force=False))

    def test_hosts_checked_before_the_devices(self):
        self.hosts_checked.side_effect = RuntimeError('host refused')
        self.assertRaises(RuntimeError, self.check, host_name='compute2')
        (context, operation, instance, arguments), _kw = (
            self.hosts_checked.call_args)
        self.assertEqual(('live_migrate', 'compute2'),
                         (operation, arguments['host_name']))
        self.assertIsNone(self.requests.last_request)

    def test_one_device_not_migratable(self):
        self.arqs[1]['device_rp_uuid'] = RP_NO
        message = self.assert_refused(
            'accelerator request %s (device profile dp1) uses device '
            'compute1_0000:81:00.0 on host compute1, whose resource provider '
            'does not have trait HW_PCI_LIVE_MIGRATABLE' % uuids.arq_b,
            'live_migratable', 'openstack server migrate')
        self.assertNotIn(uuids.arq_a, message)
        self.placement.get.assert_called_once_with(
            '/resource_providers/%s' % RP_NO, version='1.14',
            global_request_id=self.context.global_id)

    def test_every_blocking_device_named(self):
        for arq in self.arqs:
            arq['device_rp_uuid'] = RP_NO
        self.assert_refused(uuids.arq_a, uuids.arq_b)

    def test_provider_gone_named_by_uuid(self):
        self.arqs[0]['device_rp_uuid'] = RP_NO
        self.placement.get.return_value = None
        self.assert_refused('uses device %s on host compute1' % RP_NO)

    def test_attached_arqs_under_the_alias(self):
        # After a live migration the alias holds the ARQs, the attached
        # ones included: those are checked.
        owner = bookkeeping.alias(uuids.inst)
        bookkeeping.set_owner(self.instance, owner)
        self.arqs[1].update(device_profile_name='dp-extra',
                            device_rp_uuid=RP_NO)
        self.assert_refused('%s (device profile dp-extra)' % uuids.arq_b)
        self.assertEqual({'instance': [owner]},
                         self.requests.last_request.qs)

    def test_attached_accelerators_not_migrated(self):
        # Every device could move, but only the flavor's profile is bound
        # on the destination.
        self.instance.system_metadata = {
            bookkeeping.ATTACHED_PREFIX + '0': '%s dp-extra' % uuids.arq_b}
        self.assert_refused('attached with addAccelerator (device profiles '
                            'dp-extra) are not live-migrated',
                            'removeAccelerator')

    def test_arq_not_bound(self):
        self.arqs[0].update(state='BindFailed', device_rp_uuid=None)
        self.assert_refused('accelerator request %s (device profile dp1) is '
                            'BindFailed, not bound' % uuids.arq_a)

    def test_no_arq(self):
        self.arqs = []
        self.assert_refused('Cyborg holds no accelerator request')

    def test_forced_destination(self):
        # force=True (2.30-2.67), or a host below 2.30 (force is None).
        for force in (True, None):
            self.assert_refused('destination host compute2 is forced',
                                'scheduler must choose the devices',
                                host_name='compute2', force=force)
        self.assertFalse(self.requests.called)
        # Without a host there is nothing forced.
        self.assertIsNone(self.check(host_name=None, force=None))

    def test_cyborg_error(self):
        self.requests.get(test_client.ARQS, status_code=503,
                          json={'error_message': 'down'})
        self.assert_refused('could not be read from Cyborg', 'HTTP 503',
                            'Try again later')

    def test_placement_error(self):
        self.placement.get_provider_traits.side_effect = (
            nova_exception.ResourceProviderTraitRetrievalFailed(
                uuid=RP_OK))
        self.assert_refused('the traits of device %s could not be read '
                            'from Placement' % RP_OK)

    def test_state_left_to_nova(self):
        # Nova's check_instance_state (after this check) answers 409 for a
        # server it does not live-migrate in that state: nothing is read.
        self.arqs = []
        for vm_state, task_state in (('shelved_offloaded', None),
                                     ('stopped', None),
                                     ('active', 'migrating')):
            self.instance.vm_state = vm_state
            self.instance.task_state = task_state
            self.assertIsNone(self.check(host_name='compute2', force=True))
        self.assertFalse(self.requests.called)
        self.instance.vm_state, self.instance.task_state = 'paused', None
        self.assert_refused('Cyborg holds no accelerator request')

    def test_server_without_accelerators_asks_nobody(self):
        self.instance = _instance({})
        self.assertIsNone(self.check(host_name='compute2', force=True))
        self.assertFalse(self.requests.called)
        self.placement.get_provider_traits.assert_not_called()
