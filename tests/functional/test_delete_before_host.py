"""A server deleted before it had a host loses its ARQs (issue 26).

nova-conductor binds a new server's ARQs, then casts the build to the
compute, which is what gives the server its host. A conductor killed in
between leaves the server in BUILD without a host and its ARQ Bound; the
owner's delete then takes nova-api's path for a server that never reached
a host, which freed the allocation only: the attach handle stayed in use,
Placement offered the device again, and the next boot there failed
("AttachHandle not found"). Patch 0012 routes that path to
nova_cyborg.flows.cleanup.delete.delete_arqs_before_host.

A conductor killed while the scheduler runs, before any bind, leaves the
ARQs it created early (nova_cyborg.flows.boot.early_arqs) unbound, with nothing
in Cyborg naming the server; they are recorded in the server's build
request, and deleting the server deletes them with it.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import threading  # noqa: E402

import fixtures  # noqa: E402
from nova.conductor import manager as conductor_manager  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import exception as nova_exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.tests.functional.api import client as api_client  # noqa: E402

from nova_cyborg.model import bookkeeping

from tests.functional.harness import waits  # noqa: E402

GROUPS = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


class Killed(Exception):
    """The conductor that ran this thread was killed (raised at cleanup)."""


class DeleteBeforeHostTest(base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        # One VF: the next boot can only get the leaked device.
        self.start_accel_compute('compute1', num_vfs=1)
        _name, self.flavor = self.create_profile_flavor(GROUPS)

    def kill_conductor_before_the_cast(self):
        """The conductor's first build stops right after the bind, before
        the cast to the compute: its thread waits there until the test
        ends, as if the process had been killed (outside the cell's
        database context, which the harness's in-memory databases would
        hold locked). Later builds go through."""
        entered = threading.Event()
        release = threading.Event()
        real = conductor_manager.ComputeTaskManager.\
            _create_and_bind_arq_for_instance

        def killed(manager, *args, **kwargs):
            bound = real(manager, *args, **kwargs)
            if entered.is_set():
                return bound
            entered.set()
            release.wait()
            raise Killed('nova-conductor killed after the bind')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.conductor.manager.ComputeTaskManager.'
            '_create_and_bind_arq_for_instance', killed))
        self.addCleanup(release.set)
        return entered

    def kill_conductor_while_scheduling(self):
        """The conductor's build stops while the scheduler runs (after
        the early ARQ creation started, before any host was chosen): its
        thread waits there until the test ends, as if killed."""
        entered = threading.Event()
        release = threading.Event()

        def killed(manager, *args, **kwargs):
            entered.set()
            release.wait()
            raise Killed('nova-conductor killed while scheduling')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.conductor.manager.ComputeTaskManager._schedule_instances',
            killed))
        self.addCleanup(release.set)
        return entered

    def recorded(self, server_id):
        try:
            return bookkeeping.early_arqs(objects.BuildRequest.
                                          get_by_instance_uuid(
                                           nova_context.get_admin_context(),
                                           server_id))
        except nova_exception.BuildRequestNotFound:
            return []

    def gone(self, api, server_id):
        try:
            api.get_server(server_id)
        except api_client.OpenStackApiNotFoundException:
            return True
        return False

    def test_deleted_in_build_without_host_loses_its_bound_arq(self):
        killed = self.kill_conductor_before_the_cast()
        server = self.owner_api.post_server({'server': self._build_server(
            flavor_id=self.flavor, image_uuid=base.IMAGE, networks='none')})
        waits.wait_until(lambda: killed.wait(0), 'the conductor killed')
        waits.wait_until(
            lambda: [a['state'] for a in self.cyborg.list_arqs(
                server['id'])] == ['Bound'], 'the ARQ Bound')
        # The cloud admin (a third project) sees a server in BUILD that
        # never got a host.
        seen = self.cloud_admin_api.get_server(server['id'])
        self.assertEqual(('BUILD', None),
                         (seen['status'], seen['OS-EXT-SRV-ATTR:host']))
        self.assertNotEqual({}, self.allocations(server['id']))

        self.owner_api.delete_server(server['id'])
        waits.wait_until(lambda: self.gone(self.owner_api, server['id']),
                         'the server deleted')
        # Its ARQ went with it (it stayed Bound), and its allocation.
        self.assert_nothing_left(server['id'])

        # Another tenant's boot gets the host's only VF.
        other = self._create_server(
            flavor_id=self.flavor, image_uuid=base.IMAGE, networks='none',
            api=self.other_tenant_api)
        other = self.cloud_admin_api.get_server(other['id'])
        self.assertEqual('compute1', other['OS-EXT-SRV-ATTR:host'])
        arq, = self.assert_accelerated(other, 1)
        self.assertEqual([self.arq_bdf(arq)],
                         sorted(self.handle_bdfs('compute1')))

    def test_conductor_killed_while_scheduling_leaves_no_arq(self):
        killed = self.kill_conductor_while_scheduling()
        server = self.owner_api.post_server({'server': self._build_server(
            flavor_id=self.flavor, image_uuid=base.IMAGE, networks='none')})
        waits.wait_until(lambda: killed.wait(0), 'the conductor killed')
        # The early ARQ exists, unbound, and Cyborg ties it to nothing.
        waits.wait_until(lambda: self.recorded(server['id']),
                         'the early ARQ recorded')
        (arq_uuid,) = self.recorded(server['id'])
        arq = self.cyborg.get_arq(arq_uuid)
        self.assertEqual(('Initial', None),
                         (arq['state'], arq['instance_uuid']))
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        seen = self.cloud_admin_api.get_server(server['id'])
        self.assertEqual(('BUILD', None),
                         (seen['status'], seen['OS-EXT-SRV-ATTR:host']))

        self.owner_api.delete_server(server['id'])
        waits.wait_until(lambda: self.gone(self.owner_api, server['id']),
                         'the server deleted')
        # No ARQ left in Cyborg at all (the early one went), no allocation.
        self.assertEqual([], self.cyborg.list_arqs())
        self.assert_nothing_left(server['id'])

    def test_server_without_accelerators_calls_no_cyborg(self):
        # The same delete of a server without a device profile asks
        # Cyborg nothing.
        killed = self.kill_conductor_before_the_cast()
        flavor = self._create_flavor(name='plain')
        server = self.owner_api.post_server({'server': self._build_server(
            flavor_id=flavor, image_uuid=base.IMAGE, networks='none')})
        waits.wait_until(lambda: killed.wait(0), 'the conductor killed')
        calls = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.get_client',
            lambda *args, **kwargs: calls.append(args)))
        self.owner_api.delete_server(server['id'])
        waits.wait_until(lambda: self.gone(self.owner_api, server['id']),
                         'the server deleted')
        self.assertEqual([], calls)
        self.assertEqual({}, self.allocations(server['id']))
