"""The ``accelerator-request-bound`` event going wrong, on a first boot.

Cyborg binds the ARQs the conductor asks for (an FPGA programming job
binds asynchronously) and then sends ``accelerator-request-bound`` to
Nova's ``POST /os-server-external-events``, one event per ARQ, with status
``completed`` (Bound) or ``failed``; nova-compute waits for them for at
most ``arq_binding_timeout`` seconds (nova_cyborg.steps.bound_arqs), ending the
wait early for ARQs that Cyborg resolved before the wait began, and then
reads every ARQ again: only a Bound ARQ with a valid attach handle gets
into the guest, whatever the events said. Here Cyborg holds the bind
until nova-compute waits (as a programming job would), then its event is
lost, or events are posted through Nova's API as Cyborg (an admin) would:
failed, for unknown ARQs, duplicated, early, or for an ARQ deleted
meanwhile. The host has one VF (two for two ARQs), so a boot that works
afterwards proves Cyborg freed the attach handle.

Cases and outcomes (after each failure: no ARQ left in Cyborg, no
allocation, no usage of any device provider, no domain):

* the event never arrives (Cyborg binds after nova-compute began to wait,
  its event is lost): ERROR after ``arq_binding_timeout``, the fault says
  "Timed out after N seconds waiting for Cyborg to bind"; the bound ARQ
  is deleted and a boot then works.
* the event arrives with status ``failed``: the build is rescheduled (a
  bind that failed on one host may work on another). With a second host
  the server is ACTIVE there with a new ARQ, nothing is left on the
  first. With a single host: ERROR, nothing left, and a boot then works;
  the fault says "Exhausted all hosts available for retrying build
  failures" and, since patch 0002b keeps it, the last host's failure: the
  ARQ and BindFailed. The same for Cyborg's own ``failed`` event when the
  FPGA refuses the bitstream; no reservation of the FPGA is left.
* events for an ARQ nobody waits for (``completed`` and ``failed``) and
  for an unknown server, while the boot waits: Nova answers 207 (404 for
  the unknown server), nova-compute ignores them, the boot keeps waiting
  and ends ACTIVE once Cyborg binds; the same events for the ACTIVE
  server change nothing.
* the same event twice: two ``completed`` for the first of two ARQs do
  not stand for the second, the boot keeps waiting and ends ACTIVE with
  both VFs once Cyborg binds; late duplicates (and a late ``failed``)
  for the ACTIVE server change nothing.
* ``completed`` before Cyborg bound: nova-compute reads the ARQs, Cyborg
  does not list an unbound ARQ under the instance: ERROR, the fault
  names the ARQ ("is missing, not Bound"); Cyborg's late bind finds the
  ARQ deleted.
* the ARQ deleted in Cyborg while it binds (Cyborg bound it, its event
  was lost, the ARQ is deleted with a service token, then ``completed``
  arrives, as Cyborg's bind job reports the ARQs it started with): ERROR,
  the fault names the ARQ as missing; the attach handle is free again.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import threading  # noqa: E402
import time  # noqa: E402

import fixtures  # noqa: E402
from nova.compute import api as compute_api  # noqa: E402
from nova.compute import manager as compute_manager  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402

from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from nova_cyborg.steps import bound_arqs as nc_compute  # noqa: E402
from nova_cyborg import exception as nc_exception  # noqa: E402
from tests.functional.harness import identity  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

EVENT = nc_compute.EVENT_NAME
FUNCTION_ID = 'badbadbad0000000000000000000cafe'


class HeldBinds(fixtures.Fixture):
    """Cyborg accepts the binds and does them only at ``bind()``.

    As an FPGA programming job would, the conductor's PATCH returns at
    once. ``wait()`` returns when nova-compute waits for the events (it
    registered them and found no ARQ resolved yet).

    :param hold: how many binds to hold; later ones go through.
    """

    def __init__(self, hold=1):
        super().__init__()
        self.hold = hold

    def _setUp(self):
        self.held = []
        self.waiting = threading.Event()
        self._real_bind = nc_client.CyborgClient.bind_arqs
        real_get = nc_client.CyborgClient.get_arqs_for_instance
        fixture = self

        def bind_arqs(cyclient, bindings):
            if len(fixture.held) >= fixture.hold:
                return fixture._real_bind(cyclient, bindings)
            fixture.held.append((cyclient, bindings))

        def get_arqs_for_instance(cyclient, instance_uuid,
                                  only_resolved=False):
            arqs = real_get(cyclient, instance_uuid,
                            only_resolved=only_resolved)
            # The early exit's read: the events are registered by now.
            if only_resolved and fixture.held:
                fixture.waiting.set()
            return arqs

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.get_arqs_for_instance',
            get_arqs_for_instance))

    def wait(self, timeout=waits.DEADLINE):
        if not self.waiting.wait(timeout):
            raise AssertionError('nova-compute never waited for the bind')

    @property
    def arq_uuids(self):
        return sorted(uuid for _c, bindings in self.held for uuid in bindings)

    def bind(self):
        """Cyborg binds now (and sends its events); False if it failed."""
        for cyclient, bindings in self.held:
            try:
                self._real_bind(cyclient, bindings)
            except nc_exception.AcceleratorRequestBindingFailed:
                return False
        return True


class NovaEvents(fixtures.Fixture):
    """Record the bind events Nova's API accepts and nova-compute handles.

    :param drop: the API accepts bind events and delivers none (an event
        lost on its way).
    """

    def __init__(self, drop=False):
        super().__init__()
        self.drop = drop

    def _setUp(self):
        self.accepted = []
        self.handled = []
        self._cond = threading.Condition()
        real_api = compute_api.API.external_instance_event
        real_manager = compute_manager.ComputeManager.external_instance_event
        fixture = self

        def api_event(api, context, instances, events):
            ours = [e for e in events if e.name == EVENT]
            fixture.accepted.extend(
                (e.instance_uuid, e.tag, e.status) for e in ours)
            if fixture.drop:
                events = [e for e in events if e.name != EVENT]
            if events:
                return real_api(api, context, instances, events)

        def manager_event(manager, context, instances, events):
            try:
                return real_manager(manager, context, instances, events)
            finally:
                with fixture._cond:
                    fixture.handled.extend(
                        (e.instance_uuid, e.tag, e.status) for e in events
                        if e.name == EVENT)
                    fixture._cond.notify_all()

        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.api.API.external_instance_event', api_event))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.manager.ComputeManager.external_instance_event',
            manager_event))

    def wait_handled(self, *events, count=1, timeout=waits.DEADLINE):
        """Wait until nova-compute handled each (server, tag, status), at
        least ``count`` times."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                missing = [e for e in events
                           if self.handled.count(e) < count]
                if not missing:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError('nova-compute never handled %s'
                                         % missing)
                self._cond.wait(left)


