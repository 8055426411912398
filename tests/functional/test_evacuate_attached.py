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
from tests.functional import attach_base  # noqa: I100

from nova.tests.functional.api import client  # noqa: E402

from nova_cyborg.steps import evacuation as evacuate  # noqa: E402


class EvacuateAttachedTest(attach_base.AttachTestBase):

    #: Each test is a server's life of many steps.
    TIMEOUT_SCALING_FACTOR = 4

    def setUp(self):
        super().setUp()
        self.plain = self._create_flavor(name='plain')
        self.create_profile_flavor(attach_base.PROFILE, name='extra')
        self.without_disks()

    # Steps

    def owner_attaches(self, server, dp, stopped):
        if stopped:
            with self.acting(self.owner_api):
                self._stop_server(server)
        self.accelerator_action(self.owner_api, server, 'addAccelerator', dp)
        if stopped:
            with self.acting(self.owner_api):
                self._start_server(server)

    # What the owner and the operator check

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
            [('Bound', hostname, True, attach_base.OWNER_PROJECT)] * n_arqs,
            [(a['state'], a['hostname'], a['device_rp_uuid'] in rps,
              a['project_id']) for a in arqs])
        self.assertEqual(sorted(self.arq_bdf(a) for a in arqs),
                         self.hostdev_bdfs(server))
        self.assertTrue(set(self.hostdev_bdfs(server)) <=
                        self.handle_bdfs(hostname))
        return arqs

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
        self.accelerator_action(self.owner_api, server, 'removeAccelerator',
                                'extra')
        with self.acting(self.owner_api):
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
