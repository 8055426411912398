"""A server booted with a device profile flavor, and its delete."""

from tempest import config
from tempest.lib import decorators
import testtools

from tempest_plugin.tests import base
from tempest_plugin.tests import checks

CONF = config.CONF


class ServerAcceleratorsTest(base.AcceleratorTest):

    @decorators.attr(type='smoke')
    @decorators.idempotent_id('967ecd0e-881d-44ae-8125-2ce65aa83502')
    def test_create_delete_server(self):
        """ACTIVE with Bound ARQs that match its allocation; delete frees
        everything."""
        server_id = self.create_server(self.flavor)
        self.assert_accelerated(server_id, self.profile)
        self.delete_server_and_assert_released(server_id)

    @testtools.skipUnless(CONF.nova_cyborg.domain_xml_dir,
                          checks.DOMAIN_XML_UNSET)
    @decorators.idempotent_id('195575e2-deba-4328-9e4c-9de239d71998')
    def test_domain_hostdevs_are_the_attach_handles(self):
        """The guest's <hostdev> elements are its ARQs' attach handles."""
        server_id = self.create_server(self.flavor)
        arqs = self.list_arqs(server_id)
        self.assertEqual(self.profile.device_count, len(arqs))
        self.assert_domain_hostdevs(server_id, arqs)