class FailedBootChecks(object):
    """What a user and an operator check after a boot that must fail (a
    mixin of :class:`tests.functional.base.AcceleratorTestBase`, whose
    waits have deadlines)."""

    def post_server(self, flavor):
        return self.api.post_server({'server': self._build_server(
            flavor_id=flavor, image_uuid=base.IMAGE, networks='none')})

    def wait_error(self, server):
        return self._wait_for_server_parameter(
            server, {'status': 'ERROR', 'OS-EXT-STS:task_state': None})

    def wait_active(self, server):
        return self._wait_for_state_change(server, 'ACTIVE')

    def fault(self, server):
        """The fault message the server's owner sees."""
        return self.api.get_server(server['id'])['fault']['message']

    def assert_no_domain(self, server_id):
        for compute in self.computes.values():
            conn = compute.driver._host.get_connection()
            self.assertRaises(fakelibvirt.libvirtError,
                              conn.lookupByUUIDString, server_id)

    def assert_clean(self, server):
        """Nothing is left of a failed boot: no ARQ at all in Cyborg, no
        allocation, no usage of any device provider, no domain."""
        self.assertEqual([], self.cyborg.list_arqs())
        self.assertEqual({}, self.allocations(server['id']))
        for host in self.computes:
            for name, rp in self.device_rp_uuids(host).items():
                usages = self._get_provider_usages(rp)
                self.assertEqual([0] * len(usages), list(usages.values()),
                                 name)
        self.assert_no_domain(server['id'])


