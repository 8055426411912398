"""An admin live-migrates a user's server with an accelerator, and back.

Two identities, each in a project of its own: the owner (``primary``),
who boots, checks and deletes the server, and an admin (``admin``), who
moves it. The device must be live-migratable: its provider carries
``HW_PCI_LIVE_MIGRATABLE`` (the sidecar sets it from its configuration;
the local cloud's hosts each have a PF whose VFs are reported so, with
resource class ``CUSTOM_MIGRATABLE_VF``). After each move the server is
ACTIVE on the other host with the destination's device: its accelerator
requests (ARQs) are Bound to a provider of the destination, in the
owner's project, the guest's ``<hostdev>`` is their attach handle, the
allocation is on the destination alone; the source's ARQs are deleted.
A live migration binds the destination's ARQs under the server's other
owner in Cyborg (its UUID or its alias, ``nova_cyborg.model.bookkeeping``), so
the server's ARQs are looked up under both. Once the owner deletes the
server nothing is left. A server whose device is not live-migratable
(the cloud's FPGAs) is refused with 400 naming its ARQ, and nothing
changes.
"""

import os

from tempest.common import waiters
from tempest import config
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
import testtools

from nova_cyborg.model import bookkeeping
from tempest_plugin.tests import base

CONF = config.CONF

LIVE_MIGRATION = (CONF.compute_feature_enabled.live_migration and
                  CONF.compute.min_compute_nodes >= 2)
TRAIT = 'HW_PCI_LIVE_MIGRATABLE'
#: The local cloud's live-migratable VFs (localcloud.configs).
MIGRATABLE_RC = 'CUSTOM_MIGRATABLE_VF'
MIGRATABLE_GROUPS = [{'resources:%s' % MIGRATABLE_RC: '1'}]
ENDED = ('completed', 'error', 'failed', 'cancelled')
#: In the local cloud's domain directory, ``<server uuid><FAIL_SUFFIX>``
#: makes the source fail the next live migration of the server's domain
#: (localcloud.migration).
FAIL_SUFFIX = '.fail-migration'


@testtools.skipUnless(LIVE_MIGRATION, 'Live migration is not available, or '
                      '[compute] min_compute_nodes is less than 2.')
