"""The local delete's hooks (patch 0012): a plain server's local delete
reads nothing more than upstream's, with upstream's signatures."""

import threading
from unittest import mock

import fixtures
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.hooks import api as hooks


def _server(uuid, extra_specs):
    return objects.Instance(uuid=uuid, flavor=objects.Flavor(
        extra_specs=extra_specs), system_metadata={})


class LocalDeleteHooksTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.delete = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.flows.cleanup.delete.delete_arqs_before_host')).mock
        self.addCleanup(setattr, hooks._decided, 'value', None)

    def test_plain_server_costs_nothing(self):
        hooks.may_have_arqs_before_host(_server(uuids.plain, {}))
        hooks.delete_arqs_before_host(mock.sentinel.ctx, uuids.plain)
        self.delete.assert_not_called()

    def test_server_with_a_profile_is_cleaned(self):
        hooks.may_have_arqs_before_host(_server(
            uuids.accel, {'accel:device_profile': 'dp'}))
        hooks.delete_arqs_before_host(mock.sentinel.ctx, uuids.accel)
        self.delete.assert_called_once_with(mock.sentinel.ctx, uuids.accel)

    def test_undecided_or_another_server_is_cleaned(self):
        # A caller that did not go through _delete(), or another server.
        hooks.delete_arqs_before_host(mock.sentinel.ctx, uuids.a)
        hooks.may_have_arqs_before_host(_server(uuids.plain, {}))
        hooks.delete_arqs_before_host(mock.sentinel.ctx, uuids.other)
        self.assertEqual(
            [mock.call(mock.sentinel.ctx, uuids.a),
             mock.call(mock.sentinel.ctx, uuids.other)],
            self.delete.call_args_list)

    def test_the_decision_is_used_once(self):
        hooks.may_have_arqs_before_host(_server(uuids.plain, {}))
        hooks.delete_arqs_before_host(mock.sentinel.ctx, uuids.plain)
        hooks.delete_arqs_before_host(mock.sentinel.ctx, uuids.plain)
        self.delete.assert_called_once_with(mock.sentinel.ctx, uuids.plain)

    def test_each_thread_its_own_decision(self):
        hooks.may_have_arqs_before_host(_server(uuids.plain, {}))
        thread = threading.Thread(target=hooks.delete_arqs_before_host,
                                  args=(mock.sentinel.ctx, uuids.plain))
        thread.start()
        thread.join()
        self.delete.assert_called_once_with(mock.sentinel.ctx, uuids.plain)
