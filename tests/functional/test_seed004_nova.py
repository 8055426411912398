"""Seed 004 on Nova's side: the right function, and no server left in BUILD.

The wrong function: the card's function changes after Cyborg bound the
ARQ and before the guest starts (reprogrammed by hand, reset to its
factory image; also what a stale ``deployable.bitstream_id`` in Cyborg,
which makes it skip programming, leads to). Here a server asks for
function A's bitstream; Cyborg has the sidecar program A, binds, and
then, as nova-compute has the Bound ARQ in hand, the card loads function
B (written to its simulated sysfs as a card reprogrammed by hand reports
it) and the sidecar reports B in Placement. nova-compute checks the
card's function trait against the profile before the guest starts
(nova_cyborg.steps.function_check):

* a second host can program A: the build is rescheduled there, ACTIVE
  with A loaded, nothing left on the first host (no ARQ, no usage, no
  domain) and its card still holds B (no guest ever ran on it);
* no other host: ERROR, the fault names both functions, no ARQ, no
  allocation, no domain.

The same check for a profile requiring the function trait: the card held
A when the scheduler chose it and loads B (by hand) while Cyborg binds;
the build is rescheduled to the other host holding A.

Placement failing to free a refused host's allocation: Cyborg fails the
bind on the first host (its ``failed`` event), nova-compute reschedules
and first frees the host's allocation; Placement answers 500 to that
``DELETE /allocations/<server>`` (the MariaDB deadlock seen in a cloud):

* twice: the delete is retried (nova_cyborg.clients.allocations.free) and the
  server is rescheduled, ACTIVE on the second host;
* always: ERROR with a fault that says the allocation was not freed and
  why the host was refused; once Placement works, deleting the server
  leaves nothing.

Before the fix, the server stayed in BUILD with no host for good in both.
A bind that never completes ends in ERROR after ``arq_binding_timeout``
with its ARQ deleted: test_faults_events.test_event_never_arrives.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import threading  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402
import requests  # noqa: E402

from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_faults_events  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402

F_A = test_sidecar.F_A
F_B = test_sidecar.F_B
F_OLD = test_sidecar.F_OLD
DEADLOCK = ('Deadlock found when trying to get lock; try restarting '
            'transaction')


def load_by_hand(test, host, pf, function_id):
    """The card ``pf`` of ``host`` loads ``function_id`` outside Cyborg
    (a card reprogrammed by hand); its sidecar reports it in Placement."""
    test.hosts[host].set_function_id(pf, function_id)
    trait = test_sidecar.function_trait(function_id)
    rp_name = host + '_' + pf
    waits.wait_until(
        lambda: (test.sidecars[host].cycle() or True) and
        trait in test.traits(rp_name),
        '%s reported for %s' % (trait, rp_name))


class PlacementDeleteFault(fixtures.Fixture):
    """Placement answers 500 to ``DELETE /allocations/<consumer>``, as it
    does when its database reports a deadlock.

    :param times: how many such DELETEs fail; None: all of them.

    ``injected`` counts them. Every other request reaches Placement, and
    every request does after ``stop()``.
    """

    def __init__(self, consumer, times=None):
        super().__init__()
        self.url = '/allocations/%s' % consumer
        self.times = times
        self.injected = 0
        self.stopped = False
        self._lock = threading.Lock()

    def stop(self):
        self.stopped = True

    def _fails(self, url):
        if url != self.url or self.stopped:
            return False
        with self._lock:
            if self.times is not None and self.injected >= self.times:
                return False
            self.injected += 1
            return True

    def _setUp(self):
        from nova.scheduler.client import report
        real = report.SchedulerReportClient.delete
        fault = self

        def delete(client, url, version=None, global_request_id=None):
            if fault._fails(url):
                resp = requests.Response()
                resp.status_code = 500
                resp.headers['Content-Type'] = 'application/json'
                resp._content = json.dumps({'errors': [{
                    'status': 500, 'title': 'Internal Server Error',
                    'detail': DEADLOCK}]}).encode()
                return resp
            return real(client, url, version=version,
                        global_request_id=global_request_id)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.delete',
            delete))


class CardChangesAfterBind(fixtures.Fixture):
    """The FPGA of ``host`` loads ``function_id`` by hand once nova-compute
    has its Bound ARQ in hand, before the guest starts (after
    nova_cyborg.steps.bound_arqs.check_bound, before the function check)."""

    def __init__(self, test, host, pf, function_id):
        super().__init__()
        self.test, self.host, self.pf = test, host, pf
        self.function_id = function_id
        self.done = False

    def _setUp(self):
        from nova_cyborg.steps import bound_arqs as compute
        real = compute.check_bound
        fixture = self

        def check_bound(arqs, arq_uuids):
            result = real(arqs, arq_uuids)
            if not fixture.done and any(
                    arq.get('hostname') == fixture.host for arq in result):
                fixture.done = True
                load_by_hand(fixture.test, fixture.host, fixture.pf,
                             fixture.function_id)
            return result
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.steps.bound_arqs.check_bound', check_bound))


class WrongFunctionTest(test_faults_events.FailedBootChecks,
                        test_sidecar.SidecarTestBase):

    NUM_VFS = 1

    def setUp(self):
        super().setUp()
        self.start_glance()
        self.flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1',
              'accel:bitstream_id': self.create_bitstream(F_A)}])[1]
        self.start_accel_compute('compute1', memory_gb=32,
                                 function_ids=[F_OLD])
        (self.pf,) = self.handle_bdfs('compute1')
        self.change = self.useFixture(
            CardChangesAfterBind(self, 'compute1', self.pf, F_B))

    def assert_compute1_refused(self, server):
        self.assertTrue(self.change.done)
        # A was programmed for the server, then B loaded by hand.
        self.assertEqual([(self.pf, F_A)], self.programmed('compute1'))
        self.assertEqual(F_B, self.loaded('compute1', self.pf))
        for name, rp in self.device_rp_uuids('compute1').items():
            self.assertEqual(0, self._get_provider_usages(rp)['FPGA'], name)
        conn = self.computes['compute1'].driver._host.get_connection()
        self.assertRaises(fakelibvirt.libvirtError,
                          conn.lookupByUUIDString, server['id'])

    def test_wrong_function_reschedules(self):
        self.start_accel_compute('compute2', memory_gb=16,
                                 function_ids=[F_OLD])
        server = self.wait_active(self.post_server(self.flavor))
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        (pf2,) = self.handle_bdfs('compute2')
        self.assertEqual(F_A, self.loaded('compute2', pf2))
        (bound,) = self.assert_accelerated(server, 1)
        self.assertEqual([bound['uuid']],
                         [a['uuid'] for a in self.cyborg.list_arqs()])
        self.assert_compute1_refused(server)

    def test_wrong_function_on_the_only_host(self):
        server = self.wait_error(self.post_server(self.flavor))
        fault = self.fault(server)
        self.assertIn('device holds function INTEL_%s, profile asks %s'
                      % (F_B.upper(), F_A.upper()), fault)
        self.assertIn('Exhausted all hosts', fault)
        self.assert_clean(server)
        self.assert_compute1_refused(server)


class TraitChangedTest(test_faults_events.FailedBootChecks,
                       test_sidecar.SidecarTestBase):

    NUM_VFS = 1

    def test_function_trait_changed_while_binding(self):
        self.flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1',
              'trait:' + test_sidecar.function_trait(F_A): 'required'}])[1]
        for name, memory in (('compute1', 32), ('compute2', 16)):
            self.start_accel_compute(name, memory_gb=memory,
                                     function_ids=[F_A])
        (pf,) = self.handle_bdfs('compute1')
        with test_faults_events.HeldBinds() as binds:
            server = self.post_server(self.flavor)
            binds.wait()
            self.assertEqual(
                ['compute1'],
                [b['hostname'] for _c, bindings in binds.held
                 for b in bindings.values()])
            load_by_hand(self, 'compute1', pf, F_B)
            self.assertTrue(binds.bind())
            server = self.wait_active(server)
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assert_accelerated(server, 1)
        for name, rp in self.device_rp_uuids('compute1').items():
            self.assertEqual(0, self._get_provider_usages(rp)['FPGA'], name)


class AllocationDeleteFaultTest(test_faults_events.FailedBootChecks,
                                base.AcceleratorTestBase):

    NUM_VFS = 1

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1', memory_gb=32)
        self.start_accel_compute('compute2', memory_gb=16)
        _name, self.flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}])

    def bind_fails_on_compute1(self, times):
        """Boot; Cyborg fails the bind on compute1 while Placement answers
        500 to the first ``times`` deletes of the server's allocation.
        Returns the server once it left BUILD, and the fault."""
        with test_faults_events.HeldBinds() as binds:
            server = self.post_server(self.flavor)
            fault = self.useFixture(PlacementDeleteFault(server['id'],
                                                         times=times))
            binds.wait()
            (arq,) = binds.arq_uuids
            body = {'events': [{
                'name': test_faults_events.EVENT, 'server_uuid': server['id'],
                'tag': arq, 'status': 'failed'}]}
            self.admin_api.api_post('/os-server-external-events', body,
                                    check_response_status=[200])
            server = self._wait_for_server_parameter(
                server, {'status': 'ACTIVE' if times else 'ERROR',
                         'OS-EXT-STS:task_state': None})
            self.assertFalse(binds.bind())
        return server, fault, arq

    def test_deadlock_on_free_is_retried_then_rescheduled(self):
        server, fault, arq = self.bind_fails_on_compute1(times=2)
        self.assertEqual(2, fault.injected)
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        (bound,) = self.assert_accelerated(server, 1)
        self.assertNotEqual(arq, bound['uuid'])
        self.assertEqual([bound['uuid']],
                         [a['uuid'] for a in self.cyborg.list_arqs()])
        for name, rp in self.device_rp_uuids('compute1').items():
            self.assertEqual(0, self._get_provider_usages(rp)['FPGA'], name)

    def test_allocation_never_freed_is_error_with_fault(self):
        server, fault, arq = self.bind_fails_on_compute1(times=None)
        self.assertGreaterEqual(fault.injected, 4)
        message = self.fault(server)
        self.assertIn('Placement did not free the allocation '
                      'after 4 attempts', message)
        self.assertIn(DEADLOCK[:20], message)
        self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self.cyborg.list_arqs())
        # Placement works again: deleting the server frees everything.
        fault.stop()
        self._delete_server(server)
        self.assert_clean(server)
