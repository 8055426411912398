"""A user's server, acted on by a cloud admin of another project.

Three callers (tests.functional.harness.identity): the owner (a member of
project A) boots the server; a cloud admin whose own project is C
cold-migrates, resizes, evacuates, unshelves it or attaches to it; then the
owner reboots, stops and starts, reverts or deletes it. Whoever acts, the
server's ARQs belong to project A: the owner's operations then see every
one of them, so the guest keeps its device, a revert leaves one bound set
and a delete leaves nothing in Cyborg or Placement. Another tenant
(project B) sees neither the server nor its ARQs.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

import fixtures  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402

from tests.functional.harness import identity  # noqa: E402


class TenancyTest(attach_base.AttachTestBase):

    #: Each test is a server's life of many steps.
    TIMEOUT_SCALING_FACTOR = 4

    def setUp(self):
        super().setUp()
        self.without_disks()
        self.useFixture(fixtures.MockPatch('os.rename'))
        self.server = self.boot(self.accel_flavor, api=self.owner_api)
        self.assert_owner_has_device('compute1', 1)

    # What the owner and another tenant check

    def assert_owner_has_device(self, hostname, n_arqs):
        """The owner's server is ACTIVE on ``hostname`` with its devices
        passed through; its ARQs are Bound there and belong to project A."""
        return self.assert_owner_has_devices(self.server, hostname, n_arqs)

    def assert_other_tenant_shut_out(self):
        """Project B gets 404 for the server and sees none of its ARQs."""
        other = self.other_tenant_api
        server_id = self.server['id']
        for call, args in (
                (other.get_server, (server_id,)),
                (other.post_server_action, (server_id, {'os-stop': None})),
                (other.post_server_action, (server_id, {
                    'addAccelerator': {'device_profile': self.dp}})),
                (other.delete_server, (server_id,))):
            ex = self.assertRaises(client.OpenStackApiException, call, *args)
            self.assertEqual(404, ex.response.status_code)
        token = identity.make_token(*identity.OTHER_TENANT)
        arqs = self.cyborg.request(
            'GET', '/accelerator_requests', token=token,
            params={'instance': server_id}).json()['arqs']
        self.assertEqual([], arqs)

    def owner_deletes(self):
        """The owner deletes the server: no ARQ of any project is left in
        Cyborg for it, and no allocation in Placement."""
        with self.acting(self.owner_api):
            self._delete_server(self.server)
        self.assert_nothing_left(self.server['id'])
        self.assertEqual([], [a for a in self.cyborg.list_arqs()
                              if a['instance_uuid'] == self.server['id']])

    def owner_hard_reboots(self):
        with self.acting(self.owner_api):
            self._reboot_server(self.server, hard=True)

    def owner_stops_and_starts(self):
        with self.acting(self.owner_api):
            self._stop_server(self.server)
            self._start_server(self.server)

    # Tests

    def test_admin_cold_migrates_then_owner_reboots_restarts_deletes(self):
        self.start_accel_compute('compute2')
        self.assert_other_tenant_shut_out()
        with self.acting(self.cloud_admin_api):
            self._migrate_server(self.server)
            self._confirm_resize(self.server)
        self.assert_owner_has_device('compute2', 1)
        self.owner_hard_reboots()
        self.assert_owner_has_device('compute2', 1)
        self.owner_stops_and_starts()
        self.assert_owner_has_device('compute2', 1)
        self.assert_host_free('compute1')
        self.assert_other_tenant_shut_out()
        self.owner_deletes()
        self.assert_host_free('compute2')

    def test_admin_resizes_owner_reverts_then_admin_evacuates(self):
        self.start_accel_compute('compute2')
        _name, other_flavor = self.create_profile_flavor(attach_base.PROFILE)
        with self.acting(self.cloud_admin_api):
            self._resize_server(self.server, other_flavor)
        with self.acting(self.owner_api):
            self._revert_resize(self.server)
        # One bound set: the source's, on compute1; none on compute2.
        self.assert_owner_has_device('compute1', 1)
        self.assert_host_free('compute2')
        self.owner_hard_reboots()
        self.assert_owner_has_device('compute1', 1)

        service = self.admin_evacuates(self.server, 'compute2')
        self.old_host_comes_back(service)
        self.assert_owner_has_device('compute2', 1)
        self.owner_hard_reboots()
        self.assert_owner_has_device('compute2', 1)
        self.owner_deletes()

    def test_admin_unshelves_and_attaches(self):
        with self.acting(self.owner_api):
            self._shelve_server(self.server)    # offloaded at once
        with self.acting(self.cloud_admin_api):
            self._unshelve_server(self.server)
        self.assert_owner_has_device('compute1', 1)
        self.owner_hard_reboots()
        self.assert_owner_has_device('compute1', 1)

        # The admin attaches a second device to the stopped server; the
        # owner starts it with both.
        with self.acting(self.owner_api):
            self._stop_server(self.server)
        self.accelerator_action(self.cloud_admin_api, self.server,
                                'addAccelerator', self.dp)
        with self.acting(self.owner_api):
            self._start_server(self.server)
        self.assert_owner_has_device('compute1', 2)
        self.owner_stops_and_starts()
        self.assert_owner_has_device('compute1', 2)
        self.assert_other_tenant_shut_out()
        self.owner_deletes()
        self.assert_host_free('compute1')


class ServiceProjectTest(TenancyTest):
    """``[nova_cyborg] arq_project = service`` with a ``[service_user]``
    that holds Cyborg's ``service`` and ``reader`` roles in its project
    (with Cyborg 16 ``member`` too: identity.ARQ_SERVICE_ROLES) and not
    ``admin``: the cloud admin's cold migration and the owner's reboot,
    stop, start and delete keep and then release the devices, every ARQ in
    the service project. (With ``arq_project = server`` such a user could
    neither bind for another project nor see the owner's ARQs.)"""

    ARQ_PROJECT = identity.SERVICE_PROJECT_ID

    def _configure_service_user(self):
        super()._configure_service_user()
        self.flags(token=identity.make_token(
            'nova', identity.SERVICE_PROJECT_ID, identity.ARQ_SERVICE_ROLES),
            group='service_user')
        self.flags(arq_project='service', group='nova_cyborg')

    # One life is enough here: the others are TenancyTest's.
    test_admin_resizes_owner_reverts_then_admin_evacuates = None
    test_admin_unshelves_and_attaches = None
