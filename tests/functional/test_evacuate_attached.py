"""Evacuation takes the accelerators attached with addAccelerator along.

The owner (project A) boots a server and attaches an accelerator to it;
its host fails and a cloud admin of project C evacuates the server. On
the new host the server gets its flavor's accelerators (upstream) and,
when the new host has a free device for it, the attached one too: new
ARQs in project A, Bound to the new host's providers, claimed in
Placement there, passed through to the rebuilt guest. Nothing of the
failed host is plugged into it; once that host comes back, nothing of the
server is left there. When the new host has no device for the attached
profile, the evacuation still succeeds with the flavor's accelerators and
an instance action event in error names the profile that was dropped.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import contextlib  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402

from nova_cyborg import evacuate  # noqa: E402
from tests.functional.harness import identity  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
OWNER_PROJECT = identity.OWNER[1]


class EvacuateAttachedTest(base.AcceleratorTestBase):

    NUM_VFS = 3
    #: Each test is a server's life of many steps.
    TIMEOUT_SCALING_FACTOR = 4

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        self.dp, self.accel_flavor = self.create_profile_flavor(PROFILE)
        self.plain = self._create_flavor(name='plain')
        self.cyborg.create_device_profile('extra', PROFILE)
        # The harness writes no disks: nothing to copy or move aside.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._get_instance_disk_info',
            return_value=[]))

    # Steps

    def owner_attaches(self, server, dp, stopped):
        with self.acting(self.owner_api):
            if stopped:
                self._stop_server(server)
            self.owner_api.post_server_action(
                server['id'], {'addAccelerator': {'device_profile': dp}})
            self._wait_for_instance_action_event(
                server, 'addAccelerator', 'compute_add_accelerator',
                'Success')
            if stopped:
                self._start_server(server)

    def admin_evacuates(self, server, to_host):
        """compute1 fails; the cloud admin evacuates; the owner starts the
        server (since 2.95 it stays stopped on its new host)."""
        service = self.admin_api.get_services(
            host='compute1', binary='nova-compute')[0]
        self.computes['compute1'].stop()
        self.admin_api.put_service(service['id'], {'forced_down': 'true'})
        with self.acting(self.cloud_admin_api):
            self._evacuate_server(server, expected_host=to_host)
        with self.acting(self.owner_api):
            self._start_server(server)
        return service

    def old_host_comes_back(self, service):
        self.computes['compute1'].start()
        self.admin_api.put_service(service['id'], {'forced_down': 'false'})
        self._wait_for_assert(
            lambda: self.assert_host_free('compute1'), max_retries=40)

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

    # What the owner and the operator check

    def assert_owner_has_devices(self, server, hostname, n_arqs):
        """ACTIVE on ``hostname``, one hostdev per ARQ; the ARQs Bound to
        the host's providers, in the owner's project."""
        self.assertEqual(
            'ACTIVE', self.owner_api.get_server(server['id'])['status'])
        server = self.admin_api.get_server(server['id'])
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        arqs = self.assert_accelerated(server, n_arqs)
        rps = set(self.device_rp_uuids(hostname).values())
        self.assertEqual({(OWNER_PROJECT, True)},
                         {(a['project_id'], a['device_rp_uuid'] in rps)
                          for a in arqs})
        return arqs

    def assert_guest_on(self, server, hostname, n_arqs):
        """Before the failed host comes back (its part of the allocation
        stays until then): the ARQs are Bound to ``hostname``'s providers
        in the owner's project, and the guest has exactly their BDFs."""
        server = self.admin_api.get_server(server['id'])
        self.assertEqual(
            ('ACTIVE', hostname),
            (server['status'], server['OS-EXT-SRV-ATTR:host']))
        arqs = self.cyborg.list_arqs(server['id'])
        rps = set(self.device_rp_uuids(hostname).values())
        self.assertEqual(
            [('Bound', hostname, True, OWNER_PROJECT)] * n_arqs,
            [(a['state'], a['hostname'], a['device_rp_uuid'] in rps,
              a['project_id']) for a in arqs])
        self.assertEqual(sorted(self.arq_bdf(a) for a in arqs),
                         self.hostdev_bdfs(server))
        self.assertTrue(set(self.hostdev_bdfs(server)) <=
                        self.handle_bdfs(hostname))
        return arqs

    def assert_host_free(self, hostname):
        self.assertEqual([], [a for a in self.cyborg.list_arqs()
                              if a['hostname'] == hostname])
        self.assertEqual(
            {0}, {self._get_provider_usages(rp).get('FPGA', 0)
                  for rp in self.device_rp_uuids(hostname).values()})

    def evacuation_events(self, server):
        action = [a for a in self.admin_api.get_instance_actions(
            server['id']) if a['action'] == 'evacuate'][0]
        details = self.admin_api.get_instance_action_details(
            server['id'], action['request_id'])
        return {e['event']: e for e in details['events']}

    def profiles(self, arqs):
        return sorted(a['device_profile_name'] for a in arqs)

    # Tests

    def test_flavor_and_attached_accelerators_follow_the_server(self):
        server = self.boot(self.accel_flavor, api=self.owner_api)
        self.owner_attaches(server, 'extra', stopped=True)
        old = self.assert_owner_has_devices(server, 'compute1', 2)
        self.start_accel_compute('compute2')

        service = self.admin_evacuates(server, 'compute2')
        arqs = self.assert_guest_on(server, 'compute2', 2)
        self.assertEqual(sorted([self.dp, 'extra']), self.profiles(arqs))
        self.assertFalse({a['uuid'] for a in old} & {a['uuid'] for a in arqs})
        self.assertNotIn(evacuate.EVENT, self.evacuation_events(server))
        self.old_host_comes_back(service)
        self.assert_owner_has_devices(server, 'compute2', 2)

        # The bookkeeping moved along: the owner detaches it on the new
        # host, and the allocation goes with it.
        with self.acting(self.owner_api):
            self._stop_server(server)
            self.owner_api.post_server_action(
                server['id'], {'removeAccelerator': {'device_profile':
                                                     'extra'}})
            self._wait_for_instance_action_event(
                server, 'removeAccelerator', 'compute_remove_accelerator',
                'Success')
            self._start_server(server)
        arqs = self.assert_owner_has_devices(server, 'compute2', 1)
        self.assertEqual([self.dp], self.profiles(arqs))
        with self.acting(self.owner_api):
            self._delete_server(server)
        self.assert_nothing_left(server['id'])
        self.assert_host_free('compute2')

    def test_attached_only_accelerator_follows_a_running_server(self):
        server = self.boot(self.plain, api=self.owner_api)
        self.owner_attaches(server, 'extra', stopped=False)
        self.assert_owner_has_devices(server, 'compute1', 1)
        self.start_accel_compute('compute2')

        service = self.admin_evacuates(server, 'compute2')
        arqs = self.assert_guest_on(server, 'compute2', 1)
        self.assertEqual(['extra'], self.profiles(arqs))
        self.assertNotIn(evacuate.EVENT, self.evacuation_events(server))
        self.old_host_comes_back(service)
        self.assert_owner_has_devices(server, 'compute2', 1)
        with self.acting(self.owner_api):
            self._reboot_server(server, hard=True)
        self.assert_owner_has_devices(server, 'compute2', 1)
        with self.acting(self.owner_api):
            self._delete_server(server)
        self.assert_nothing_left(server['id'])

    def test_no_device_on_the_new_host_drops_the_attached_one(self):
        server = self.boot(self.accel_flavor, api=self.owner_api)
        self.owner_attaches(server, 'extra', stopped=True)
        self.assert_owner_has_devices(server, 'compute1', 2)
        # One device there: the flavor's takes it.
        self.start_accel_compute('compute2', num_vfs=1)

        service = self.admin_evacuates(server, 'compute2')
        event = self.evacuation_events(server)[evacuate.EVENT]
        self.assertEqual('Error', event['result'])
        self.assertIn('extra', event['details'])
        self.assertIn('no free device', event['details'])
        self.old_host_comes_back(service)
        arqs = self.assert_owner_has_devices(server, 'compute2', 1)
        self.assertEqual([self.dp], self.profiles(arqs))
        # Nothing attached is left to detach.
        with self.acting(self.owner_api):
            self._stop_server(server)
        ex = self.assertRaises(
            client.OpenStackApiException, self.owner_api.post_server_action,
            server['id'], {'removeAccelerator': {'device_profile': 'extra'}})
        self.assertEqual(409, ex.response.status_code)
        self.assertIn('No accelerator of device profile', str(ex))
