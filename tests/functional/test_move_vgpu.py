"""Cold migration of a server with a vGPU, confirmed and reverted.

A cold migration powers the guest off on the source and unbinds its ARQs
there (``nova_cyborg.flows.move.resize``) while the source's definition stays
until the move is confirmed; Cyborg asks the sidecar to remove the unbound
vGPU's mdev, which only that shut-off definition still names. The cloud admin,
in a third project, migrates the owner's server; the owner and an
operator then check where it runs, with which mdev, and that no mdev is
left behind on either host (:class:`tests.functional.test_live_migration.
VGPUHosts`).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402

from tests.functional.harness import neutron_faults  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_live_migration as tlm  # noqa: E402


class ColdMigrateVGPUTest(tlm.VGPUHosts):

    def setUp(self):
        super().setUp()
        # The harness writes no disks: no instance directory to move
        # aside (as test_move.MoveTest, and upstream's resize tests on
        # the libvirt driver).
        self.useFixture(fixtures.MockPatch('os.rename'))

    def admin_migrates(self):
        """The cloud admin cold-migrates the owner's server; returns the
        mdev it had."""
        (arq,) = self.assert_on_host(self.server, self.src, self.dst)
        self.assertTrue(self.mdev_exists(self.src, arq['attach_handle_uuid']))
        self.cloud_admin_api.post_server_action(self.server['id'],
                                                {'migrate': None})
        with self.acting(self.cloud_admin_api):
            server = self._wait_for_state_change(self.server,
                                                 'VERIFY_RESIZE')
        self.assertEqual(self.dst, server['OS-EXT-SRV-ATTR:host'])
        return arq['attach_handle_uuid']

    def mdevs(self, hostname):
        return [name for name in self._kernels[hostname].mdev_info.devices
                if name.startswith('mdev_')]

    def test_confirm(self):
        old_mdev = self.admin_migrates()
        self.cloud_admin_api.post_server_action(self.server['id'],
                                                {'confirmResize': None})
        with self.acting(self.cloud_admin_api):
            self._wait_for_state_change(self.server, 'ACTIVE')
        (moved,) = self.assert_on_host(self.server, self.dst, self.src)
        self.assertNotEqual(old_mdev, moved['attach_handle_uuid'])
        self.assertTrue(self.mdev_exists(self.dst,
                                         moved['attach_handle_uuid']))
        waits.wait_until(lambda: not self.mdevs(self.src),
                         'no mdev left on %s' % self.src)
        self.assertEqual(1, len(self.mdevs(self.dst)))

    def test_revert(self):
        self.admin_migrates()
        self.cloud_admin_api.post_server_action(self.server['id'],
                                                {'revertResize': None})
        with self.acting(self.cloud_admin_api):
            self._wait_for_state_change(self.server, 'ACTIVE')
        # Back on the source, running with the mdev of its ARQ bound there
        # again: the one its domain names exists.
        (back,) = self.assert_on_host(self.server, self.src, self.dst)
        self.assertTrue(self.runs_domain(self.src, self.server))
        self.assertTrue(self.mdev_exists(self.src,
                                         back['attach_handle_uuid']))
        self.assertEqual(1, len(self.mdevs(self.src)))
        waits.wait_until(lambda: not self.mdevs(self.dst),
                         'no mdev left on %s' % self.dst)

    def test_revert_failing_on_the_destination_keeps_the_vgpu(self):
        # Neutron fails while the destination tears down: the server is in
        # ERROR there, its guest still running with its mdev, whose ARQ
        # is still Bound there (tests/functional/test_revert_failures.py
        # for a VF).
        self.admin_migrates()
        (arq,) = self.assert_on_host_in_verify_resize()
        with neutron_faults.TeardownFails(self.dst):
            self.cloud_admin_api.post_server_action(self.server['id'],
                                                    {'revertResize': None})
            with self.acting(self.cloud_admin_api):
                self._wait_for_state_change(self.server, 'ERROR')
        self.assertTrue(self.runs_domain(self.dst, self.server))
        self.assertTrue(self.mdev_exists(self.dst, arq['attach_handle_uuid']))
        self.assertEqual([(arq['uuid'], 'Bound', self.dst)], [
            (a['uuid'], a['state'], a['hostname'])
            for a in self.cyborg.list_arqs(self.server['id'])])
        # The operator's reset-state and hard reboot: the same mdev.
        self.cloud_admin_api.post_server_action(
            self.server['id'], {'os-resetState': {'state': 'active'}})
        with self.acting(self.cloud_admin_api):
            server = self._wait_for_state_change(self.server, 'ACTIVE')
            self._reboot_server(server, hard=True)
        (kept,) = self.assert_on_host(self.server, self.dst, self.src)
        self.assertEqual(arq['uuid'], kept['uuid'])
        self.assertTrue(self.mdev_exists(self.dst,
                                         kept['attach_handle_uuid']))

    def assert_on_host_in_verify_resize(self):
        """The server's ARQs Bound on the destination."""
        arqs = [a for a in self.cyborg.list_arqs(self.server['id'])
                if a['hostname'] == self.dst]
        self.assertEqual(['Bound'], [a['state'] for a in arqs])
        return arqs
