"""Live migration of servers with accelerators (issue #16).

Two hosts whose devices the sidecar marks live-migratable. The cloud
admin, in a third project, live-migrates the owner's server; the owner
and an operator then check where it runs and with what
(:class:`tests.functional.live_base.LiveMigrationBase`).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import threading  # noqa: E402

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from nova_cyborg.model import aliases  # noqa: E402
from nova_cyborg.model import bookkeeping  # noqa: E402
from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from nova_cyborg import exception as nc_exception  # noqa: E402
from sidecar import privileged  # noqa: E402
from tests.functional import cyborg_calls  # noqa: E402
from tests.functional import live_base  # noqa: E402
from tests.functional import test_sidecar_live_migratable as marks  # noqa

#: (Cyborg takes only CUSTOM_ traits in a profile: the live migration asks
#: the scheduler for HW_PCI_LIVE_MIGRATABLE itself.)
VF_PROFILE = [{'resources:FPGA': '1'}]
VGPU_PROFILE = [{'resources:VGPU': '1'}]


class VFHosts(live_base.LiveMigrationBase):
    """Two hosts with VFs of the generic PCI driver, ``live_migratable``
    in the sidecar's ``[pci] device_spec``; the owner's server on one."""

    def setUp(self):
        super().setUp()
        for host in ('compute1', 'compute2'):
            self.start_accel_compute(host, drivers=('pci',),
                                     extra_config=marks.vf_spec(True))
            self.wait_migratable(host)
        self.dp, self.flavor = self.create_profile_flavor(VF_PROFILE)
        with self.acting(self.owner_api):
            self.server = self.boot(self.flavor)
        self.src = self.admin_api.get_server(
            self.server['id'])['OS-EXT-SRV-ATTR:host']
        self.dst = ({'compute1', 'compute2'} - {self.src}).pop()


class LiveMigrateVFTest(VFHosts):

    def test_there_and_back(self):
        arqs = self.assert_on_host(self.server, self.src, self.dst)
        # Scheduler-chosen destination.
        self.admin_live_migrates(self.server)
        moved = self.assert_on_host(self.server, self.dst, self.src)
        self.assertNotEqual({a['uuid'] for a in arqs},
                            {a['uuid'] for a in moved})
        # The XML the destination got holds the destination's VF.
        dest, xml = self.destination_xml[-1]
        self.assertEqual(self.dst, dest)
        self.assertEqual([self.arq_bdf(moved[0])],
                         self.xml_hostdevs(xml)[0])
        # Its ARQs are under its alias now: what nova-cyborg-patch revert
        # refuses for (every cell's view, and the destination's own).
        self.assertEqual([self.server['id']], self.aliased())
        self.assertEqual([self.server['id']], self.aliased(self.dst))
        self.assertEqual([], self.aliased(self.src))
        # Back, to a named host.
        self.admin_live_migrates(self.server, host=self.src)
        self.assert_on_host(self.server, self.src, self.dst)
        self.assertEqual([self.dst, self.src],
                         [d for d, _x in self.destination_xml])
        # The second move bound them under the server's own UUID.
        self.assertEqual([], self.aliased())
        self.assertEqual([], self.aliased(self.src))

    def test_delete_after_live_migration(self):
        # The ARQs are under the server's alias: its delete asks Cyborg
        # under both owners (a server that never moved, once:
        # tests.functional.test_cyborg_calls), and none is left.
        self.admin_live_migrates(self.server)
        alias = bookkeeping.alias(self.server['id'])
        self.assertEqual(1, len(self.cyborg.list_arqs(alias)))
        calls = self.useFixture(cyborg_calls.CyborgCalls())
        with self.acting(self.owner_api):
            self._delete_server(self.server)
        self.assertEqual(
            [('DELETE', '/accelerator_requests', (('instance', owner),))
             for owner in (self.server['id'], alias)],
            calls.take_deletes(2))
        self.assertEqual([], self.cyborg.list_arqs(alias))
        self.assert_nothing_left(self.server['id'])

    def aliased(self, host=None):
        context = nova_context.get_admin_context()
        found = aliases.on_host(context, host) if host else \
            aliases.in_cells(context)
        return [i.uuid for i in found]


class VGPUHosts(live_base.LiveMigrationBase):
    """Two hosts with a vGPU-capable GPU (nvidia-11 of fakelibvirt's) of
    the sidecar's GPU driver, its type in ``[gpu]
    live_migratable_mdev_types``; the owner's server with a vGPU on
    one."""

    def setUp(self):
        super().setUp()
        self.simulate_mdev_kernel()
        for host in ('compute1', 'compute2'):
            self.start_accel_compute(
                host, num_mdevcap=1, drivers=('gpu',),
                mdev_types=(marks.MDEV_TYPE,),
                extra_config=marks.GPU_MIGRATABLE)
            self.wait_migratable(host)
        self.dp, self.flavor = self.create_profile_flavor(VGPU_PROFILE)
        with self.acting(self.owner_api):
            self.server = self.boot(self.flavor)
        self.src = self.admin_api.get_server(
            self.server['id'])['OS-EXT-SRV-ATTR:host']
        self.dst = ({'compute1', 'compute2'} - {self.src}).pop()

    def simulate_mdev_kernel(self):
        """The rest of what the kernel does with the sidecars' mdev writes
        (as test_faults_input.KernelMdevs, for each host by its sysfs
        root): a created mdev appears in the host's sysfs tree (the base
        adds it to libvirt), a removed one leaves both."""
        create, remove = privileged.create_mdev, privileged.remove_mdev

        def host_of(root):
            (host,) = [h for h, s in self.sidecars.items()
                       if s.sysfs_root == root]
            return host

        def create_mdev(root, parent, mdev_type, mdev_uuid):
            create(root, parent, mdev_type, mdev_uuid)
            self.hosts[host_of(root)].create_mdev(parent, mdev_type,
                                                  mdev_uuid)

        def remove_mdev(root, mdev_uuid):
            remove(root, mdev_uuid)
            host = host_of(root)
            for f in self.hosts[host].functions.values():
                for t in f.mdev_types:
                    if mdev_uuid in t.mdevs:
                        self.hosts[host].remove_mdev(f.address, t.type_id,
                                                     mdev_uuid)
            for name in self._mdev_names(host, mdev_uuid):
                del self._kernels[host].mdev_info.devices[name]
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.privileged.create_mdev', create_mdev))
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.privileged.remove_mdev', remove_mdev))

    def _mdev_names(self, hostname, mdev_uuid):
        return [name for name in self._kernels[hostname].mdev_info.devices
                if name.startswith('mdev_' + mdev_uuid.replace('-', '_'))]

    def mdev_exists(self, hostname, mdev_uuid):
        return bool(self._mdev_names(hostname, mdev_uuid))


class LiveMigrateVGPUTest(VGPUHosts):

    def test_there_and_back(self):
        (arq,) = self.assert_on_host(self.server, self.src, self.dst)
        old_mdev = arq['attach_handle_uuid']
        self.assertTrue(self.mdev_exists(self.src, old_mdev))
        self.admin_live_migrates(self.server)
        (moved,) = self.assert_on_host(self.server, self.dst, self.src)
        new_mdev = moved['attach_handle_uuid']
        # The destination XML names the destination's mdev.
        self.assertEqual([new_mdev],
                         self.xml_hostdevs(self.destination_xml[-1][1])[1])
        self.assertTrue(self.mdev_exists(self.dst, new_mdev))
        # The source's mdev is removed (its ARQ was deleted).
        live_base.waits.wait_until(
            lambda: not self.mdev_exists(self.src, old_mdev),
            'mdev %s removed from %s' % (old_mdev, self.src))
        self.admin_live_migrates(self.server, host=self.src)
        self.assert_on_host(self.server, self.src, self.dst)
        live_base.waits.wait_until(
            lambda: not self.mdev_exists(self.dst, new_mdev),
            'mdev %s removed from %s' % (new_mdev, self.dst))


class ForceCompleteTest(VFHosts):

    def test_force_complete_pauses_the_guest_and_moves_its_device(self):
        # Post-copy is refused (a device's state cannot be fetched page by
        # page), so Nova's force_complete pauses the guest: the devices'
        # state is copied with the rest while it is stopped, as VFIO
        # migration does at every switch-over.
        arqs = self.assert_on_host(self.server, self.src, self.dst)
        paused = threading.Event()
        real_suspend = fakelibvirt.Domain.suspend

        def suspend(domain):
            real_suspend(domain)
            paused.set()
        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Domain, 'suspend', new=suspend))

        def wait_for_pause(domain, dest):
            # Running (Nova's monitor runs the queued force-complete then),
            # until the admin forced it to complete.
            domain._job_type = fakelibvirt.VIR_DOMAIN_JOB_UNBOUNDED
            self.assertTrue(paused.wait(live_base.waits.DEADLINE))
            return False
        self.during_migration = wait_for_pause
        mig = self.running_live_migration(self.server)
        self.cloud_admin_api.force_complete_migration(self.server['id'],
                                                      mig['id'])
        with self.acting(self.cloud_admin_api):
            self._wait_for_migration_status(self.server, ['completed'])
            server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertTrue(paused.is_set())
        # Running again on the destination.
        self.assertEqual(1, server['OS-EXT-STS:power_state'])
        moved = self.assert_on_host(self.server, self.dst, self.src)
        self.assertNotEqual({a['uuid'] for a in arqs},
                            {a['uuid'] for a in moved})
        with self.acting(self.owner_api):
            self.assertEqual('ACTIVE',
                             self.api.get_server(self.server['id'])['status'])


class LiveMigrationFailsTest(VFHosts):
    """Each failure ends with the server ACTIVE on its source with its
    devices, and nothing of the destination left."""

    def assert_rolled_back(self, arqs):
        self.assertEqual(arqs, self.assert_on_host(
            self.server, self.src, self.dst))
        self.assertEqual([], self.cyborg.list_arqs(
            bookkeeping.alias(self.server['id'])))

    def test_bind_fails_at_destination(self):
        arqs = self.assert_on_host(self.server, self.src, self.dst)
        real_bind = nc_client.CyborgClient.bind_arqs

        def bind(client, bindings, project_id=None):
            if any(b['instance_uuid'] != self.server['id']
                   for b in bindings.values()):
                raise nc_exception.AcceleratorRequestBindingFailed(
                    arqs=list(bindings), msg='no device left on the host')
            return real_bind(client, bindings, project_id=project_id)
        self.useFixture(fixtures.MockPatchObject(
            nc_client.CyborgClient, 'bind_arqs', new=bind))
        self.admin_live_migrates(self.server, host=self.dst, status='error')
        self.assert_rolled_back(arqs)
        reasons = self.action_tracebacks(self.server)
        self.assertIn('binding the accelerators on %s failed' % self.dst,
                      reasons)
        self.assertIn('no device left on the host', reasons)

    def test_migration_fails(self):
        arqs = self.assert_on_host(self.server, self.src, self.dst)

        def fail(domain, dest):
            # libvirt reports the job failed, as in Nova's own tests.
            domain.fail_job()
            return True
        self.during_migration = fail
        self.admin_live_migrates(self.server, status='failed')
        self.assert_rolled_back(arqs)

    def test_abort(self):
        arqs = self.assert_on_host(self.server, self.src, self.dst)
        aborted = threading.Event()
        real_abort = fakelibvirt.Domain.abortJob

        def abort(domain):
            real_abort(domain)
            domain._job_type = fakelibvirt.VIR_DOMAIN_JOB_CANCELLED
            aborted.set()
        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Domain, 'abortJob', new=abort))

        def wait_for_abort(domain, dest):
            # Blocks the migration until the admin aborts it.
            self.assertTrue(aborted.wait(live_base.waits.DEADLINE))
            return True
        self.during_migration = wait_for_abort
        mig = self.running_live_migration(self.server)
        self.cloud_admin_api.delete_migration(self.server['id'], mig['id'])
        with self.acting(self.cloud_admin_api):
            self._wait_for_migration_status(self.server, ['cancelled'])
            self._wait_for_state_change(self.server, 'ACTIVE')
        self.assert_rolled_back(arqs)

    def test_post_copy_refused(self):
        arqs = self.assert_on_host(self.server, self.src, self.dst)
        self.flags(live_migration_permit_post_copy=True, group='libvirt')
        self.admin_live_migrates(self.server, status='error')
        self.assert_rolled_back(arqs)
        # The source's pre-check says why, in the live-migration action.
        self.assertIn('[libvirt] live_migration_permit_post_copy is True',
                      self.action_tracebacks(self.server))
