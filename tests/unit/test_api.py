"""Which server actions a server with accelerators may take."""

from unittest import mock

from nova import exception as nova_exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids
import requests

from nova_cyborg import api
from nova_cyborg import exception
from nova_cyborg import move
from tests.unit import test_client

PROFILES = test_client.PROFILES


def _instance(extra_specs):
    return objects.Instance(uuid=uuids.inst, system_metadata={},
                            flavor=objects.Flavor(extra_specs=extra_specs))


class CheckOperationTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.instance = _instance({'accel:device_profile': 'dp1'})

    def test_flavor_without_profile_allows_everything(self):
        instance = _instance({'hw:cpu_policy': 'dedicated'})
        for operation in ('live_migrate', 'resize', 'no_such_action'):
            self.assertIsNone(api.check_operation(operation, instance))

    def test_supported(self):
        for operation in ('evacuate', 'rebuild', 'resize', 'shelve',
                          'suspend'):
            self.assertIsNone(api.check_operation(operation, self.instance))

    def test_live_migrate_refused_with_reason(self):
        exc = self.assertRaises(exception.OperationRefused,
                                api.check_operation, 'live_migrate',
                                self.instance)
        message = exc.format_message()
        self.assertIn('Live migration of a server with accelerators is not '
                      'supported', message)
        self.assertIn('openstack server migrate', message)
        # Nova's API turns upstream's exception into HTTP 400.
        self.assertIsInstance(exc, nova_exception.ForbiddenWithAccelerators)
        self.assertEqual(400, exc.code)

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
            move.ATTACHED_PREFIX + '0': '%s dp-extra' % uuids.a0}
        for operation in ('rebuild', 'resize', 'shelve'):
            exc = self.assertRaises(exception.OperationRefused,
                                    api.check_operation, operation, instance)
            self.assertIn('The %s action would drop the accelerators '
                          'attached' % operation, exc.format_message())
            self.assertIn('removeAccelerator', exc.format_message())
        for operation in ('evacuate', 'suspend'):
            self.assertIsNone(api.check_operation(operation, instance))
        exc = self.assertRaises(exception.OperationRefused,
                                api.check_operation, 'live_migrate',
                                instance)
        self.assertIn('Live migration', exc.format_message())


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

    @mock.patch('nova_cyborg.client.get_client')
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

    @mock.patch('nova_cyborg.client.get_device_profile_request_groups')
    def test_cyborg_error_raised_as_such(self, get_groups):
        get_groups.side_effect = exception.CyborgError(op='get',
                                                       msg='HTTP 500')
        exc = self.assertRaises(exception.OperationRefused, self.check)
        self.assertEqual('Failed to get accelerator requests: HTTP 500',
                         exc.format_message())
        get_groups.assert_called_once_with(self.context, 'dp1')
