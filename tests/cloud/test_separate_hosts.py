"""The cloud's compute hosts are separate hosts: a move cleans up its
source (issue 26).

Each simulated host has its own address and its own instances path, as
separate hosts do (:mod:`localcloud.remotefs`). With one address for all,
Nova took a cold migration for shared storage and left the instance
directory on the source, and a live migration back there failed with
DestinationDiskExists. Here the cloud's admin (project ``admin``) moves
the owner's server with a live-migratable VF: cold migration there and
back, then a live migration; after each move the server is ACTIVE on the
new host with its VF in its domain (the device of its Bound ARQ, on the
new host), and the old host holds no directory of it. A cold migration
reverted leaves no directory on the destination.
"""

import os

from localcloud import configs
from tests.cloud import base

#: Migrations with their uuid and type.
MIGRATIONS_MICROVERSION = '2.59'
#: A VF of the hosts' plain PFs, which may be live migrated.
MIGRATABLE_GROUPS = [{'resources:%s' % configs.MIGRATABLE_RC: '1'}]


class SeparateHostsTest(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if self.layout.computes < 2:
            self.skipTest('moves need two compute hosts')

    def migratable_flavor(self):
        accel = self.admin.accelerator
        name = base._name('profile')
        response = accel.post('/device_profiles', json=[
            {'name': name, 'groups': MIGRATABLE_GROUPS}])
        self.assertEqual(201, response.status_code, response.text)
        self.addCleanup(accel.delete, '/device_profiles/%s' %
                        response.json()['uuid'])
        flavor = self.admin.compute.create_flavor(
            name=base._name('flavor'), ram=256, vcpus=1, disk=1)
        self.addCleanup(self.admin.compute.delete_flavor, flavor)
        self.admin.compute.create_flavor_extra_specs(
            flavor, {'accel:device_profile': name})
        return flavor.id

    def instance_dirs(self, server_id):
        """``{host: [the server's directories in its instances path]}``
        of the hosts that have any (``<uuid>``, ``<uuid>_resize``, ...)."""
        found = {}
        for host in self.layout.hosts:
            path = self.layout.instances_path(host)
            names = sorted(n for n in os.listdir(path)
                           if n.startswith(server_id))
            if names:
                found[host] = names
        return found

    def migrations(self, server_id, kind):
        response = self.admin.compute.get(
            '/os-migrations', params={'instance_uuid': server_id,
                                      'migration_type': kind},
            microversion=MIGRATIONS_MICROVERSION)
        self.assertEqual(200, response.status_code, response.text)
        return response.json()['migrations']

    def action(self, conn, server_id, body, status=202):
        response = self._compute(conn, 'post', '/servers/%s/action' %
                                 server_id, json=body)
        self.assertEqual(status, response.status_code, response.text)

    def cold_migrate(self, server_id):
        """The admin migrates the server (the scheduler picks the host)
        and confirms; returns the server."""
        self.action(self.admin, server_id, {'migrate': None})
        self.wait_for_status(server_id, 'VERIFY_RESIZE')
        self.action(self.admin, server_id, {'confirmResize': None}, 204)
        server = self.wait_for_status(server_id, 'ACTIVE')
        migration = self.migrations(server_id, 'migration')[0]
        self.assertEqual('confirmed', migration['status'], migration)
        return server, migration

    def live_migrate(self, server_id):
        before = len(self.migrations(server_id, 'live-migration'))
        self.action(self.admin, server_id, {'os-migrateLive': {
            'host': None, 'block_migration': 'auto'}})

        def ended():
            migrations = self.migrations(server_id, 'live-migration')
            if len(migrations) > before and migrations[0]['status'] in (
                    'completed', 'error', 'failed', 'cancelled'):
                return migrations[0]
        migration = base.wait_until(ended, 'live migration of server %s'
                                    % server_id)
        self.assertEqual('completed', migration['status'], migration)
        return self.wait_for_status(server_id, 'ACTIVE'), migration

    def assert_devices(self, server_id, host):
        """The server's one ARQ is Bound on ``host``, to a device there,
        and its guest holds that device; returns the ARQ."""
        arqs = base.wait_until(
            lambda: [a for a in self.all_arqs(server_id)
                     if a['state'] == 'Bound' and a['hostname'] == host],
            'server %s\'s ARQ Bound on %s' % (server_id, host))
        # No other ARQ (the other host's is deleted).
        self.assertEqual(arqs, self.all_arqs(server_id))
        self.assertEqual(1, len(arqs), arqs)
        self.assertIn(arqs[0]['device_rp_uuid'],
                      self.device_providers(host))
        self.assertEqual({self.handle(arqs[0])}, self.hostdevs(server_id))
        return arqs[0]

    def assert_moved(self, server, source, migration):
        """ACTIVE and running on the other host with its VF; nothing of
        it left on the source. Returns the new host."""
        server_id = server['id']
        host = server['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, host)
        self.assertEqual((source, host), (migration['source_compute'],
                                          migration['dest_compute']))
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual(1, server['OS-EXT-STS:power_state'])  # running
        self.assertEqual('running', self.diagnostics(server_id)['state'])
        self.assertEqual('ACTIVE', self.server(server_id, self.owner)[
            'status'])
        self.assert_devices(server_id, host)
        # The source's disk holds nothing of the server: no directory, no
        # "_resize" copy; the destination has its directory.
        base.wait_until(lambda: source not in self.instance_dirs(server_id),
                        'server %s\'s directory gone from %s' % (
                            server_id, source))
        self.assertEqual({host: [server_id]}, self.instance_dirs(server_id))
        return host

    def test_cold_migration_there_and_back_then_live_migration(self):
        server = self.boot(self.migratable_flavor())
        server_id = server['id']
        first = server['OS-EXT-SRV-ATTR:host']
        self.assertEqual({first: [server_id]}, self.instance_dirs(server_id))

        server, migration = self.cold_migrate(server_id)
        second = self.assert_moved(server, first, migration)
        server, migration = self.cold_migrate(server_id)
        self.assertEqual(first, self.assert_moved(server, second, migration))

        # The host it left first holds no directory of it: the live
        # migration there finds no disk in its way.
        server, migration = self.live_migrate(server_id)
        self.assertEqual(second, self.assert_moved(server, first,
                                                   migration))

        self.delete(server_id)
        self.assertEqual({}, self.instance_dirs(server_id))
        self.assertEqual([], self.all_arqs(server_id))
        self.assertEqual({}, self.allocations(server_id))

    def test_reverted_cold_migration_leaves_nothing_on_the_destination(self):
        server = self.boot(self.migratable_flavor())
        server_id = server['id']
        source = server['OS-EXT-SRV-ATTR:host']
        arq = self.assert_devices(server_id, source)

        self.action(self.admin, server_id, {'migrate': None})
        server = self.wait_for_status(server_id, 'VERIFY_RESIZE')
        dest = server['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, dest)
        # The source keeps the server's files aside until the end.
        self.assertEqual({source: [server_id + '_resize'],
                          dest: [server_id]}, self.instance_dirs(server_id))
        self.action(self.admin, server_id, {'revertResize': None})
        server = self.wait_for_status(server_id, 'ACTIVE')

        self.assertEqual(source, server['OS-EXT-SRV-ATTR:host'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual('running', self.diagnostics(server_id)['state'])
        self.assertEqual(self.handle(arq), self.handle(
            self.assert_devices(server_id, source)))
        # The destination holds no directory of it (Nova asked the source
        # whether it saw the destination's file: it did not).
        base.wait_until(lambda: dest not in self.instance_dirs(server_id),
                        'server %s\'s directory gone from %s' % (
                            server_id, dest))
        self.assertEqual({source: [server_id]}, self.instance_dirs(server_id))
        self.delete(server_id)
        self.assertEqual({}, self.instance_dirs(server_id))
