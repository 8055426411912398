"""addAccelerator and removeAccelerator (doc/source/attach.rst).

A server created without accelerators gets the devices of a device
profile while it runs (PCI hot-plug) or while it is stopped, and gives
them back; deleting it frees what was attached.
"""

from tempest import config
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
import testtools

from tempest_plugin.services import server_accelerators_client as sa_client
from tempest_plugin.tests import base

CONF = config.CONF


class AcceleratorAttachTest(base.AcceleratorTest):

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.plain_flavor = cls.create_flavor()

    def act(self, server_id, action):
        """Post an action; wait for its instance action event: Success."""
        client = self.server_accelerators_client
        method = (client.add_accelerator if action == sa_client.ADD
                  else client.remove_accelerator)
        request_id = method(server_id, self.profile.name).response[
            'x-openstack-request-id']
        event_name = sa_client.EVENTS[action]
        found = {}

        def finished():
            action_body = self.admin_servers_client.show_instance_action(
                server_id, request_id)['instanceAction']
            for event in action_body.get('events', []):
                if event['event'] == event_name and event.get('result'):
                    found.update(event)
            return bool(found)

        self.wait_until(finished, '%s of server %s' % (action, server_id))
        self.assertTrue(found, '%s of server %s did not end' % (
            action, server_id))
        self.assertEqual('Success', found['result'], found)

    def refused(self, server_id, action):
        """The action is refused at once with 409."""
        client = self.server_accelerators_client
        method = (client.add_accelerator if action == sa_client.ADD
                  else client.remove_accelerator)
        self.assertRaises(lib_exc.Conflict, method, server_id,
                          self.profile.name)

    def stop(self, server_id):
        self.servers_client.stop_server(server_id)
        self.wait_for_status(server_id, 'SHUTOFF')

    def start(self, server_id):
        self.servers_client.start_server(server_id)
        self.wait_for_status(server_id, 'ACTIVE')

    @testtools.skipIf(CONF.nova_cyborg.hostdev_type == 'mdev',
                      'Mediated devices are attached to stopped servers '
                      'only.')
    @decorators.idempotent_id('76b3c7f5-dfa4-4316-b668-08836cc2eeac')
    def test_hot_plug_unplug(self):
        server_id = self.create_server(self.plain_flavor)
        self.assert_not_accelerated(server_id, self.profile)
        self.refused(server_id, sa_client.REMOVE)

        self.act(server_id, sa_client.ADD)
        # Plugged into the running guest: the domain file is written when
        # the domain is defined or started, so it is checked after a
        # hard reboot.
        arqs = self.assert_accelerated(server_id, self.profile,
                                       check_domain=False)
        self.refused(server_id, sa_client.ADD)
        self.servers_client.reboot_server(server_id, type='HARD')
        self.wait_for_status(server_id, 'ACTIVE')
        self.assertEqual(self.uuids(arqs), self.uuids(
            self.assert_accelerated(server_id, self.profile)))

        self.act(server_id, sa_client.REMOVE)
        self.assert_not_accelerated(server_id, self.profile,
                                    check_domain=False)
        self.servers_client.reboot_server(server_id, type='HARD')
        self.wait_for_status(server_id, 'ACTIVE')
        self.assert_not_accelerated(server_id, self.profile)
        self.delete_server_and_assert_released(server_id)

    @decorators.idempotent_id('487f20fc-52ab-410d-860b-f07ff40d885c')
    def test_cold_plug_unplug(self):
        server_id = self.create_server(self.plain_flavor)
        self.stop(server_id)
        self.act(server_id, sa_client.ADD)
        self.assert_accelerated(server_id, self.profile, 'SHUTOFF',
                                check_domain=False)
        self.start(server_id)
        arqs = self.assert_accelerated(server_id, self.profile)

        self.stop(server_id)
        self.act(server_id, sa_client.REMOVE)
        self.assert_not_accelerated(server_id, self.profile, 'SHUTOFF',
                                    check_domain=False)
        self.start(server_id)
        self.assert_not_accelerated(server_id, self.profile)
        self.assert_arqs_deleted(self.uuids(arqs))
        self.delete_server_and_assert_released(server_id)

    @decorators.idempotent_id('8ca7cb25-e308-4170-abe1-3345e1c3f2a7')
    def test_delete_frees_what_was_attached(self):
        server_id = self.create_server(self.plain_flavor)
        self.stop(server_id)
        self.act(server_id, sa_client.ADD)
        self.start(server_id)
        self.assert_accelerated(server_id, self.profile)
        self.delete_server_and_assert_released(server_id)
