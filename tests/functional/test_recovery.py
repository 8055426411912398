"""A nova-compute that dies in the middle of a move gets its devices back.

The compute is stopped the way a crash stops it: the RPC handler doing the
work is cut short by an exception no ``except Exception`` of Nova's
catches, so none of the failure paths (the rollback of the allocation,
``nova_cyborg.flows.move.resize.undo_swap``) runs; then the service is started
again (``restart_compute_service``), and upstream's ``_init_instance`` finds
the server in its transitional task state.

After the restart, what a user and an operator check: the server's
status, task state and host; its ARQs in Cyborg (state, host, provider);
the ``<hostdev>`` of its domain; the Placement allocations of the server
and of the migration; and that nothing is left on the other host.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import contextlib  # noqa: E402
import importlib  # noqa: E402
import threading  # noqa: E402

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402

from nova_cyborg.model import actions
from nova_cyborg.clients import allocations as nc_allocations  # noqa: E402
from nova_cyborg.flows.attach import compute as nc_attach  # noqa: E402
from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from nova_cyborg.steps import bound_arqs as nc_compute  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_attach  # noqa: E402
from tests.functional import test_lifecycle  # noqa: E402
from tests.functional import test_move  # noqa: E402


class ComputeDied(BaseException):
    """The process died here: no ``except Exception`` runs."""


class ResizeMigratingRecoveryTest(
        test_lifecycle.ServerWithAcceleratorBase):
    """nova-compute dies in RESIZE_MIGRATING, after the source's ARQs were
    parked and the destination's bound (the disk copy)."""

    bound_on = test_move.MoveTest.bound_on
    assert_guest_devices = test_move.MoveTest.assert_guest_devices

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute2')
        # The harness writes no disks: nothing to copy (see test_move).
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._get_instance_disk_info',
            return_value=[]))

    def _die_in_disk_copy(self):
        """Cold-migrate the server; its source compute dies while the
        disks are copied. Returns the migration, still 'migrating'."""
        entered = threading.Event()

        def migrate_disk_and_power_off(*args, **kwargs):
            entered.set()
            raise ComputeDied()
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'migrate_disk_and_power_off',
            side_effect=migrate_disk_and_power_off))
        self.api.post_server_action(self.server['id'], {'migrate': None})
        waits.wait_until(entered.is_set, 'the disk copy to start')
        # Stopping the service waits for its RPC handlers: once it
        # returns, the handler has unwound.
        self.restart_compute_service('compute1')

    def test_restart_gives_the_source_its_devices_back(self):
        old = [arq['uuid'] for arq in self.arqs]
        self._die_in_disk_copy()
        server = self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
                          'OS-EXT-SRV-ATTR:host': 'compute1'})
        # The source's own ARQ is Bound again to compute1's provider; the
        # destination's is gone.
        self.assertEqual(old, [a['uuid'] for a in self.bound_on('compute1')])
        self.assertEqual(old, [a['uuid'] for a in
                               self.cyborg.list_arqs(server['id'])])
        # The guest runs on the source with the source's VF only.
        conn = self.computes['compute1'].driver._host.get_connection()
        self.assertTrue(conn.lookupByUUIDString(server['id']).isActive())
        self.assert_running_on('compute1', moved_from='compute2')
        self.assert_guest_devices(server, self.arqs)
        # The migration holds nothing any more, and is over.
        migration = self._migration(server)
        self.assertEqual({}, self.allocations(migration['uuid']))
        self.assertEqual('error', migration['status'])
        # The server works: a hard reboot keeps the source's device.
        self._reboot_server(self.server, hard=True)
        self.assert_guest_devices(self.api.get_server(server['id']),
                                  self.arqs)

    def _migration(self, server):
        migrations = [m for m in self.admin_api.get_migrations()
                      if m['instance_uuid'] == server['id']]
        self.assertEqual(1, len(migrations))
        return migrations[0]