class BindEventFaultTest(FailedBootChecks, base.AcceleratorTestBase):

    NUM_VFS = 1

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1', memory_gb=32)
        _name, self.flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}])

    # Helpers

    def post_events(self, *events):
        """Post (server, tag, status) events as Cyborg does; return the
        code Nova answered for each."""
        body = {'events': [
            {'name': EVENT, 'server_uuid': server, 'tag': tag,
             'status': status} for server, tag, status in events]}
        resp = self.admin_api.api_post(
            '/os-server-external-events', body,
            check_response_status=[200, 207])
        return [e['code'] for e in resp.body['events']]

    def assert_building(self, server):
        self.assertEqual('BUILD', self.api.get_server(server['id'])['status'])

    def assert_handles_free(self):
        """A boot now gets the host's only VF: Cyborg freed it."""
        server = self.boot(self.flavor)
        self.assert_accelerated(server, 1)
        self._delete_server(server)
        self.assert_nothing_left(server['id'])

    # The event never arrives

    def test_event_never_arrives(self):
        self.flags(arq_binding_timeout=3)
        with HeldBinds() as binds, NovaEvents(drop=True) as events:
            server = self.post_server(self.flavor)
            binds.wait()
            self.assertTrue(binds.bind())
            server = self.wait_error(server)
        # Cyborg did bind and send its event; nova-compute never got it.
        (arq,) = binds.arq_uuids
        self.assertEqual([(server['id'], arq, 'completed')], events.accepted)
        self.assertIn('Timed out after 3 seconds waiting for Cyborg to bind '
                      'the accelerator requests', self.fault(server))
        self.assert_clean(server)
        # The next boot's bind has Nova's usual time.
        self.flags(arq_binding_timeout=300)
        self.assert_handles_free()

    # The event says the bind failed

    def _event_before_the_bind(self, status):
        """Post a bind event with ``status`` while Cyborg holds the bind;
        the boot fails; return the server and its ARQ's UUID."""
        with HeldBinds() as binds:
            server = self.post_server(self.flavor)
            binds.wait()
            (arq,) = binds.arq_uuids
            self.assertEqual([200], self.post_events(
                (server['id'], arq, status)))
            server = self.wait_error(server)
            # Cyborg's late bind finds the ARQ deleted.
            self.assertFalse(binds.bind())
        return server, arq

    def _failed_event_on_the_only_host(self):
        return self._event_before_the_bind('failed')

    def test_failed_event_on_the_only_host_leaves_nothing(self):
        server, _arq = self._failed_event_on_the_only_host()
        # Rescheduled, and no host is left.
        self.assertIn('Exhausted all hosts available for retrying build '
                      'failures', self.fault(server))
        self.assert_clean(server)
        self.assert_handles_free()

    def test_failed_event_on_the_only_host_fault_says_why(self):
        server, arq = self._failed_event_on_the_only_host()
        self.assertIn('Accelerator request %s is BindFailed' % arq,
                      self.fault(server))

    def test_failed_event_reschedules(self):
        self.start_accel_compute('compute2', memory_gb=16)
        with HeldBinds() as binds:
            server = self.post_server(self.flavor)
            binds.wait()
            (arq,) = binds.arq_uuids
            self.assertEqual([200], self.post_events(
                (server['id'], arq, 'failed')))
            server = self.wait_active(server)
            self.assertFalse(binds.bind())
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        (bound,) = self.assert_accelerated(server, 1)
        self.assertNotEqual(arq, bound['uuid'])
        self.assertEqual([bound['uuid']],
                         [a['uuid'] for a in self.cyborg.list_arqs()])
        for name, rp in self.device_rp_uuids('compute1').items():
            self.assertEqual(0, self._get_provider_usages(rp)['FPGA'], name)

    # Events nobody waits for

    def test_events_for_unknown_arqs_are_ignored(self):
        stranger = uuidutils.generate_uuid()
        with HeldBinds() as binds, NovaEvents() as events:
            server = self.post_server(self.flavor)
            binds.wait()
            (arq,) = binds.arq_uuids
            unknown = [(server['id'], stranger, 'completed'),
                       (server['id'], stranger, 'failed')]
            self.assertEqual([200, 200, 404], self.post_events(
                *unknown, (uuidutils.generate_uuid(), arq, 'completed')))
            events.wait_handled(*unknown)
            self.assert_building(server)
            self.assertTrue(binds.bind())
            server = self.wait_active(server)
            self.assert_accelerated(server, 1)

            # The same for the ACTIVE server.
            self.assertEqual([200, 200], self.post_events(*unknown))
            events.wait_handled(*unknown, count=2)
        self.assertEqual('ACTIVE', self.api.get_server(server['id'])['status'])
        self.assert_accelerated(server, 1)

    def test_duplicate_event(self):
        self.start_accel_compute('compute2', num_vfs=2, memory_gb=64)
        _name, flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1'}, {'resources:FPGA': '1'}])
        with HeldBinds() as binds, NovaEvents() as events:
            server = self.post_server(flavor)
            binds.wait()
            first, second = binds.arq_uuids
            done = (server['id'], first, 'completed')
            self.assertEqual([200, 200], self.post_events(done, done))
            events.wait_handled(done, count=2)
            self.assert_building(server)
            self.assertTrue(binds.bind())
            server = self.wait_active(server)
            self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
            self.assert_accelerated(server, 2)
            # Late duplicates, one of them failed.
            late = [done, (server['id'], second, 'failed')]
            self.assertEqual([200, 200], self.post_events(*late))
            events.wait_handled(done, count=4)
            events.wait_handled(late[1])
        self.assertEqual('ACTIVE', self.api.get_server(server['id'])['status'])
        self.assert_accelerated(server, 2)

    # Events that do not match Cyborg's state

    def test_event_before_the_bind(self):
        server, arq = self._event_before_the_bind('completed')
        # Cyborg lists an ARQ under its instance only once it is bound.
        self.assertIn('Accelerator request %s is missing, not Bound' % arq,
                      self.fault(server))
        self.assert_clean(server)
        self.assert_handles_free()

    def test_arq_deleted_while_binding(self):
        with HeldBinds() as binds, NovaEvents(drop=True) as events:
            server = self.post_server(self.flavor)
            binds.wait()
            (arq,) = binds.arq_uuids
            self.assertTrue(binds.bind())
            self.assertEqual('Bound', self.cyborg.get_arq(arq)['state'])
            # Deleting a bound ARQ takes a service token.
            self.cyborg.request('DELETE', '/accelerator_requests',
                                params={'arqs': arq}, expected=(204,),
                                service_token=identity.SERVICE_TOKEN)
            events.drop = False
            # What Cyborg's bind job sends for the ARQs it started with.
            self.assertEqual([200], self.post_events(
                (server['id'], arq, 'completed')))
            server = self.wait_error(server)
        self.assertIn('Accelerator request %s is missing, not Bound' % arq,
                      self.fault(server))
        self.assert_clean(server)
        self.assert_handles_free()


class FailedProgrammingTest(FailedBootChecks, base.AcceleratorTestBase):
    """Cyborg's own ``failed`` event: the FPGA refuses the bitstream."""

    NUM_VFS = 1

    def test_programming_fails(self):
        self.start_glance()
        image = self.create_bitstream(FUNCTION_ID, extra='fail\n')
        _name, flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:bitstream_id': image}])
        self.start_accel_compute('compute1')
        server = self.wait_error(self.post_server(flavor))
        # Rescheduled, no host left.
        self.assertIn('Exhausted all hosts available for retrying build '
                      'failures', self.fault(server))
        self.assert_clean(server)
        # No reservation of the FPGA is left behind.
        for name, rp in self.device_rp_uuids('compute1').items():
            inventory = self.placement.get(
                '/resource_providers/%s/inventories' % rp,
                version='1.26').body['inventories']
            self.assertEqual(0, inventory['FPGA']['reserved'], name)
