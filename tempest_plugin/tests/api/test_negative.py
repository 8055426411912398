"""Device profiles the API refuses, with HTTP 400 and nothing created."""

from tempest.lib.common.utils import data_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from tempest_plugin.tests import base

#: accel:device_profile values that name no profile: empty, with
#: whitespace or a comma (Nova's extra spec validation refuses them from
#: microversion 2.86).
MALFORMED_NAMES = ['', 'a b', 'a,b']


class ServerNegativeTestMixin(object):

    def assert_create_refused(self, flavor_id, *expected_texts):
        """Creating a server refused with 400; no server left."""
        args = self.server_create_args(flavor_id)
        ex = self.assertRaises(lib_exc.BadRequest,
                               self.servers_client.create_server, **args)
        for text in expected_texts:
            self.assertIn(text, str(ex))
        self.assertEqual([], self.servers_client.list_servers(
            name=args['name'])['servers'])


class UnknownDeviceProfileNegativeTest(ServerNegativeTestMixin,
                                       base.BaseNovaCyborgTest):

    @decorators.attr(type='negative')
    @decorators.idempotent_id('65e906c2-96e9-473b-a885-c345067df564')
    def test_create_server_unknown_device_profile(self):
        name = data_utils.rand_name(prefix='tempest', name='no-such-dp')
        flavor_id = self.create_flavor(name, cleanup=self.addCleanup)
        self.assert_create_refused(flavor_id, name,
                                   'no such device profile')


class MalformedExtraSpecNegativeTest(base.BaseNovaCyborgTest):
    """Validated extra specs (microversion 2.86) refuse malformed names."""

    min_microversion = '2.86'

    @decorators.attr(type='negative')
    @decorators.idempotent_id('907cb77d-903c-4a7e-a4dd-fbd1dbba4c95')
    def test_set_malformed_device_profile_extra_spec(self):
        flavor_id = self.create_flavor(cleanup=self.addCleanup)
        for value in MALFORMED_NAMES:
            self.assertRaises(lib_exc.BadRequest,
                              self.flavors_client.set_flavor_extra_spec,
                              flavor_id, **{base.DP_EXTRA_SPEC: value})
        self.assertEqual({}, self.flavors_client.list_flavor_extra_specs(
            flavor_id)['extra_specs'])


class UnvalidatedExtraSpecNegativeTest(ServerNegativeTestMixin,
                                       base.BaseNovaCyborgTest):
    """Malformed names set before extra spec validation (below 2.86) are
    refused when a server is created, not silently ignored. An empty value
    names no profile: such a flavor boots without accelerators, as
    upstream Nova boots it."""

    max_microversion = '2.85'

    @decorators.attr(type='negative')
    @decorators.idempotent_id('9333e982-a165-4f94-8a0e-d87ff7d683a1')
    def test_create_server_malformed_device_profile(self):
        for value in [name for name in MALFORMED_NAMES if name]:
            flavor_id = self.create_flavor(value, cleanup=self.addCleanup)
            self.assert_create_refused(flavor_id)