class AttachRecoveryTest(base.AcceleratorTestBase):
    """nova-compute dies in the middle of addAccelerator or
    removeAccelerator; the action's own cleanup (the ``finally`` that
    clears the task state) does not run, as in a crash."""

    NUM_VFS = 3
    act = test_attach.AttachTest.act
    device_usage = test_attach.AttachTest.device_usage
    assert_plain = test_attach.AttachTest.assert_plain
    last_event = test_attach.AttachTest.last_event

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        self.dp, _flavor = self.create_profile_flavor(test_attach.PROFILE)
        self.plain = self._create_flavor(name='plain')

    def _die_once(self, module, name):
        """The first call of ``module.name`` (a module's or a class's)
        dies; returns an Event set then."""
        entered = threading.Event()
        real_task = nc_attach._task
        real = getattr(module, name)

        @contextlib.contextmanager
        def task(instance, task_state):
            if entered.is_set():
                with real_task(instance, task_state):
                    yield
                return
            instance.refresh()
            yield

        def die(*args, **kwargs):
            if entered.is_set():
                return real(*args, **kwargs)
            entered.set()
            raise ComputeDied()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.flows.attach.compute._task', task))
        self.useFixture(fixtures.MonkeyPatch(
            '%s.%s.%s' % (module.__module__, module.__qualname__, name)
            if isinstance(module, type) else
            '%s.%s' % (module.__name__, name), die))
        return entered

    def _records(self, server):
        meta = objects.Instance.get_by_uuid(
            nova_context.get_admin_context(), server['id'],
            expected_attrs=['system_metadata']).system_metadata
        return sorted(k for k in meta if k.startswith('nova_cyborg_'))

    def _restart_and_check_plain(self, server):
        self.restart_compute_service('compute1')
        server = self._wait_for_server_parameter(
            server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None})
        self.assert_plain(server)
        self.assertEqual([], self._records(server))
        # The server can be acted on again: an attach goes through.
        self.act(server, 'addAccelerator', self.dp)
        self.assertEqual('Success',
                         self.last_event(server, 'addAccelerator')['result'])
        self.assert_accelerated(server, 1)

    def test_restart_mid_attach_rolls_it_back(self):
        """Dies waiting for the bind: the ARQ was created, recorded and
        bound, the device added to the allocation, which is not recorded
        yet."""
        server = self.boot(self.plain)
        entered = self._die_once(nc_compute, 'get_bound_arqs')
        self.act(server, 'addAccelerator', self.dp)
        waits.wait_until(entered.is_set, 'the wait for the bind')
        # Half done: the ARQ exists for the server, its device is in the
        # server's allocation, and the action holds the server.
        waits.wait_until(lambda: self.cyborg.list_arqs(server['id']),
                         'the ARQ bound for the server')
        self.assertEqual(1, self.device_usage())
        self.assertEqual(actions.ADDING,
                         self.api.get_server(server['id'])[
                             'OS-EXT-STS:task_state'])
        self._restart_and_check_plain(server)

    def test_restart_before_the_arqs_exist_rolls_it_back(self):
        """Dies creating the ARQs: the device is in the server's
        allocation already, no ARQ is recorded (nor created)."""
        server = self.boot(self.plain)
        entered = self._die_once(nc_client.CyborgClient, 'create_arqs')
        self.act(server, 'addAccelerator', self.dp)
        waits.wait_until(entered.is_set, 'the ARQs to be created')
        # Half done: the device is in the server's allocation, no ARQ is
        # there to account for it, and the action holds the server.
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        self.assertEqual(1, self.device_usage())
        self.assertEqual(actions.ADDING,
                         self.api.get_server(server['id'])[
                             'OS-EXT-STS:task_state'])
        self._restart_and_check_plain(server)

    def test_restart_mid_detach_completes_it(self):
        """Dies taking the device out of the allocation: the guest let go
        of it and its ARQ is deleted."""
        server = self.boot(self.plain)
        self.act(server, 'addAccelerator', self.dp)
        self.assertEqual('Success',
                         self.last_event(server, 'addAccelerator')['result'])
        self.assert_accelerated(server, 1)
        entered = self._die_once(nc_allocations, 'remove')
        self.act(server, 'removeAccelerator', self.dp)
        waits.wait_until(entered.is_set, 'the allocation to be updated')
        # Half done: the ARQ is gone, its device still in the server's
        # allocation, and the action holds the server.
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        self.assertEqual(1, self.device_usage())
        self.assertEqual(actions.REMOVING,
                         self.api.get_server(server['id'])[
                             'OS-EXT-STS:task_state'])
        self._restart_and_check_plain(server)


class ResizeRevertingRecoveryTest(test_move.TwoHostsBase):
    """The destination's nova-compute dies in the middle of
    ``revert_resize``: before it destroyed the guest, or after (before its
    cast to the source). Upstream leaves the server in RESIZE_REVERTING
    for good; the restarted destination does the revert again
    (:mod:`nova_cyborg.flows.move.revert_recovery`), and it ends on the source
    with
    the server's own, parked, ARQ Bound again."""

    def _die_in_revert(self, target):
        """Cold-migrate the server, then revert; the destination dies in
        ``target`` (the first call; later calls run the real one), and is
        started again with its hypervisor's state."""
        self._migrate_server(self.server)
        self._wait_for_state_change(self.server, 'VERIFY_RESIZE')
        self.assertEqual(1, len(self.bound_on('compute2')))
        module, _sep, attr = target.rpartition('.')
        owner = importlib.import_module(module.rpartition('.')[0])
        cls = getattr(owner, module.rpartition('.')[2])
        real = getattr(cls, attr)
        entered = threading.Event()

        def die_once(*args, **kwargs):
            if entered.is_set():
                return real(*args, **kwargs)
            entered.set()
            raise ComputeDied()
        self.useFixture(fixtures.MonkeyPatch(target, die_once))
        self.api.post_server_action(self.server['id'], {'revertResize': None})
        waits.wait_until(entered.is_set, 'the revert to reach %s' % attr)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('resize_reverting',
                         server['OS-EXT-STS:task_state'])
        self.restart_compute_service('compute2', keep_hypervisor_state=True)

    def assert_reverted(self):
        server = self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
                          'OS-EXT-SRV-ATTR:host': 'compute1'})
        # The server's own ARQ is Bound on compute1 again; compute2's is
        # gone, its device and guest too.
        server = self.assert_running_on('compute1', moved_from='compute2')
        self.assert_guest_devices(server, self.bound_on('compute1'))
        self.assertEqual([], self.bound_on('compute2'))
        conn = self.computes['compute2'].driver._host.get_connection()
        self.assertNotIn(server['id'], [
            dom.UUIDString() for dom in conn.listAllDomains(0)])
        (migration,) = [m for m in self.admin_api.get_migrations()
                        if m['instance_uuid'] == server['id']]
        self.assertEqual('reverted', migration['status'])
        self.assertEqual({}, self.allocations(migration['uuid']))
        # The server works: a hard reboot keeps its device.
        self._reboot_server(self.server, hard=True)
        self.assert_guest_devices(self.api.get_server(server['id']),
                                  self.arqs)

    def test_died_before_destroying_the_guest(self):
        self._die_in_revert('nova.virt.libvirt.driver.LibvirtDriver.destroy')
        self.assert_reverted()

    def test_died_after_destroying_the_guest(self):
        self._die_in_revert('nova.compute.resource_tracker.ResourceTracker.'
                            'drop_move_claim_at_dest')
        self.assert_reverted()
