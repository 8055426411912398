"""nova-manage placement heal_allocations on a server with an accelerator.

Upstream Nova 34 refuses a server whose flavor names a device profile
(bug 1939020). Patched, the command heals it: what it writes is the
flavor's part on the compute node's provider plus, from the server's Bound
ARQs in Cyborg, one FPGA on each ARQ's device provider, which is what the
scheduler allocated at boot. ``--force`` keeps the device part,
``--dry-run`` writes nothing, and a Cyborg that cannot be reached fails the
heal with the reason and changes nothing.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import io  # noqa: E402
import socket  # noqa: E402

import fixtures  # noqa: E402
from nova.cmd import manage  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


def _dead_endpoint():
    """A loopback URL where nothing listens."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return 'http://127.0.0.1:%d/accelerator/v2' % port


class HealAllocationsTest(base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        _name, flavor = self.create_profile_flavor(PROFILE)
        self.server = self.boot(flavor)
        self.arqs = self.assert_accelerated(self.server, 1)
        self.booted = self.resources(self.server['id'])
        self.output = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', self.output))
        self.cli = manage.PlacementCommands()

    def resources(self, server_id):
        """{provider uuid: resources} of the server's allocation."""
        return {rp: alloc['resources']
                for rp, alloc in self.allocations(server_id).items()}

    def heal(self, **kwargs):
        return self.cli.heal_allocations(
            instance_uuid=self.server['id'], verbose=True, **kwargs)

    def assert_flavor_and_device(self):
        """The allocation is the boot's: the flavor on the compute node,
        one FPGA on the ARQ's device provider."""
        compute_rp = self._get_provider_uuid_by_host('compute1')
        device_rp = self.arqs[0]['device_rp_uuid']
        resources = self.resources(self.server['id'])
        self.assertEqual({compute_rp, device_rp}, set(resources))
        self.assertEqual({'FPGA': 1}, resources[device_rp])
        self.assertEqual({'VCPU', 'MEMORY_MB', 'DISK_GB'},
                         set(resources[compute_rp]))
        self.assertEqual(self.booted, resources)
        self.assert_accelerated(
            self.api.get_server(self.server['id']), 1)

    def test_missing_allocations_are_healed(self):
        self._delete_server_allocations(self.server['id'])
        self.assertEqual({}, self.allocations(self.server['id']))

        self.assertEqual(0, self.heal(), self.output.getvalue())

        self.assertIn('Successfully created allocations for instance %s'
                      % self.server['id'], self.output.getvalue())
        self.assert_flavor_and_device()
        # Healed: a second run finds nothing to do.
        self.assertEqual(4, self.heal(), self.output.getvalue())
        self.assertIn('Nothing to be healed', self.output.getvalue())
        self.assert_flavor_and_device()

    def test_force_keeps_the_device(self):
        # Damage the compute node's part; --force rebuilds it from the
        # flavor, and must not drop the device's.
        compute_rp = self._get_provider_uuid_by_host('compute1')
        device_rp = self.arqs[0]['device_rp_uuid']
        damaged = dict(self.booted[compute_rp], MEMORY_MB=1)
        self.placement.put('/allocations/%s' % self.server['id'], {
            'allocations': [
                {'resource_provider': {'uuid': compute_rp},
                 'resources': damaged},
                {'resource_provider': {'uuid': device_rp},
                 'resources': {'FPGA': 1}}]})

        self.assertEqual(0, self.heal(force=True), self.output.getvalue())

        self.assertIn('Force flag passed', self.output.getvalue())
        self.assertIn('Successfully updated allocations',
                      self.output.getvalue())
        self.assert_flavor_and_device()

    def test_dry_run_writes_nothing(self):
        self._delete_server_allocations(self.server['id'])

        self.assertEqual(4, self.heal(dry_run=True), self.output.getvalue())

        output = self.output.getvalue()
        self.assertIn('[dry-run] Create allocations for instance %s'
                      % self.server['id'], output)
        self.assertIn(self.arqs[0]['device_rp_uuid'], output)
        self.assertIn('"FPGA": 1', output)
        self.assertEqual({}, self.allocations(self.server['id']))

    def _cyborg_unreachable(self):
        self.flags(endpoint_override=_dead_endpoint(), connect_retries=0,
                   group='cyborg')

    def test_cyborg_unreachable_heals_nothing(self):
        self._delete_server_allocations(self.server['id'])
        self._cyborg_unreachable()

        self.assertEqual(3, self.heal(), self.output.getvalue())

        output = self.output.getvalue()
        self.assertIn('Failed to update allocations for consumer %s'
                      % self.server['id'], output)
        self.assertIn('cannot heal the accelerator allocations', output)
        self.assertIn('could not reach Cyborg', output)
        self.assertEqual({}, self.allocations(self.server['id']))

    def test_cyborg_unreachable_force_drops_nothing(self):
        self._cyborg_unreachable()

        self.assertEqual(3, self.heal(force=True), self.output.getvalue())

        self.assertIn('could not reach Cyborg', self.output.getvalue())
        self.assertEqual(self.booted, self.resources(self.server['id']))


class HealAttachedTest(base.AcceleratorTestBase):
    """A server whose only device came from addAccelerator: ``--force``
    rebuilds its allocation from the flavor and its Bound ARQ, and does
    not free in Placement the device its guest holds."""

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        self.dp, _flavor = self.create_profile_flavor(PROFILE)
        self.server = self._create_server(
            flavor_id=self._create_flavor(name='plain'),
            image_uuid=base.IMAGE, networks='none', api=self.owner_api)
        self.owner_api.post_server_action(
            self.server['id'], {'addAccelerator': {'device_profile': self.dp}})
        self._wait_for_instance_action_event(
            self.server, 'addAccelerator', 'compute_add_accelerator',
            'Success')
        server = self.admin_api.get_server(self.server['id'])
        (self.arq,) = self.assert_accelerated(server, 1)
        self.output = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', self.output))

    def test_force_keeps_the_added_device(self):
        before = self.allocations(self.server['id'])
        self.assertEqual({'FPGA': 1},
                         before[self.arq['device_rp_uuid']]['resources'])
        # The cloud admin heals, as an operator does.
        self.assertEqual(0, manage.PlacementCommands().heal_allocations(
            instance_uuid=self.server['id'], verbose=True, force=True),
            self.output.getvalue())
        self.assertIn('Successfully updated allocations',
                      self.output.getvalue())
        self.assertEqual(
            {rp: alloc['resources'] for rp, alloc in before.items()},
            {rp: alloc['resources'] for rp, alloc in
             self.allocations(self.server['id']).items()})
        # The owner's server keeps its device, held in Placement.
        self.assert_accelerated(self.admin_api.get_server(self.server['id']),
                                1)
