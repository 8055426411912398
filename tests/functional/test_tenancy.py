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
from tests.functional import base  # noqa: I100

import contextlib  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402

from tests.functional.harness import identity  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
OWNER_PROJECT = identity.OWNER[1]


class TenancyTest(base.AcceleratorTestBase):

    NUM_VFS = 3
    #: Each test is a server's life of many steps.
    TIMEOUT_SCALING_FACTOR = 4

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        self.dp, self.flavor = self.create_profile_flavor(PROFILE)
        # The harness writes no disks: nothing to copy or move aside.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._get_instance_disk_info',
            return_value=[]))
        self.useFixture(fixtures.MockPatch('os.rename'))
        self.server = self.boot(self.flavor, api=self.owner_api)
        self.assert_owner_has_device('compute1', 1)

    # Callers

    @contextlib.contextmanager
    def acting(self, api):
        """Nova's helpers act (and wait) with ``api`` meanwhile."""
        saved = self.api, self.admin_api
        self.api = api
        if api is self.cloud_admin_api:
            self.admin_api = api
        try:
            yield
        finally:
            self.api, self.admin_api = saved

    # What the owner, another tenant and an operator check

    def assert_owner_has_device(self, hostname, n_arqs):
        """The owner's server is ACTIVE on ``hostname`` with its devices
        passed through; its ARQs are Bound there and belong to project A."""
        self.assertEqual(
            'ACTIVE', self.owner_api.get_server(self.server['id'])['status'])
        # The host, as an operator sees it.
        server = self.admin_api.get_server(self.server['id'])
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        arqs = self.assert_accelerated(server, n_arqs)
        rps = set(self.device_rp_uuids(hostname).values())
        self.assertEqual({(OWNER_PROJECT, True)},
                         {(a['project_id'], a['device_rp_uuid'] in rps)
                          for a in arqs})
        return arqs

    def assert_host_free(self, hostname):
        self.assertEqual([], [a for a in self.cyborg.list_arqs()
                              if a['hostname'] == hostname])
        self.assertEqual(
            {0}, {self._get_provider_usages(rp).get('FPGA', 0)
                  for rp in self.device_rp_uuids(hostname).values()})

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
        _name, other_flavor = self.create_profile_flavor(PROFILE)
        with self.acting(self.cloud_admin_api):
            self._resize_server(self.server, other_flavor)
        with self.acting(self.owner_api):
            self._revert_resize(self.server)
        # One bound set: the source's, on compute1; none on compute2.
        self.assert_owner_has_device('compute1', 1)
        self.assert_host_free('compute2')
        self.owner_hard_reboots()
        self.assert_owner_has_device('compute1', 1)

        service = self.admin_api.get_services(
            host='compute1', binary='nova-compute')[0]
        self.computes['compute1'].stop()
        self.admin_api.put_service(service['id'], {'forced_down': 'true'})
        with self.acting(self.cloud_admin_api):
            # Since 2.95 an evacuated server stays stopped on its new host.
            self._evacuate_server(self.server, expected_host='compute2')
        with self.acting(self.owner_api):
            self._start_server(self.server)
        # The old host comes back and cleans up the evacuated server (its
        # devices stay allocated to the server until then).
        self.computes['compute1'].start()
        self.admin_api.put_service(service['id'], {'forced_down': 'false'})
        self._wait_for_assert(
            lambda: self.assert_host_free('compute1'), max_retries=40)
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
        self.cloud_admin_api.post_server_action(
            self.server['id'], {'addAccelerator': {'device_profile': self.dp}})
        self._wait_for_instance_action_event(
            self.server, 'addAccelerator', 'compute_add_accelerator',
            'Success')
        with self.acting(self.owner_api):
            self._start_server(self.server)
        self.assert_owner_has_device('compute1', 2)
        self.owner_stops_and_starts()
        self.assert_owner_has_device('compute1', 2)
        self.assert_other_tenant_shut_out()
        self.owner_deletes()
        self.assert_host_free('compute1')
