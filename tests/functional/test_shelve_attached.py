"""Shelving never leaves an attached accelerator Bound while offloaded.

An offloaded server has no host: nothing it holds in Cyborg or Placement
may stay. Unshelving gives it back its flavor's accelerators only (the
conductor asks the scheduler for them), so a server with accelerators
attached with addAccelerator is refused shelve with a reason, whoever
asks (the owner, or a cloud admin of another project), and keeps them.
Detached first, it is offloaded with nothing left in Cyborg or
Placement, and unshelved, by the admin, with its flavor's accelerators
in the owner's project. Nor can anything be attached to an offloaded
server.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

from nova.tests.functional.api import client  # noqa: E402


class ShelveAttachedTest(attach_base.AttachTestBase):

    TIMEOUT_SCALING_FACTOR = 3

    def setUp(self):
        super().setUp()
        self.create_profile_flavor(attach_base.PROFILE, name='extra')

    def owner_acts(self, server, action, dp='extra'):
        self.accelerator_action(self.owner_api, server, action, dp)

    def assert_refused(self, api, server, body, status, text):
        ex = self.assertRaises(client.OpenStackApiException,
                               api.post_server_action, server['id'], body)
        self.assertEqual(status, ex.response.status_code)
        self.assertIn(text, str(ex))

    def assert_owner_arqs(self, server, n_arqs):
        server = self.admin_api.get_server(server['id'])
        arqs = self.assert_accelerated(server, n_arqs)
        self.assertEqual({attach_base.OWNER_PROJECT},
                         {a['project_id'] for a in arqs})
        return arqs

    def test_attached_server_is_not_shelved_detached_one_is(self):
        server = self.boot(self.accel_flavor, api=self.owner_api)
        self.owner_api.post_server_action(server['id'], {'os-stop': None})
        self._wait_for_state_change(server, 'SHUTOFF')
        self.owner_acts(server, 'addAccelerator')
        self.owner_api.post_server_action(server['id'], {'os-start': None})
        self._wait_for_state_change(server, 'ACTIVE')
        arqs = self.assert_owner_arqs(server, 2)

        for api in (self.owner_api, self.cloud_admin_api):
            self.assert_refused(api, server, {'shelve': None}, 400,
                                'detach them first (removeAccelerator)')
        # Nothing changed: still ACTIVE with both devices.
        self.assertEqual(
            sorted(a['uuid'] for a in arqs),
            sorted(a['uuid'] for a in self.assert_owner_arqs(server, 2)))

        self.owner_api.post_server_action(server['id'], {'os-stop': None})
        self._wait_for_state_change(server, 'SHUTOFF')
        self.owner_acts(server, 'removeAccelerator')
        self.owner_api.post_server_action(server['id'], {'shelve': None})
        server = self._wait_for_state_change(server, 'SHELVED_OFFLOADED')
        # Offloaded: nothing Bound, nothing allocated.
        self.assert_nothing_left(server['id'])
        self.assert_refused(
            self.owner_api, server,
            {'addAccelerator': {'device_profile': 'extra'}}, 409,
            'shelved_offloaded')

        self.cloud_admin_api.post_server_action(server['id'],
                                                {'unshelve': None})
        server = self._wait_for_state_change(server, 'ACTIVE')
        (arq,) = self.assert_owner_arqs(server, 1)
        self.assertEqual(self.dp, arq['device_profile_name'])
        self.owner_api.delete_server(server['id'])
        self._wait_until_deleted(server)
        self.assert_nothing_left(server['id'])
