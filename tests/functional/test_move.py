"""Resize and cold migration of a server with accelerators.

Upstream Nova 34 refuses both (HTTP 400). Here, once the source guest is
off, its ARQs are parked (unbound, kept) and the destination gets its own;
confirm deletes the parked ones, revert deletes the destination's and
binds the parked ones again on the source. After each step, what a user or
operator checks: the server's status and host, the ARQs in Cyborg (state,
host, provider), the ``<hostdev>`` of the domain on the host it runs on,
and the Placement usage of both hosts' devices.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402
from oslo_concurrency import processutils  # noqa: E402

from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from nova_cyborg import exception as nc_exception  # noqa: E402
from nova_cyborg.flows.move import revert as move_revert  # noqa: E402
from tests.functional import test_lifecycle  # noqa: E402

#: Two groups: each port of a DFL card is a provider of one.
TWO_FPGAS = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'},
             {'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


class TwoHostsBase(test_lifecycle.ServerWithAcceleratorBase):
    """The owner's server on compute1, compute2 beside it; the moves'
    checks of where the server's ARQs are Bound."""

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute2')
        # The harness writes no disks: nothing to copy or move aside (as
        # upstream's own resize tests on the libvirt driver do).
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._get_instance_disk_info',
            return_value=[]))
        self.useFixture(fixtures.MockPatch('os.rename'))

    def bound_on(self, hostname):
        """The server's ARQs Bound on ``hostname``, checked for a provider
        of that host."""
        rps = set(self.device_rp_uuids(hostname).values())
        arqs = [arq for arq in self.cyborg.list_arqs(self.server['id'])
                if arq['hostname'] == hostname]
        for arq in arqs:
            self.assertEqual('Bound', arq['state'])
            self.assertIn(arq['device_rp_uuid'], rps)
        return arqs

    def assert_guest_devices(self, server, arqs):
        """The guest has exactly the VFs of ``arqs`` passed through."""
        self.assertEqual(sorted(self.arq_bdf(arq) for arq in arqs),
                         self.hostdev_bdfs(server))


