"""A first boot's Cyborg calls overlap Nova's own work (issue 17).

nova-conductor creates a new server's ARQs while the scheduler runs, and
binds them while it records the server (its action, block device
mappings, cell mapping, build request), joining the bind before it casts
the build (nova_cyborg.flows.boot.early_arqs). Each test holds one step of
Nova's until Cyborg shows the ARQs in the state that step must overlap; before
the change the step came first, so the hold ran out and the boot failed.
ARQs created for a server that never reaches its bind are deleted.

Where the compute serves capability 1.2, the conductor casts the build
while Cyborg binds, and the compute waits for the conductor's word on the
bind (nova_cyborg.model.bind_outcome): the bind is held until the compute
waits, which no build could reach before; a compute that does not report
the capability gets its build after the bind answered.
"""

import inspect
import threading

import fixtures

from nova.conductor import manager as conductor_manager
from nova.scheduler import manager as scheduler_manager
from nova.tests.functional.api import client as api_client

from nova import context as nova_context
from nova import objects
from nova.compute import resource_tracker

from nova_cyborg import exception
from nova_cyborg.flows.boot import early_arqs
from nova_cyborg.model import bind_outcome
from tests.functional import base
from tests.functional.harness import cast_order
from tests.functional.harness import waits

GROUPS = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
#: How long a held step waits for Cyborg: far more than a create or a
#: bind takes, far less than the test's timeout.
HOLD = 60