class AdminLiveMigrationTest(base.AdminMoveTest):

    credentials = ['primary', 'admin']

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        providers = [
            rp for rp in cls.resource_providers_client.list_resource_providers(
                resources='%s:1' % MIGRATABLE_RC)['resource_providers']
            if TRAIT in cls.resource_providers_client.
            list_resource_provider_traits(rp['uuid'])['traits']]
        if len({rp['root_provider_uuid'] for rp in providers}) < 2:
            raise cls.skipException(
                'No two compute hosts have a free %s provider with %s: the '
                'cloud has no live-migratable device to test with' % (
                    MIGRATABLE_RC, TRAIT))
        cls.migratable = cls.create_device_profile(MIGRATABLE_GROUPS)
        cls.migratable_flavor = cls.create_flavor(cls.migratable)

    # -- reading -----------------------------------------------------------

    def list_arqs(self, server_id):
        """The server's ARQs under either of its owners in Cyborg."""
        arqs = []
        for owner in bookkeeping.owners(server_id):
            arqs.extend(super().list_arqs(owner))
        return arqs

    def host_of(self, provider):
        return self.resource_providers_client.show_resource_provider(
            provider)['root_provider_uuid']

    def resources(self, consumer):
        """``{provider: resources}`` of a consumer's allocations."""
        return {rp: allocation['resources'] for rp, allocation in
                self.server_allocations(consumer).items()}

    def migrations(self, server_id):
        return self.migrations_client.list_migrations(
            instance_uuid=server_id,
            migration_type='live-migration')['migrations']

    # -- acting and checking -------------------------------------------------

    def live_migrate(self, server_id, status=('completed',)):
        """The admin live-migrates the server (the scheduler picks the
        host) and waits for the migration to end in one of ``status``;
        returns it."""
        before = len(self.migrations(server_id))
        self.admin_servers_client.live_migrate_server(
            server_id, host=None, block_migration='auto')

        def ended():
            migrations = self.migrations(server_id)
            return len(migrations) > before and migrations[0][
                'status'] in ENDED
        self.wait_until(ended, 'live migration of server %s' % server_id)
        migration = self.migrations(server_id)[0]
        self.assertIn(migration['status'], status, migration)
        self.wait_for_status(server_id, 'ACTIVE')
        return migration

    def assert_moved(self, server_id, source, before, migration):
        """The server is ACTIVE on the other host with its devices there;
        the source's ARQs and the migration's allocation are gone."""
        server = self.show_server(server_id)
        dest = server['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, dest)
        self.assertEqual((source, dest), (migration['source_compute'],
                                          migration['dest_compute']))
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        # The owner sees the server ACTIVE.
        self.assertEqual('ACTIVE', self.servers_client.show_server(
            server_id)['server']['status'])
        self.assert_arqs_deleted(self.uuids(before))
        arqs = self.assert_devices(server_id, self.migratable)
        self.assertFalse(self.uuids(before) & self.uuids(arqs))
        compute_node = self.resource_providers_client.list_resource_providers(
            name=dest)['resource_providers'][0]['uuid']
        for arq in arqs:
            self.assertEqual(dest, arq['hostname'], arq)
            self.assertEqual(compute_node, self.host_of(
                arq['device_rp_uuid']), arq)
            self.assertEqual(self.owner_project, arq.get('project_id'), arq)
        self.wait_until(
            lambda: not self.server_allocations(migration['uuid']),
            'migration %s to release the source' % migration['uuid'])
        self.assertEqual({}, self.server_allocations(migration['uuid']))
        return dest, arqs

    def assert_devices(self, server_id, profile):
        """As ``assert_accelerated``, but the ARQs may be bound under the
        server's alias (after a live migration); returns them."""
        arqs = self.list_arqs(server_id)
        self.assertEqual(profile.device_count, len(arqs), arqs)
        owners = bookkeeping.owners(server_id)
        self.assertEqual(1, len({arq['instance_uuid'] for arq in arqs}),
                         'ARQs of server %s under two owners: %s' % (
                             server_id, arqs))
        for arq in arqs:
            self.assertEqual('Bound', arq['state'], arq)
            self.assertIn(arq['instance_uuid'], owners, arq)
            self.assertEqual(profile.name, arq['device_profile_name'], arq)
            self.assertEqual('PCI', arq['attach_handle_type'], arq)
        self.assert_allocated(server_id, profile, arqs)
        self.assert_domain_hostdevs(server_id, arqs)
        return arqs

    @decorators.idempotent_id('5f0f5a5e-8f0e-4d44-9a43-0a6c1f6b7d21')
    def test_live_migratable_device_there_and_back(self):
        server_id = self.create_server(self.migratable_flavor)
        source = self.show_server(server_id)['OS-EXT-SRV-ATTR:host']
        boot = self.assert_accelerated(server_id, self.migratable)

        migration = self.live_migrate(server_id)
        dest, moved = self.assert_moved(server_id, source, boot, migration)

        migration = self.live_migrate(server_id)
        back_host, back = self.assert_moved(server_id, dest, moved,
                                            migration)
        self.assertEqual(source, back_host)

        self.servers_client.delete_server(server_id)
        waiters.wait_for_server_termination(self.servers_client, server_id)
        self.assert_released(server_id)
        self.assert_arqs_deleted(self.uuids(back))
        self.assert_domain_gone(server_id)

    def assert_domain_gone(self, server_id):
        xml_dir = CONF.nova_cyborg.domain_xml_dir
        if not xml_dir:
            return
        path = os.path.join(xml_dir, '%s.xml' % server_id)
        self.wait_until(lambda: not os.path.exists(path),
                        'domain of server %s undefined' % server_id)
        self.assertFalse(os.path.exists(path), path)

    @decorators.idempotent_id('c2a4e0f3-6b1d-4e8a-9f57-3d2b8e1c0a46')
    def test_failed_migration_leaves_the_device_on_the_source(self):
        xml_dir = CONF.nova_cyborg.domain_xml_dir
        if not xml_dir:
            raise self.skipException(
                '[nova_cyborg] domain_xml_dir is not set: not the local '
                'cloud, whose hosts can be made to fail a migration')
        server_id = self.create_server(self.migratable_flavor)
        source = self.show_server(server_id)['OS-EXT-SRV-ATTR:host']
        boot = self.assert_accelerated(server_id, self.migratable)
        allocations = self.resources(server_id)
        marker = os.path.join(xml_dir, server_id + FAIL_SUFFIX)
        with open(marker, 'w') as f:
            f.write('tempest makes the source fail the migration\n')
        self.addCleanup(
            lambda: os.path.exists(marker) and os.unlink(marker))

        migration = self.live_migrate(server_id, status=('failed', 'error'))
        self.assertFalse(os.path.exists(marker),
                         'The source never started migrating the guest')
        self.assertEqual(source, migration['source_compute'])
        server = self.show_server(server_id)
        self.assertEqual(('ACTIVE', source, None), (
            server['status'], server['OS-EXT-SRV-ATTR:host'],
            server['OS-EXT-STS:task_state']))
        # The destination's ARQs are deleted; the source's stay Bound to
        # the same devices, in the guest.
        self.wait_until(
            lambda: self.uuids(self.list_arqs(server_id)) == self.uuids(boot),
            'the destination ARQs of server %s deleted' % server_id)
        arqs = self.assert_devices(server_id, self.migratable)
        self.assertEqual(
            sorted((a['uuid'], a['state'], a['hostname'], a['device_rp_uuid'],
                    self.arq_handle(a)) for a in boot),
            sorted((a['uuid'], a['state'], a['hostname'], a['device_rp_uuid'],
                    self.arq_handle(a)) for a in arqs))
        self.wait_until(
            lambda: not self.server_allocations(migration['uuid']),
            'migration %s to release the destination' % migration['uuid'])
        self.assertEqual({}, self.server_allocations(migration['uuid']))
        self.assertEqual(allocations, self.resources(server_id))

        self.delete_server_and_assert_released(server_id)
        self.assert_domain_gone(server_id)

    @decorators.idempotent_id('0b8f4c1d-3e52-4a57-b1c9-7d3f0e2a6c94')
    def test_device_not_live_migratable_is_refused(self):
        server_id = self.create_server(self.flavor)
        host = self.show_server(server_id)['OS-EXT-SRV-ATTR:host']
        arqs = self.assert_accelerated(server_id, self.profile)
        allocations = self.server_allocations(server_id)

        error = self.assertRaises(
            lib_exc.BadRequest, self.admin_servers_client.live_migrate_server,
            server_id, host=None, block_migration='auto')
        message = str(error)
        for arq in arqs:
            self.assertIn(arq['uuid'], message)
        self.assertIn(self.profile.name, message)

        server = self.show_server(server_id)
        self.assertEqual(('ACTIVE', host, None), (
            server['status'], server['OS-EXT-SRV-ATTR:host'],
            server['OS-EXT-STS:task_state']))
        self.assertEqual(
            sorted((a['uuid'], a['state'], a['device_rp_uuid']) for a in arqs),
            sorted((a['uuid'], a['state'], a['device_rp_uuid'])
                   for a in self.assert_accelerated(server_id, self.profile)))
        self.assertEqual(allocations, self.server_allocations(server_id))
        self.assertEqual([], self.migrations(server_id))
        self.delete_server_and_assert_released(server_id)
