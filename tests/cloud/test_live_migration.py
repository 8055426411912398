"""An admin live-migrates a user's server between the cloud's hosts.

Each simulated compute host is a process with its own fakelibvirt
connection; the domain goes from one to the other through the shared
domain directory (:mod:`localcloud.migration`). A server without
accelerators proves the way there: the admin (project ``admin``)
live-migrates the owner's server to the other host (chosen by the
scheduler) and back; each time the server is ACTIVE and running on the
new host, its domain belongs to the new host, the old host's copy is gone
and its Placement allocation is on the new host alone. A migration that
fails at the source leaves the server ACTIVE and running on the source.
"""

import os

from localcloud import layout as layout_mod
from tests.cloud import base

#: Migrations with their uuid (the consumer of the source's allocation).
MIGRATIONS_MICROVERSION = '2.59'


class LiveMigrationTest(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if self.layout.computes < 2:
            self.skipTest('live migration needs two compute hosts')

    def plain_flavor(self):
        flavor = self.admin.compute.create_flavor(
            name=base._name('plain'), ram=256, vcpus=1, disk=1)
        self.addCleanup(self.admin.compute.delete_flavor, flavor)
        return flavor.id

    def domain_owner(self, server_id):
        with open(os.path.join(self.layout.domain_xml_dir,
                               server_id + '.host')) as f:
            return f.read()

    def compute_node(self, host):
        roots = self._placement('/resource_providers?name=%s' % host)[
            'resource_providers']
        self.assertEqual(1, len(roots), roots)
        return roots[0]['uuid']

    def migrations(self, server_id):
        response = self.admin.compute.get(
            '/os-migrations', params={'instance_uuid': server_id,
                                      'migration_type': 'live-migration'},
            microversion=MIGRATIONS_MICROVERSION)
        self.assertEqual(200, response.status_code, response.text)
        return response.json()['migrations']

    def live_migrate(self, server_id, status='completed', wait='ACTIVE'):
        """The admin live-migrates the server (the scheduler picks the
        host); waits until the migration is ``status`` and the server
        ``wait``; returns (server, migration)."""
        before = len(self.migrations(server_id))
        response = self._compute(
            self.admin, 'post', '/servers/%s/action' % server_id,
            json={'os-migrateLive': {'host': None,
                                     'block_migration': 'auto'}})
        self.assertEqual(202, response.status_code, response.text)

        def ended():
            migrations = self.migrations(server_id)
            if len(migrations) > before and migrations[0]['status'] in (
                    'completed', 'error', 'failed', 'cancelled'):
                return migrations[0]
        migration = base.wait_until(ended, 'live migration of server %s'
                                    % server_id)
        self.assertEqual(status, migration['status'], migration)
        server = self.wait_for_status(server_id, wait)
        return server, migration

    def assert_on(self, server, host, migration):
        server_id = server['id']
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, server['OS-EXT-STS:power_state'])  # running
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual(host, self.domain_owner(server_id))
        # Nova asks the host's domain.
        self.assertEqual('running', self.diagnostics(server_id)['state'])
        self.assertEqual([self.compute_node(host)],
                         list(self.allocations(server_id)))
        base.wait_until(lambda: not self.allocations(migration['uuid']),
                        'migration %s to release its allocation' %
                        migration['uuid'])
        self.assertEqual('ACTIVE', self.server(server_id, self.owner)[
            'status'])

    def test_plain_server_there_and_back(self):
        server = self.boot(self.plain_flavor())
        server_id = server['id']
        source = server['OS-EXT-SRV-ATTR:host']
        self.assertEqual(source, self.domain_owner(server_id))
        xml = open(self.domain_file(server_id)).read()

        server, migration = self.live_migrate(server_id)
        dest = server['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, dest)
        self.assertEqual((source, dest), (migration['source_compute'],
                                          migration['dest_compute']))
        self.assert_on(server, dest, migration)

        server, migration = self.live_migrate(server_id)
        self.assertEqual((dest, source), (migration['source_compute'],
                                          migration['dest_compute']))
        self.assert_on(server, source, migration)
        # The domain that came back is the guest Nova defined, not a copy
        # the source kept.
        self.assertEqual(xml, open(self.domain_file(server_id)).read())

        self.delete(server_id)
        self.assertFalse(os.path.exists(self.domain_file(server_id)))
        self.assertEqual({}, self.allocations(server_id))

    def test_paused_server_arrives_paused(self):
        server = self.boot(self.plain_flavor())
        server_id = server['id']
        source = server['OS-EXT-SRV-ATTR:host']
        response = self._compute(self.owner, 'post',
                                 '/servers/%s/action' % server_id,
                                 json={'pause': None})
        self.assertEqual(202, response.status_code, response.text)
        self.wait_for_status(server_id, 'PAUSED')

        server, migration = self.live_migrate(server_id, wait='PAUSED')
        self.assertNotEqual(source, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(3, server['OS-EXT-STS:power_state'])  # paused
        self.assertEqual(server['OS-EXT-SRV-ATTR:host'],
                         self.domain_owner(server_id))

        response = self._compute(self.owner, 'post',
                                 '/servers/%s/action' % server_id,
                                 json={'unpause': None})
        self.assertEqual(202, response.status_code, response.text)
        server = self.wait_for_status(server_id, 'ACTIVE')
        self.assertEqual('running', self.diagnostics(server_id)['state'])
        self.delete(server_id)
        self.assertFalse(os.path.exists(self.domain_file(server_id)))

    def test_failed_migration_leaves_the_server_on_the_source(self):
        server = self.boot(self.plain_flavor())
        server_id = server['id']
        source = server['OS-EXT-SRV-ATTR:host']
        marker = os.path.join(self.layout.domain_xml_dir,
                              server_id + layout_mod.MIGRATION_FAIL_SUFFIX)
        with open(marker, 'w') as f:
            f.write('the test makes the source fail the job\n')
        self.addCleanup(lambda: os.path.exists(marker) and os.unlink(marker))

        server, migration = self.live_migrate(server_id, status='failed')
        self.assertFalse(os.path.exists(marker), 'the source did not try')
        self.assertEqual(source, migration['source_compute'])
        self.assert_on(server, source, migration)
        self.delete(server_id)
        self.assertFalse(os.path.exists(self.domain_file(server_id)))
