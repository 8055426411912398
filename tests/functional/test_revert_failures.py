"""A revert of a cold migration that fails on the destination.

``revert_resize`` on the destination tears down the guest's networks,
destroys the guest and its volume connections, then casts to the source.
The destination's ARQs are deleted only on the source, once that is done
(``nova_cyborg.flows.move.revert.rebind_at_source``): a failure before it
(Neutron here) leaves the server in ERROR on the destination, as upstream does
for any server, with its guest running and its devices still its own in
Cyborg and Placement. The operator's reset-state and hard reboot then
rebuild the guest there with the same device.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100


from tests.functional.harness import neutron_faults  # noqa: E402
from tests.functional import test_move  # noqa: E402


class RevertFailingOnDestinationTest(test_move.TwoHostsBase):

    def assert_kept_on_destination(self, dest_uuids):
        """The guest on compute2 has the VF of its ARQ there, Bound and
        allocated: nothing was freed under it."""
        server = self.api.get_server(self.server['id'])
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        dest = self.bound_on('compute2')
        self.assertEqual(dest_uuids, [a['uuid'] for a in dest])
        self.assertEqual([self.arq_bdf(a) for a in dest],
                         self.hostdev_bdfs(server))
        self.assertEqual(1, sum(self._fpga_usage('compute2').values()))
        return server

    def test_network_teardown_failing_keeps_the_guest_devices(self):
        old = [arq['uuid'] for arq in self.arqs]
        self._migrate_server(self.server)
        self._wait_for_state_change(self.server, 'VERIFY_RESIZE')
        dest = [a['uuid'] for a in self.bound_on('compute2')]
        self.assertEqual(1, len(dest))

        with neutron_faults.TeardownFails('compute2') as failing:
            self.api.post_server_action(self.server['id'],
                                        {'revertResize': None})
            self._wait_for_state_change(self.server, 'ERROR')
        self.assertEqual([self.server['id']], failing.torn_down)
        # ERROR on compute2, the guest still running there with its VF,
        # whose ARQ is still Bound and allocated to the server; the
        # source's ARQ still parked.
        self.assert_kept_on_destination(dest)
        self.assertEqual([(u, 'Unbound') for u in old],
                         [(u, self.cyborg.get_arq(u)['state']) for u in old])
        self.assertEqual(['error'], [
            m['status'] for m in self.api.get_migrations()
            if m['instance_uuid'] == self.server['id']])

        # The operator: reset-state, then a hard reboot rebuilds the guest
        # on compute2 with the same device.
        self.admin_api.post_server_action(
            self.server['id'], {'os-resetState': {'state': 'active'}})
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self._reboot_server(server, hard=True)
        server = self.assert_kept_on_destination(dest)
        self.assertEqual('ACTIVE', server['status'])
