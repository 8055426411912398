"""Lifecycle operations on a server with an accelerator.

One test per operation that upstream Nova 34 supports for a server whose
flavor names a device profile: reboot (soft, hard), stop/start,
pause/unpause, lock/unlock, snapshot, backup, rebuild, shelve, shelve
offload and unshelve, evacuate and delete. After each one, what a user or
operator checks: the server's status and host; the ARQ Bound to a provider
of that host, whose VF is the ``<hostdev>`` of the host's domain and is
allocated in Placement; and, when the server moved or was offloaded,
nothing left on the old host's providers.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import os  # noqa: E402

import fixtures  # noqa: E402
from nova.image import glance  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


class ServerWithAcceleratorBase(base.AcceleratorTestBase):
    """A server with one FPGA VF on compute1, and what a user checks."""

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        _name, self.flavor = self.create_profile_flavor(PROFILE)
        self.server = self.boot(self.flavor)
        self.assertEqual('compute1', self.server['OS-EXT-SRV-ATTR:host'])
        self.arqs = self.assert_accelerated(self.server, 1)

    # What a user checks after an operation

    def _fpga_usage(self, hostname):
        """FPGA units in use on each of a host's device providers."""
        return {name: self._get_provider_usages(rp).get('FPGA', 0)
                for name, rp in self.device_rp_uuids(hostname).items()}

    def assert_running_on(self, hostname, same_arqs=True, moved_from=None):
        """The server is ACTIVE on ``hostname`` with its FPGA.

        :param same_arqs: True if the operation kept the boot's ARQs (and
            so the same VF), False if it must have made new ones.
        :param moved_from: the host the server left: its ARQs are gone and
            its device providers allocate nothing.
        """
        server = self.api.get_server(self.server['id'])
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        arqs = self.assert_accelerated(server, 1)
        rps = set(self.device_rp_uuids(hostname).values())
        self.assertIn(arqs[0]['device_rp_uuid'], rps)
        # The whole allocation is on this host's tree.
        tree = set(self._get_all_rp_uuids_in_a_tree(
            self._get_provider_uuid_by_host(hostname)))
        self.assertTrue(set(self.allocations(server['id'])) <= tree)
        self.assertEqual(1, sum(self._fpga_usage(hostname).values()))
        old_uuids = {arq['uuid'] for arq in self.arqs}
        if same_arqs:
            self.assertEqual(old_uuids, {arq['uuid'] for arq in arqs})
            self.assertEqual([self.arq_bdf(a) for a in self.arqs],
                             [self.arq_bdf(a) for a in arqs])
        else:
            self.assertEqual(set(), old_uuids & {a['uuid'] for a in arqs})
        if moved_from:
            self.assert_host_free(moved_from)
        return server

    def assert_host_free(self, hostname):
        """No ARQ bound on the host, nothing allocated on its devices."""
        self.assertEqual(
            [], [arq for arq in self.cyborg.list_arqs()
                 if arq['hostname'] == hostname])
        self.assertEqual({0}, set(self._fpga_usage(hostname).values()))

    def assert_arqs_kept(self, status):
        """In a non-running state: the same ARQs, still Bound."""
        server = self._wait_for_state_change(self.server, status)
        arqs = self.cyborg.list_arqs(self.server['id'])
        self.assertEqual([(a['uuid'], 'Bound', 'compute1')
                          for a in self.arqs],
                         [(a['uuid'], a['state'], a['hostname'])
                          for a in arqs])
        self.assertEqual(1, sum(self._fpga_usage('compute1').values()))
        return server


