"""Capability versions in a mixed cloud: live migration and added devices.

A compute patched by nova-cyborg reports one trait per version it serves
(``nova_cyborg.model.capability.VERSIONS``): ``CUSTOM_NOVA_CYBORG_1_0`` for the
moves of a server with accelerators, ``CUSTOM_NOVA_CYBORG_1_1`` for its
live migration too. Here a host stands for an older or an unpatched
compute by not reporting some of them (its resource tracker leaves them
out and they are removed from Placement, as the upgrade guide has an
operator do): that is all that Nova's API and scheduler see of such a
compute.

Two hosts with live-migratable VFs; the owner's server on one. A cloud
admin of a third project moves it; the owner and an operator check that a
refused move changed nothing.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402

import fixtures  # noqa: E402
from nova.compute import resource_tracker  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402

from tests.functional import test_live_migration  # noqa: E402

V1_0 = 'CUSTOM_NOVA_CYBORG_1_0'
V1_1 = 'CUSTOM_NOVA_CYBORG_1_1'
V1_2 = 'CUSTOM_NOVA_CYBORG_1_2'
UNPATCHED = (V1_0, V1_1, V1_2)
OLDER = (V1_1, V1_2)


class MixedVersionsTest(test_live_migration.VFHosts):

    def setUp(self):
        self.hidden = {}
        real = resource_tracker.ResourceTracker._get_traits

        def _get_traits(rt, context, nodename, provider_tree):
            traits = real(rt, context, nodename, provider_tree)
            return [t for t in traits if t not in self.hidden.get(rt.host,
                                                                  ())]
        self.useFixture(fixtures.MockPatchObject(
            resource_tracker.ResourceTracker, '_get_traits', _get_traits))
        super().setUp()

    # Steps

    def host_reports_only(self, hostname, hidden):
        """``hostname`` stops reporting the ``hidden`` traits; they are
        removed from its compute node provider."""
        self.hidden[hostname] = set(hidden)
        rp = self._get_provider_uuid_by_host(hostname)
        self._set_provider_traits(rp, sorted(
            set(self._get_provider_traits(rp)) - set(hidden)))

    def snapshot(self):
        """What a refused move must not change."""
        server = self.admin_api.get_server(self.server['id'])
        arqs = sorted(
            (a['uuid'], a['state'], a['hostname'], a['device_rp_uuid'],
             json.dumps(a['attach_handle_info'], sort_keys=True))
            for a in self.cyborg.list_arqs(self.owner_uuid(server)))
        return (server['status'], server['OS-EXT-SRV-ATTR:host'],
                server['OS-EXT-STS:task_state'], arqs,
                self.allocations(self.server['id']))

    def assert_live_migration_refused(self, host, *words):
        before = self.snapshot()
        ex = self.assertRaises(
            client.OpenStackApiException,
            self.admin_starts_live_migration, self.server, host)
        self.assertEqual(400, ex.response.status_code)
        message = ex.response.json()['badRequest']['message']
        for word in words:
            self.assertIn(word, message)
        self.assertEqual(before, self.snapshot())
        self.assertEqual([], self.admin_api.get_migrations())
        self.assert_on_host(self.server, self.src, self.dst)
        return message

    # Tests

    def test_every_version_reported(self):
        for host in (self.src, self.dst):
            self.assertTrue({V1_0, V1_1} <= set(self._get_provider_traits(
                self._get_provider_uuid_by_host(host))))

    def test_live_migration_from_unpatched_source_refused(self):
        self.host_reports_only(self.src, UNPATCHED)
        self.assert_live_migration_refused(
            None, 'source host %s' % self.src, V1_1)

    def test_live_migration_to_older_host_refused(self):
        self.host_reports_only(self.dst, OLDER)
        # Named: refused with the reason.
        self.assert_live_migration_refused(
            self.dst, 'destination host %s' % self.dst, V1_1,
            'older nova-cyborg')
        # Scheduled: the older host is never chosen; nothing moves, and
        # the admin reads why no host was found.
        self.admin_starts_live_migration(self.server)
        with self.acting(self.cloud_admin_api):
            self._wait_for_migration_status(self.server, ['error'])
            self._wait_for_server_parameter(self.server, {
                'status': 'ACTIVE', 'OS-EXT-STS:task_state': None})
        self.assert_on_host(self.server, self.src, self.dst)
        self.assertIn('Only hosts reporting %s, %s (the nova-cyborg '
                      'capabilities this server needs)' % (V1_0, V1_1),
                      self.action_tracebacks(self.server))

    def test_added_only_accelerator_never_evacuated_to_unpatched(self):
        # A server whose only device was added with addAccelerator.
        plain = self._create_flavor(name='plain')
        with self.acting(self.owner_api):
            server = self._create_server(
                flavor_id=plain, image_uuid=base.IMAGE, networks='none')
        self.accelerator_action(self.owner_api, server, 'addAccelerator',
                                self.dp)
        src = self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']
        dst = ({'compute1', 'compute2'} - {src}).pop()
        arqs = self.assert_owner_has_devices(server, src, 1)
        self.host_reports_only(dst, UNPATCHED)
        service = self.compute_service(src)
        self.computes[src].stop()
        self.admin_api.put_service(service['id'], {'forced_down': 'true'})
        self.admin_api.post_server_action(server['id'], {'evacuate': {}})
        with self.acting(self.admin_api):
            self._wait_for_migration_status(server, ['error'])
        server = self.admin_api.get_server(server['id'])
        self.assertEqual((src, None), (
            server['OS-EXT-SRV-ATTR:host'], server['OS-EXT-STS:task_state']))
        self.assertEqual(
            sorted((a['uuid'], 'Bound', src) for a in arqs),
            sorted((a['uuid'], a['state'], a['hostname'])
                   for a in self.cyborg.list_arqs(server['id'])))

    def test_unshelve_to_unpatched_host_refused(self):
        # The owner shelves the server (offloaded at once); a cloud admin of
        # a third project unshelves it to a host that is not patched:
        # refused by nova-api with the reason, nothing changes.
        with self.acting(self.owner_api):
            self._shelve_server(self.server)
        self.host_reports_only(self.dst, UNPATCHED)
        before = self.snapshot()
        self.assertEqual(('SHELVED_OFFLOADED', None, None),
                         before[:3])
        api = self.cloud_admin_api
        saved, api.microversion = api.microversion, '2.91'
        try:
            ex = self.assertRaises(
                client.OpenStackApiException, api.post_server_action,
                self.server['id'], {'unshelve': {'host': self.dst}})
        finally:
            api.microversion = saved
        self.assertEqual(409, ex.response.status_code)
        message = ex.response.json()['conflictingRequest']['message']
        self.assertIn('destination host %s' % self.dst, message)
        self.assertIn(V1_0, message)
        self.assertEqual(before, self.snapshot())
        self.assertEqual('SHELVED_OFFLOADED', self.owner_api.get_server(
            self.server['id'])['status'])
        # Unshelved without a host, it lands on the patched one.
        with self.acting(self.owner_api):
            self.owner_api.post_server_action(self.server['id'],
                                              {'unshelve': None})
            self._wait_for_state_change(self.server, 'ACTIVE')
        self.assert_on_host(self.server, self.src, self.dst)
