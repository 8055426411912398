"""An admin cold-migrates a user's server; the user then deletes it.

Three identities, each in a project of its own, as in a real cloud: the
owner (``primary``), who boots and deletes the server; another tenant
(``alt``), who must see nothing of it; and an admin (``admin``), who
moves it. The accelerator requests (ARQs) of the destination belong to
the owner's project, not to the admin's, so that the owner's later
requests (confirm, delete) find them; once the owner deletes the server
nothing is left: no ARQ, no allocation (neither the server's nor the
migration's on the source), no ``<hostdev>``.
"""

import os

from tempest.common import waiters
from tempest import config
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
import testtools

from tempest_plugin.tests import base

CONF = config.CONF

COLD_MIGRATION = (CONF.compute_feature_enabled.cold_migration and
                  CONF.compute.min_compute_nodes >= 2)


@testtools.skipUnless(COLD_MIGRATION, 'Cold migration is not available, or '
                      '[compute] min_compute_nodes is less than 2.')
class AdminColdMigrationTest(base.AdminMoveTest):

    credentials = ['primary', 'alt', 'admin']

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.alt_servers_client = cls.os_alt.servers_client

    def assert_projects_apart(self):
        projects = {self.owner_project,
                    self.os_alt.credentials.project_id,
                    self.os_admin.credentials.project_id}
        self.assertEqual(3, len(projects),
                         'owner, other tenant and admin share a project')

    def assert_owned(self, server_id, arqs):
        """The ARQs belong to the owner's project."""
        for arq in arqs:
            self.assertEqual(
                self.owner_project, arq.get('project_id'),
                'ARQ %s of server %s is in project %s, not in its owner\'s '
                '%s (the admin who moved it is in %s)' % (
                    arq['uuid'], server_id, arq.get('project_id'),
                    self.owner_project, self.os_admin.credentials.project_id))

    def assert_hidden_from_other_tenant(self, server_id):
        self.assertRaises(lib_exc.NotFound,
                          self.alt_servers_client.show_server, server_id)

    def migrate_as_admin(self, server_id):
        """Boot by the owner is done; the admin migrates. Returns (boot
        ARQs, moved ARQs, source host, migration uuid)."""
        self.assert_projects_apart()
        boot = self.assert_accelerated(server_id, self.profile)
        self.assert_owned(server_id, boot)
        source = self.show_server(server_id)['OS-EXT-SRV-ATTR:host']
        self.assert_hidden_from_other_tenant(server_id)

        self.admin_servers_client.migrate_server(server_id)
        self.wait_for_status(server_id, 'VERIFY_RESIZE')

        moved = self.assert_accelerated(server_id, self.profile,
                                        'VERIFY_RESIZE')
        self.assertFalse(self.uuids(boot) & self.uuids(moved),
                         'The destination reuses the source\'s ARQs')
        self.assertNotEqual(source,
                            self.show_server(server_id)[
                                'OS-EXT-SRV-ATTR:host'])
        self.assert_owned(server_id, moved)
        self.assert_hidden_from_other_tenant(server_id)
        migrations = self.migrations_client.list_migrations(
            instance_uuid=server_id, migration_type='migration')[
                'migrations']
        self.assertEqual(1, len(migrations), migrations)
        return boot, moved, source, migrations[0]['uuid']

    def owner_deletes(self, server_id, arqs, migration_uuid):
        """The owner deletes the server; nothing of it is left."""
        self.servers_client.delete_server(server_id)
        waiters.wait_for_server_termination(self.servers_client, server_id)
        self.assert_released(server_id)
        self.assert_arqs_deleted(self.uuids(arqs))
        self.wait_until(
            lambda: not self.server_allocations(migration_uuid),
            'migration %s to release the source' % migration_uuid)
        self.assertEqual({}, self.server_allocations(migration_uuid))
        xml_dir = CONF.nova_cyborg.domain_xml_dir
        if xml_dir:
            path = os.path.join(xml_dir, '%s.xml' % server_id)
            self.wait_until(lambda: not os.path.exists(path),
                            'domain of server %s undefined' % server_id)
            self.assertFalse(os.path.exists(path),
                             'Server %s is deleted but a domain with its '
                             '<hostdev> is left: %s' % (server_id, path))

    @decorators.idempotent_id('41b18bb1-b31e-40b0-932f-0a5d2b0a2b24')
    def test_owner_deletes_while_resize_to_verify(self):
        server_id = self.create_server(self.flavor)
        boot, moved, _, migration = self.migrate_as_admin(server_id)
        self.owner_deletes(server_id, boot + moved, migration)

    @decorators.idempotent_id('d8265e13-9144-4f4b-89cc-c6daf93ece2c')
    def test_owner_confirms_then_deletes(self):
        server_id = self.create_server(self.flavor)
        boot, moved, _, migration = self.migrate_as_admin(server_id)
        self.servers_client.confirm_resize_server(server_id)
        self.wait_for_status(server_id, 'ACTIVE')
        self.assertEqual(self.uuids(moved), self.uuids(
            self.assert_accelerated(server_id, self.profile)))
        self.assert_arqs_deleted(self.uuids(boot))
        self.owner_deletes(server_id, moved, migration)
