"""Cyborg goes down in the middle of an addAccelerator (the review's S3).

The owner's server has the flavor's FPGA and is stopped. The owner adds
profile B; Cyborg stops answering right after the server's own ARQ was
unbound to make room for the bind (parked), so the bind fails and so does
every Cyborg call of the roll back. What the owner and an operator then
check: the action's event ended in Error with the reason; the server's
allocation is the one it had before; nothing of B is recorded on the
server; the next start, with Cyborg back, binds the flavor's ARQ again and
the guest has its device; the delete leaves nothing in Cyborg or
Placement.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402

from nova_cyborg.steps import arqs as arq_steps
from nova_cyborg.clients import cyborg_http  # noqa: E402
from nova_cyborg import exception as nc_exception  # noqa: E402


class CyborgDownDuringColdPlugTest(attach_base.AttachTestBase):

    def setUp(self):
        super().setUp()
        self.cyborg_down = False
        real_call = cyborg_http.CyborgHTTPClient._call

        def call(client, op, method, *args, **kwargs):
            if self.cyborg_down:
                raise nc_exception.CyborgError(
                    op=op, msg='injected: Cyborg is down (HTTP 503)',
                    status=503)
            return real_call(client, op, method, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg_http.CyborgHTTPClient._call', call))
        real_park = arq_steps.park

        def park(*args, **kwargs):
            real_park(*args, **kwargs)
            self.cyborg_down = True
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.steps.arqs.park', park))

    def resources(self, server):
        return {rp: alloc['resources'] for rp, alloc in
                self.allocations(server['id']).items()}

    def system_metadata(self, server):
        ctxt = nova_context.get_admin_context()
        return objects.Instance.get_by_uuid(
            ctxt, server['id'], expected_attrs=['system_metadata']
        ).system_metadata

    def test_roll_back_with_cyborg_down(self):
        with self.acting(self.owner_api):
            server = self.boot(self.accel_flavor)
        (flavor_arq,) = self.assert_accelerated(server, 1)
        before = self.resources(server)
        with self.acting(self.owner_api):
            self._stop_server(server)
        self.owner_api.post_server_action(
            server['id'], {'addAccelerator': {'device_profile': self.dp}})
        event = self._wait_for_instance_action_event(
            server, 'addAccelerator', 'compute_add_accelerator', 'Error')
        self.cyborg_down = False
        # The operator sees why.
        self.assertIn('Cyborg is down', str(event.get('details')))
        # The owner sees the server stopped, no task under way.
        seen = self.owner_api.get_server(server['id'])
        self.assertEqual(('SHUTOFF', None),
                         (seen['status'], seen['OS-EXT-STS:task_state']))
        # The allocation is the one before; nothing of B is recorded.
        self.assertEqual(before, self.resources(server))
        meta = self.system_metadata(server)
        self.assertEqual(
            [], [k for k in meta if k.startswith((
                'nova_cyborg_attached_', 'nova_cyborg_attaching'))])
        # Cyborg back, the owner starts the server: the flavor's ARQ is
        # bound again, the guest has its device.
        with self.acting(self.owner_api):
            self._start_server(server)
        server = self.admin_api.get_server(server['id'])
        (arq,) = self.assert_accelerated(server, 1)
        self.assertEqual(flavor_arq['uuid'], arq['uuid'])
        with self.acting(self.owner_api):
            self._delete_server(server)
        self.assert_nothing_left(server['id'])
        self.assertEqual([], self.cyborg.list_arqs())
        self.assert_host_free('compute1')