class LifecycleTest(ServerWithAcceleratorBase):

    # Operations on the same host

    def test_soft_reboot(self):
        self._reboot_server(self.server)
        self.assert_running_on('compute1')

    def test_hard_reboot(self):
        self._reboot_server(self.server, hard=True)
        self.assert_running_on('compute1')

    def test_stop_start(self):
        self._stop_server(self.server)
        self.assert_arqs_kept('SHUTOFF')
        self._start_server(self.server)
        self.assert_running_on('compute1')

    def test_rescue_keeps_the_device(self):
        # Upstream rebuilds the rescue guest without accel_info. Rescue
        # saves the domain XML in the instance directory, which the
        # harness never creates (it writes no disks).
        from nova.conf import CONF
        os.makedirs(os.path.join(CONF.instances_path, self.server['id']),
                    exist_ok=True)
        self._rescue_server(self.server)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('RESCUE', server['status'])
        self.assertEqual([self.arq_bdf(a) for a in self.arqs],
                         self.hostdev_bdfs(server))
        self._unrescue_server(self.server)
        self.assert_running_on('compute1')

    def test_host_reboot_keeps_the_device(self):
        # The host reboots: libvirt comes back without the domain, and
        # nova-compute brings the server back (resume_guests_state_on_
        # host_boot), which upstream does without accel_info.
        self.flags(resume_guests_state_on_host_boot=True)
        self.restart_compute_service(
            'compute1', keep_hypervisor_state=False,
            pci_info=fakelibvirt.HostPCIDevicesInfo(
                num_pci=0, num_pfs=self.NUM_PFS, num_vfs=self.NUM_VFS))
        self.assert_running_on('compute1')

    def test_pause_unpause(self):
        self.api.post_server_action(self.server['id'], {'pause': {}})
        self.assert_arqs_kept('PAUSED')
        self.api.post_server_action(self.server['id'], {'unpause': {}})
        self._wait_for_state_change(self.server, 'ACTIVE')
        self.assert_running_on('compute1')

    def test_suspend_resume(self):
        # Upstream refuses suspend for a server with accelerators. The VF
        # is unplugged before the memory is saved, plugged back on resume.
        self._suspend_server(self.server)
        self.assert_arqs_kept('SUSPENDED')
        self.assertEqual([], self.hostdev_bdfs(self.server))
        self._resume_server(self.server)
        self.assert_running_on('compute1')

    def test_live_migration_is_refused_with_a_reason(self):
        self.start_accel_compute('compute2')
        ex = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            self.server['id'], {'os-migrateLive': {
                'host': 'compute2', 'block_migration': 'auto'}})
        self.assertEqual(400, ex.response.status_code)
        # Its FPGA is not marked live-migratable (test_live_migration_refused)
        self.assertIn('does not have trait HW_PCI_LIVE_MIGRATABLE', str(ex))
        self.assertIn('Cold migrate the server instead', str(ex))
        self.assertEqual([], self.admin_api.get_migrations())
        self.assert_running_on('compute1')
        self.assert_host_free('compute2')

    def test_lock_unlock(self):
        self.api.post_server_action(self.server['id'], {'lock': {}})
        self.assertTrue(self.api.get_server(self.server['id'])['locked'])
        self.assert_running_on('compute1')
        self.api.post_server_action(self.server['id'], {'unlock': {}})
        self.assertFalse(self.api.get_server(self.server['id'])['locked'])
        self.assert_running_on('compute1')

    def _fake_disk_copy(self):
        # The harness has no disk files to copy (see setUp): the libvirt
        # driver's snapshot runs for real except the qemu-img copy.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._live_snapshot'))

    def _assert_image_made(self, body, name):
        self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None})
        image = glance.get_default_image_service().show(
            None, body['image_id'])
        self.assertEqual(name, image['name'])
        self.assertEqual(self.server['id'],
                         image['properties']['instance_uuid'])

    def test_snapshot(self):
        self._fake_disk_copy()
        body = self.api.post_server_action(
            self.server['id'], {'createImage': {'name': 'accel-snap'}})
        self._assert_image_made(body, 'accel-snap')
        self.assert_running_on('compute1')

    def test_backup(self):
        self._fake_disk_copy()
        # Nova's fake Glance ignores the filters of the rotation's image
        # list: a rotation above its dozen images deletes none of them.
        body = self.api.post_server_action(
            self.server['id'], {'createBackup': {
                'name': 'accel-backup', 'backup_type': 'daily',
                'rotation': 100}})
        self._assert_image_made(body, 'accel-backup')
        self.assert_running_on('compute1')

    def test_rebuild_same_image(self):
        self._rebuild_server(self.server, base.IMAGE)
        self.assert_running_on('compute1')

    def test_shelve_unshelve(self):
        # Shelved but not offloaded: the server keeps its host and devices.
        self.flags(shelved_offload_time=-1)
        self._shelve_server(self.server, 'SHELVED')
        self.assert_arqs_kept('SHELVED')
        self._unshelve_server(self.server)
        self.assert_running_on('compute1')

    def test_delete(self):
        self._delete_server(self.server)
        self.assert_nothing_left(self.server['id'])
        self.assert_host_free('compute1')

    # Operations that move or offload the server

    def test_shelve_offload_unshelve_elsewhere(self):
        self.start_accel_compute('compute2')
        self._shelve_server(self.server)    # offloaded at once
        server = self._wait_for_server_parameter(
            self.server, {'status': 'SHELVED_OFFLOADED',
                          'OS-EXT-SRV-ATTR:host': None})
        # Offloaded: no ARQ, no allocation, no domain on the old host.
        self.assert_nothing_left(server['id'])
        self.assert_host_free('compute1')
        conn = self.computes['compute1'].driver._host.get_connection()
        self.assertEqual([], conn.listAllDomains())

        self.api.post_server_action(
            server['id'], {'unshelve': {'host': 'compute2'}})
        self._wait_for_state_change(server, 'ACTIVE')
        self.assert_running_on('compute2', same_arqs=False,
                               moved_from='compute1')

    def test_evacuate(self):
        self.start_accel_compute('compute2')
        service = self.compute_service('compute1')
        self.computes['compute1'].stop()
        self.admin_api.put_service(service['id'], {'forced_down': 'true'})

        # Since 2.95 an evacuated server stays stopped on its new host.
        self._evacuate_server(self.server, expected_host='compute2')
        arqs = self.cyborg.list_arqs(self.server['id'])
        self.assertEqual([('Bound', 'compute2')],
                         [(a['state'], a['hostname']) for a in arqs])
        self._start_server(self.server)
        # The old host comes back and cleans up the evacuated server.
        self.computes['compute1'].start()
        self.admin_api.put_service(service['id'], {'forced_down': 'false'})
        self._wait_for_assert(
            lambda: self.assert_host_free('compute1'), max_retries=40)
        self.assert_running_on('compute2', same_arqs=False,
                               moved_from='compute1')
        conn = self.computes['compute1'].driver._host.get_connection()
        self.assertEqual([], conn.listAllDomains())
