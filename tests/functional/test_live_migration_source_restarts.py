"""The source's nova-compute stops in the middle of a live migration.

The VF server's live migration has started (the destination's ARQs are
bound under the server's other owner, the destination claimed its
devices, the server's allocation is the destination's and the source's is
held by the migration) when the source's nova-compute stops: nothing of
its own rollback runs. When it starts again, upstream's
``_reset_live_migration`` aborts the migration, sets it to 'error' and
clears the task state, and leaves the allocations and the destination as
they are. Here the server gets its allocation on the source back and the
destination's ARQs go: the server is ACTIVE on its source with its own
devices, the admin and the owner see it so, and nothing is left on the
destination.

When the source stops after the guest reached the destination (libvirt
undefined the source's domain), the guest keeps its devices there: the
destination's ARQs stay Bound, the server's allocation is the
destination's only (the migration's, on the source, goes), the source's
ARQs go if nothing had deleted them yet, and the server is in ERROR with
a fault naming the migration and its destination.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import threading  # noqa: E402

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402

from nova_cyborg.model import bookkeeping  # noqa: E402
from tests.functional import live_base  # noqa: E402
from tests.functional import test_live_migration  # noqa: E402
from tests.functional import test_live_migration_dest_dies  # noqa: E402
from tests.functional import test_recovery  # noqa: E402

waits = live_base.waits


class SourceRestartsTest(test_live_migration.VFHosts):

    assert_nothing_on_destination = (
        test_live_migration_dest_dies.DestinationDiesTest.
        assert_nothing_on_destination)

    def test_source_restarts_mid_live_migration(self):
        arqs = self.assert_on_host(self.server, self.src, self.dst)
        entered = threading.Event()

        def dies(*args, **kwargs):
            # The source's nova-compute process ends here: no rollback.
            entered.set()
            raise test_recovery.ComputeDied()
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._live_migration',
            side_effect=dies))
        self.admin_starts_live_migration(self.server)
        waits.wait_until(entered.is_set, 'the live migration to start')
        self.assertNotEqual([], self.cyborg.list_arqs(
            bookkeeping.alias(self.server['id'])))

        self.restart_compute_service(self.src)
        with self.acting(self.cloud_admin_api):
            self._wait_for_server_parameter(
                self.server, {'status': 'ACTIVE',
                              'OS-EXT-STS:task_state': None,
                              'OS-EXT-SRV-ATTR:host': self.src})
        mig = self.last_migration(self.server)
        self.assertEqual('error', mig['status'])
        migration_uuid = objects.Migration.get_by_id(
            nova_context.get_admin_context(), mig['id']).uuid
        self.assert_nothing_on_destination(arqs, migration_uuid)
        # The owner's server works: a hard reboot keeps its device.
        with self.acting(self.owner_api):
            self._reboot_server(self.server, hard=True)
        self.assertEqual(arqs, self.assert_on_host(
            self.server, self.src, self.dst))

    # The guest reached the destination, then the source stopped.

    def source_dies_after_the_guest_left(self, target):
        """The source's nova-compute ends at ``target`` (patched) once
        libvirt migrated the guest; then it starts again. Returns the
        destination's ARQs and the migration's UUID."""
        self.assert_on_host(self.server, self.src, self.dst)
        entered = threading.Event()

        def dies(*args, **kwargs):
            entered.set()
            raise test_recovery.ComputeDied()
        with fixtures.MockPatch(target, side_effect=dies):
            self.admin_starts_live_migration(self.server)
            waits.wait_until(entered.is_set, 'the guest to leave the source')
        self.assertFalse(self.runs_domain(self.src, self.server))
        self.assertTrue(self.runs_domain(self.dst, self.server))
        dest_arqs = [a for a in self.cyborg.list_arqs()
                     if a['hostname'] == self.dst]
        self.assertNotEqual([], dest_arqs)
        mig = self.last_migration(self.server)
        self.assertEqual('running', mig['status'])

        self.restart_compute_service(self.src)
        with self.acting(self.cloud_admin_api):
            self._wait_for_server_parameter(
                self.server, {'status': 'ERROR',
                              'OS-EXT-STS:task_state': None})
        return dest_arqs, objects.Migration.get_by_id(
            nova_context.get_admin_context(), mig['id']).uuid

    def assert_left_for_destination(self, dest_arqs, migration_uuid):
        # Cyborg: the destination's ARQs Bound there, nothing on the
        # source.
        self.assertEqual(
            sorted((a['uuid'], 'Bound', self.dst) for a in dest_arqs),
            sorted((a['uuid'], a['state'], a['hostname'])
                   for a in self.cyborg.list_arqs(self.owner_uuid(
                       self.server))))
        self.assertEqual([], [a for a in self.cyborg.list_arqs()
                              if a['hostname'] == self.src])
        # Placement: the server holds the destination's providers only,
        # the migration nothing, no device of the source is allocated.
        dst_tree = set(self.device_rp_uuids(self.dst).values()) | {
            self._get_provider_uuid_by_host(self.dst)}
        allocs = self.allocations(self.server['id'])
        self.assertTrue(set(allocs) <= dst_tree, allocs)
        self.assertEqual({a['device_rp_uuid'] for a in dest_arqs},
                         set(allocs) - {self._get_provider_uuid_by_host(
                             self.dst)})
        self.assertEqual({}, self.allocations(migration_uuid))
        for rp in self.device_rp_uuids(self.src).values():
            self.assertEqual({}, self.placement.get(
                '/resource_providers/%s/allocations' % rp,
                version='1.17').body['allocations'])
        # The guest still runs on the destination with its device.
        self.assertTrue(self.runs_domain(self.dst, self.server))
        self.assertFalse(self.runs_domain(self.src, self.server))
        conn = self.computes[self.dst].driver._host.get_connection()
        bdfs, _mdevs = self.xml_hostdevs(conn.lookupByUUIDString(
            self.server['id']).XMLDesc(0))
        self.assertEqual(sorted(self.arq_bdf(a) for a in dest_arqs), bdfs)
        # The admin, then the owner, read why and where it went.
        for api in (self.admin_api, self.owner_api):
            server = api.get_server(self.server['id'])
            self.assertEqual('ERROR', server['status'])
            self.assertIn(migration_uuid, server['fault']['message'])
            self.assertIn(self.dst, server['fault']['message'])
        self.assertEqual('error', self.last_migration(self.server)['status'])

    def test_source_restarts_after_the_owner_switched(self):
        # The source's ARQs were deleted and the destination's owner became
        # the server's; the destination was never told.
        died = self.source_dies_after_the_guest_left(
            'nova.compute.rpcapi.ComputeAPI.'
            'post_live_migration_at_destination')
        self.assert_left_for_destination(*died)

    def test_source_restarts_before_post_live_migration(self):
        # Nothing of nova-cyborg ran after libvirt migrated the guest: the
        # source's ARQs go at the restart.
        died = self.source_dies_after_the_guest_left(
            'nova.compute.manager.ComputeManager._post_live_migration')
        self.assert_left_for_destination(*died)