class MoveTest(TwoHostsBase):

    def assert_verify_resize(self, dest, old_uuids, n_new=1):
        """In VERIFY_RESIZE: the guest runs on ``dest`` with new ARQs bound
        there; the source's ARQs are parked and its devices still allocated
        (to the migration) for a revert."""
        server = self.api.get_server(self.server['id'])
        self.assertEqual('VERIFY_RESIZE', server['status'])
        self.assertEqual(dest, server['OS-EXT-SRV-ATTR:host'])
        new = self.bound_on(dest)
        self.assertEqual(n_new, len(new))
        self.assertEqual(set(), old_uuids & {a['uuid'] for a in new})
        self.assert_guest_devices(server, new)
        self.assertEqual(n_new, sum(self._fpga_usage(dest).values()))
        self.assertEqual([], self.bound_on('compute1'))
        self.assertEqual(
            {(u, 'Unbound') for u in old_uuids},
            {(u, self.cyborg.get_arq(u)['state']) for u in old_uuids})
        self.assertEqual(len(old_uuids),
                         sum(self._fpga_usage('compute1').values()))
        return new

    # Cold migration

    def test_cold_migrate_confirm(self):
        old = {arq['uuid'] for arq in self.arqs}
        self._migrate_server(self.server)
        new = self.assert_verify_resize('compute2', old)
        self._confirm_resize(self.server)
        server = self.assert_running_on('compute2', same_arqs=False,
                                        moved_from='compute1')
        self.assertEqual([new[0]['uuid']],
                         [a['uuid'] for a in self.bound_on('compute2')])
        self.assert_guest_devices(server, new)

    def test_cold_migrate_revert(self):
        old = {arq['uuid'] for arq in self.arqs}
        self._migrate_server(self.server)
        self.assert_verify_resize('compute2', old)
        self._revert_resize(self.server)
        # The source's own ARQ, Bound again, and nothing left on compute2.
        server = self.assert_running_on('compute1', moved_from='compute2')
        self.assert_guest_devices(server, self.bound_on('compute1'))

    # Resize

    def test_resize_between_profiles(self):
        _name, two = self.create_profile_flavor(TWO_FPGAS)
        old = {arq['uuid'] for arq in self.arqs}
        self._resize_server(self.server, two)
        new = self.assert_verify_resize('compute2', old, n_new=2)
        self._confirm_resize(self.server)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(sorted(a['uuid'] for a in new),
                         sorted(a['uuid'] for a in self.bound_on('compute2')))
        self.assert_guest_devices(server, new)
        self.assertEqual(2, sum(self._fpga_usage('compute2').values()))
        self.assert_host_free('compute1')

    def test_resize_to_a_flavor_without_profile(self):
        plain = self._create_flavor(name='plain')
        self._resize_server(self.server, plain)
        server = self.api.get_server(self.server['id'])
        self.assertEqual([], self.hostdev_bdfs(server))
        self._confirm_resize(self.server)
        self.assertEqual([], self.cyborg.list_arqs(self.server['id']))
        self.assertEqual([], self.hostdev_bdfs(server))
        self.assert_host_free('compute1')
        self.assert_host_free('compute2')

    def test_resize_from_a_flavor_without_profile(self):
        plain = self._create_flavor(name='plain')
        server = self.boot(plain)
        self.server = server
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        self._resize_server(server, self.flavor)
        dest = self.api.get_server(server['id'])['OS-EXT-SRV-ATTR:host']
        new = self.bound_on(dest)
        self.assertEqual(1, len(new))
        self._confirm_resize(server)
        server = self.api.get_server(server['id'])
        self.assertEqual(dest, server['OS-EXT-SRV-ATTR:host'])
        self.assert_guest_devices(server, new)
        self.assertEqual([a['uuid'] for a in new],
                         [a['uuid'] for a in
                          self.cyborg.list_arqs(server['id'])])

    def test_resize_to_an_unknown_profile_is_refused(self):
        bad = self._create_flavor(
            name='bad', extra_spec={'accel:device_profile': 'no-such-dp'})
        ex = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            self.server['id'], {'resize': {'flavorRef': bad}})
        self.assertEqual(400, ex.response.status_code)
        self.assertIn('no-such-dp', str(ex))
        self.assert_running_on('compute1')
        self.assert_host_free('compute2')

    def test_delete_while_verifying_frees_both_hosts(self):
        self._migrate_server(self.server)
        self._delete_server(self.server)
        self.assert_nothing_left(self.server['id'])
        self.assert_host_free('compute1')
        self.assert_host_free('compute2')

    # Failures

    def _assert_rolled_back(self):
        """The move failed: the server runs on compute1 as before."""
        server = self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
                          'OS-EXT-SRV-ATTR:host': 'compute1'})
        self._wait_for_migration_status(server, ['error'])
        # Nova errors the migration and makes the server ACTIVE inside
        # _resize_instance, and gives the instance its allocation back only
        # after that (resize_instance's _revert_allocation): the action's
        # event ends once both are done.
        self._wait_for_instance_action_event(
            server, 'migrate', 'compute_resize_instance', 'Error')
        conn = self.computes['compute1'].driver._host.get_connection()
        self.assertTrue(conn.lookupByUUIDString(server['id']).isActive())
        self.assert_running_on('compute1', moved_from='compute2')
        self.assert_guest_devices(server, self.bound_on('compute1'))
        return server

    def _fail_binds_on(self, hostname, error):
        """Inject ``error`` into Cyborg binds for ``hostname`` only (None:
        Cyborg accepts them and never binds)."""
        real = nc_client.CyborgClient.bind_arqs

        def bind_arqs(cyclient, bindings):
            if any(b['hostname'] == hostname for b in bindings.values()):
                if error:
                    raise error
                return None
            return real(cyclient, bindings)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))

    def test_bind_failure_on_the_destination_rolls_back(self):
        # Cyborg answers 5xx when the destination's ARQs are bound.
        self._fail_binds_on('compute2', nc_exception.CyborgError(
            op='bind', msg='injected: HTTP 503', status=503))
        self.api.post_server_action(self.server['id'], {'migrate': None})
        self._assert_rolled_back()
        event = self._wait_for_instance_action_event(
            self.server, 'migrate', 'compute_resize_instance', 'Error')
        self.assertIn('injected: HTTP 503', str(event.get('details')))

    def test_bind_event_that_never_comes_rolls_back(self):
        # Cyborg accepts the destination's bind and never finishes it.
        self.flags(arq_binding_timeout=2)
        self._fail_binds_on('compute2', None)
        self.api.post_server_action(self.server['id'], {'migrate': None})
        self._assert_rolled_back()

    def test_confirm_with_cyborg_down_is_cleaned_up_later(self):
        parked = self.arqs[0]['uuid']
        self._migrate_server(self.server)
        new = self.bound_on('compute2')
        with fixtures.MockPatch(
                'nova_cyborg.clients.cyborg.CyborgClient.delete_arqs_strictly',
                side_effect=nc_exception.CyborgError(
                    op='delete', msg='injected', status=503)):
            self._confirm_resize(self.server)
        # Confirmed all the same; the parked ARQ is left, holding nothing.
        self.assertEqual('Unbound', self.cyborg.get_arq(parked)['state'])
        self.assert_host_free('compute1')
        self._reboot_server(self.server, hard=True)
        server = self.api.get_server(self.server['id'])
        self.assert_guest_devices(server, new)
        # The next move deletes it first; a revert then leaves the server
        # as it was after the confirm.
        self._migrate_server(self.server)
        self.assertNotIn(parked,
                         [arq['uuid'] for arq in self.cyborg.list_arqs()])
        self._revert_resize(self.server)
        self.assert_host_free('compute1')
        server = self.api.get_server(self.server['id'])
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([new[0]['uuid']],
                         [a['uuid'] for a in self.bound_on('compute2')])
        self.assert_guest_devices(server, self.bound_on('compute2'))

    def test_revert_with_cyborg_down_can_be_retried(self):
        old = {arq['uuid'] for arq in self.arqs}
        self._migrate_server(self.server)
        new = self.assert_verify_resize('compute2', old)
        with fixtures.MockPatch(
                'nova_cyborg.clients.cyborg.CyborgClient.'
                'get_arqs_for_instance',
                side_effect=nc_exception.CyborgError(
                    op='get', msg='injected', status=503)):
            self.api.post_server_action(self.server['id'],
                                        {'revertResize': None})
            event = self._wait_for_instance_action_event(
                self.server, 'revertResize', move_revert.REVERT_EVENT, 'Error')
        self.assertIn('The revert did not start', event['details'])
        # Nothing changed: the guest still runs on compute2 with its
        # devices, the source's ARQ is still parked, the migration can be
        # reverted (or confirmed) again.
        self.wait_idle('VERIFY_RESIZE')
        self.assertEqual(
            [a['uuid'] for a in new],
            [a['uuid'] for a in self.assert_verify_resize('compute2', old)])
        self.assertEqual(['finished'], [
            m['status'] for m in self.api.get_migrations()
            if m['instance_uuid'] == self.server['id']])
        self._revert_resize(self.server)
        server = self.assert_running_on('compute1', moved_from='compute2')
        self.assert_guest_devices(server, self.bound_on('compute1'))

    def test_revert_whose_rebind_failed_binds_at_the_next_hard_reboot(self):
        # Cyborg refuses the parked ARQ's bind on the source during the
        # revert: the server ends in ERROR on compute1 with its ARQ parked
        # (unbound). The operator's hard reboot, once Cyborg answers
        # again, must give the guest its device back, not build it without.
        old = [arq['uuid'] for arq in self.arqs]
        self._migrate_server(self.server)
        self.assert_verify_resize('compute2', set(old))
        with fixtures.MockPatch(
                'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs',
                side_effect=nc_exception.CyborgError(
                    op='bind', msg='injected: HTTP 503', status=503)):
            self.api.post_server_action(self.server['id'],
                                        {'revertResize': None})
            server = self._wait_for_state_change(self.server, 'ERROR')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([(u, 'Unbound') for u in old],
                         [(u, self.cyborg.get_arq(u)['state']) for u in old])
        self.assert_host_free('compute2')
        self._reboot_server(server, hard=True)
        server = self.assert_running_on('compute1')
        self.assertEqual(old, [a['uuid'] for a in self.bound_on('compute1')])
        self.assert_guest_devices(server, self.arqs)
        # Bound again, not parked any more: the delete frees everything.
        self._delete_server(server)
        self.assertEqual([], self.cyborg.list_arqs(self.server['id']))
        self.assert_host_free('compute1')

    # A failure after the destination's ARQs were bound: the source gets
    # its own back, the destination's go.

    def wait_idle(self, status):
        return self._wait_for_server_parameter(
            self.server, {'status': status, 'OS-EXT-STS:task_state': None})

    def assert_source_again(self):
        """The server's ARQ is the source's own, Bound on compute1 again;
        nothing of compute2 is left (ARQ, allocation); a hard reboot builds
        the guest with the source's VF only."""
        arqs = self.bound_on('compute1')
        self.assertEqual([a['uuid'] for a in self.arqs],
                         [a['uuid'] for a in arqs])
        self.assert_host_free('compute2')
        self._reboot_server(self.server, hard=True)
        server = self.assert_running_on('compute1')
        # The guest's VF is that of the source's own ARQ, whose provider
        # is compute1's (both hosts have the same BDFs).
        self.assertEqual([self.arq_bdf(a) for a in self.arqs],
                         self.hostdev_bdfs(server))

    def test_disk_copy_failing_gives_the_source_its_device_back(self):
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'migrate_disk_and_power_off',
            side_effect=processutils.ProcessExecutionError(
                'injected: disk copy failed')))
        self.api.post_server_action(self.server['id'], {'migrate': None})
        server = self.wait_idle('ERROR')
        self.assertEqual('ProcessExecutionError', server['fault']['message'])
        self._wait_for_migration_status(server, ['error'])
        # The allocation comes back after the server's state: see
        # _assert_rolled_back.
        self._wait_for_instance_action_event(
            server, 'migrate', 'compute_resize_instance', 'Error')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assert_source_again()

    def test_restore_failing_too_gives_both_reasons(self):
        # Every bind fails: the destination's, then the source's again.
        def bind_arqs(cyclient, bindings):
            hosts = {b['hostname'] for b in bindings.values()}
            raise nc_exception.CyborgError(
                op='bind', status=503,
                msg='injected on %s' % ','.join(sorted(hosts)))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))
        self.api.post_server_action(self.server['id'], {'migrate': None})
        server = self.wait_idle('ERROR')
        fault = server['fault']['message']
        self.assertIn('injected on compute2', fault)
        self.assertIn('restoring the source failed too', fault)
        self.assertIn('injected on compute1', fault)
        self.assertLess(fault.index('compute2'), fault.index('compute1'))
        # Nothing is left on the destination.
        self.assert_host_free('compute2')

    def test_unbind_failing_is_not_bound_twice(self):
        # Cyborg fails the source's unbind (the ARQ stays Bound): the
        # rollback must not bind it again (Cyborg would refuse, and the
        # server would go to ERROR).
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.unbind_arqs',
            side_effect=nc_exception.CyborgError(
                op='unbind', msg='injected: HTTP 503', status=503)))
        self.api.post_server_action(self.server['id'], {'migrate': None})
        server = self._assert_rolled_back()
        event = self._wait_for_instance_action_event(
            server, 'migrate', 'compute_resize_instance', 'Error')
        self.assertIn('injected: HTTP 503', str(event.get('details')))
        self.assertEqual([a['uuid'] for a in self.arqs],
                         [a['uuid'] for a in self.bound_on('compute1')])
        self.assert_host_free('compute2')
