"""The destination's nova-compute dies mid-live-migration (issue #16).

The VF server's live migration runs (the destination's ARQs are bound,
the destination claimed its devices); the destination's nova-compute
stops, then the migration fails at the source. The source rolls back on
its own: the server is ACTIVE on it with its devices, the destination's
ARQs are deleted, no allocation is left on the destination, the
migration record says the migration failed. The destination started
again holds nothing of the server.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import threading  # noqa: E402

from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402

from nova_cyborg.model import bookkeeping  # noqa: E402
from tests.functional import live_base  # noqa: E402
from tests.functional import test_live_migration  # noqa: E402

waits = live_base.waits


class DestinationDiesTest(test_live_migration.VFHosts):

    def assert_nothing_on_destination(self, arqs, migration_uuid):
        """ACTIVE on the source with its devices (the source domain holds
        the source's ``<hostdev>``); no ARQ under the destination's alias,
        none on the destination; no allocation (the instance's or the
        migration's) on the destination."""
        self.assertEqual(arqs, self.assert_on_host(
            self.server, self.src, self.dst))
        self.assertEqual([], self.cyborg.list_arqs(
            bookkeeping.alias(self.server['id'])))
        dst_tree = set(self.device_rp_uuids(self.dst).values()) | {
            self._get_provider_uuid_by_host(self.dst)}
        self.assertEqual(set(), dst_tree & set(
            self.allocations(self.server['id'])))
        self.assertEqual({}, self.allocations(migration_uuid))
        for rp in dst_tree:
            self.assertEqual({}, self.placement.get(
                '/resource_providers/%s/allocations' % rp,
                version='1.17').body['allocations'])

    def test_destination_dies_then_migration_fails(self):
        arqs = self.assert_on_host(self.server, self.src, self.dst)
        entered, died = threading.Event(), threading.Event()

        def dies_then_fails(domain, dest):
            entered.set()
            # Blocks until the destination's nova-compute stopped; then
            # libvirt reports the job failed (the destination's QEMU went
            # with its host).
            self.assertTrue(died.wait(waits.DEADLINE))
            domain.fail_job()
            return True
        self.during_migration = dies_then_fails
        self.admin_starts_live_migration(self.server)
        waits.wait_until(entered.is_set, 'the migration to run')
        # The destination's ARQs were created and bound for it.
        self.assertNotEqual([], self.cyborg.list_arqs(
            bookkeeping.alias(self.server['id'])))
        self.computes[self.dst].stop()
        self.force_down(self.dst, True)
        died.set()

        with self.acting(self.cloud_admin_api):
            self._wait_for_migration_status(self.server, ['failed'])
            self._wait_for_state_change(self.server, 'ACTIVE')
        mig = self.last_migration(self.server)
        self.assertIn(mig['status'], ('failed', 'error'))
        migration_uuid = objects.Migration.get_by_id(
            nova_context.get_admin_context(), mig['id']).uuid
        self.assert_nothing_on_destination(arqs, migration_uuid)

        # The destination starts again and settles.
        self.restart_compute_service(self.dst)
        self.force_down(self.dst, False)
        waits.wait_until(
            lambda: self.compute_service(self.dst)['state'] == 'up',
            'nova-compute on %s up' % self.dst)
        self.computes[self.dst].manager.update_available_resource(
            nova_context.get_admin_context())
        self.assertFalse(self.runs_domain(self.dst, self.server))
        self.assert_nothing_on_destination(arqs, migration_uuid)