class BootOverlapTest(base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        _name, self.flavor = self.create_profile_flavor(GROUPS)

    def hold(self, cls, name, until, what):
        """Make ``cls.name`` wait until ``until(*args, **kwargs)``."""
        real = getattr(cls, name)
        seen = []

        def held(*args, **kwargs):
            seen.append(waits.wait_until(lambda: until(*args, **kwargs),
                                         what, timeout=HOLD))
            return real(*args, **kwargs)
        if isinstance(inspect.getattr_static(cls, name), staticmethod):
            held = staticmethod(held)
        self.useFixture(fixtures.MonkeyPatch(
            '%s.%s.%s' % (cls.__module__, cls.__name__, name), held))
        return seen

    def test_arqs_created_while_scheduling(self):
        seen = self.hold(
            scheduler_manager.SchedulerManager, 'select_destinations',
            lambda *args, **kwargs: self.cyborg.list_arqs(),
            'the ARQ created while the scheduler runs')
        server = self.boot(self.flavor)
        arq, = self.assert_accelerated(server, 1)
        # The ARQ Cyborg had before the scheduler answered is the one
        # bound to the server.
        self.assertEqual([arq['uuid']], [a['uuid'] for a in seen[0]])
        self.assertEqual('Initial', seen[0][0]['state'])

    def test_bind_overlaps_recording_the_server(self):
        def bound(manager, context, build_request, instance, *args):
            arqs = self.cyborg.list_arqs(instance.uuid)
            return arqs and all(a['state'] == 'Bound' for a in arqs)
        seen = self.hold(
            conductor_manager.ComputeTaskManager, '_delete_build_request',
            bound, 'the bind while the conductor records the server')
        server = self.boot(self.flavor)
        self.assert_accelerated(server, 1)
        self.assertEqual([True], seen)

    def test_bind_done_before_the_server_is_mapped_to_its_cell(self):
        # Cyborg binds a device that needs no programming within its PATCH
        # and sends Nova the bind event at once; here it arrives while the
        # server is not yet mapped to its cell. nova-api answered 500 and
        # Cyborg the PATCH 400, and the server went to ERROR; now nova-api
        # answers 422 (patch 0000c) and, were Cyborg to answer 400 all the
        # same, the client reads the ARQs back and finds them Bound.
        def bind_ended(context, instance, cell):  # a staticmethod
            with early_arqs._lock:
                started = early_arqs._binding.get(instance.uuid)
            return started is not None and started.future.done()
        seen = self.hold(
            conductor_manager.ComputeTaskManager, '_map_instance_to_cell',
            bind_ended, 'the bind before the server is mapped to its cell')
        server = self.boot(self.flavor)
        self.assert_accelerated(server, 1)
        self.assertEqual([True], seen)

    def marks(self, server):
        """The server's cast-first mark, as saved in its cell."""
        instance = objects.Instance.get_by_uuid(
            nova_context.get_admin_context(), server['id'],
            expected_attrs=['system_metadata'])
        return instance.system_metadata.get(bind_outcome.KEY)

    def test_build_cast_while_cyborg_binds(self):
        order = self.useFixture(cast_order.CastFirst())
        server = self.boot(self.flavor)
        self.assert_accelerated(server, 1)
        self.assertEqual('compute waits', order.first(server['id']))
        self.assertIsNone(self.marks(server))
        self._delete_server(server)
        self.assert_nothing_left(server['id'])

    def test_no_word_from_the_conductor_aborts_the_build(self):
        # The conductor's bind never ends (a conductor that stopped while
        # Cyborg bound): the compute gives up after arq_binding_timeout,
        # without a reschedule, and leaves nothing behind.
        self.flags(arq_binding_timeout=5)
        ended = threading.Event()
        self.addCleanup(ended.set)

        def bind(cyclient, bindings):
            waits.wait_until(ended.is_set, 'the end of the test',
                             timeout=HOLD)
            raise exception.CyborgError(op='bind', msg='stopped')
        self.useFixture(cast_order.CastFirst(bind=bind))
        body = self._build_server(flavor_id=self.flavor,
                                  image_uuid=base.IMAGE, networks='none')
        server = self._wait_for_state_change(
            self.api.post_server({'server': body}), 'ERROR')
        self.assertIn('Timed out after 5 seconds waiting for Cyborg to '
                      'bind', server['fault']['message'])
        self.assertIn('aborted', server['fault']['message'])
        waits.wait_until(lambda: self.cyborg.list_arqs() == [],
                         'the ARQ deleted by nova-compute')
        self.assertEqual({}, self.allocations(server['id']))
        self._delete_server(server)

    def test_compute_without_the_capability_gets_a_bound_build(self):
        # The compute stands for one of an older nova-cyborg: it does not
        # report capability 1.2, which the operator removes from Placement.
        real = resource_tracker.ResourceTracker._get_traits
        self.useFixture(fixtures.MockPatchObject(
            resource_tracker.ResourceTracker, '_get_traits',
            lambda rt, *args, **kwargs: [
                t for t in real(rt, *args, **kwargs)
                if t != 'CUSTOM_NOVA_CYBORG_1_2']))
        rp = self._get_provider_uuid_by_host('compute1')
        self._set_provider_traits(rp, [
            t for t in self._get_provider_traits(rp)
            if t != 'CUSTOM_NOVA_CYBORG_1_2'])
        order = self.useFixture(cast_order.Order())
        server = self.boot(self.flavor)
        self.assert_accelerated(server, 1)
        self.assertEqual('bind answered', order.first(server['id']))
        self.assertIsNone(self.marks(server))

    def test_server_deleted_while_scheduling_leaves_no_arq(self):
        done = []

        def deleted(manager, context, *args, **kwargs):
            if done:  # the next boot goes through
                return True
            if not self.cyborg.list_arqs():
                return False
            for uuid in kwargs['instance_uuids']:
                self.api.delete_server(uuid)
            done.append(True)
            return True
        self.hold(scheduler_manager.SchedulerManager, 'select_destinations',
                  deleted, 'the ARQ created while the scheduler runs')
        body = self._build_server(flavor_id=self.flavor,
                                  image_uuid=base.IMAGE, networks='none')
        server = self.api.post_server({'server': body})

        def gone():
            try:
                self.api.get_server(server['id'])
            except api_client.OpenStackApiNotFoundException:
                return True
            return False
        waits.wait_until(gone, 'the server deleted while scheduling')
        waits.wait_until(lambda: self.cyborg.list_arqs() == [],
                         'the ARQ created for it deleted')
        # The conductor frees what the scheduler claimed once it learns
        # the server is gone, after the API's delete answered.
        waits.wait_until(lambda: self.allocations(server['id']) == {},
                         'the allocation the scheduler made freed')
        # The host's VF is free: the next server gets it.
        self.assert_accelerated(self.boot(self.flavor), 1)
