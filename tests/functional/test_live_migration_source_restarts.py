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
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import threading  # noqa: E402

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402

from nova_cyborg import bookkeeping  # noqa: E402
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
