"""Seed 004 on Nova's side: the right function, and no server left in BUILD.

The wrong function: Cyborg skips programming an FPGA when its own record
says the card already has the bitstream (``deployable.bitstream_id``), and
that record goes stale when the card is reprogrammed outside Cyborg. Here
a first server gets the card programmed with function A and is deleted;
the card then loads function B (written to its simulated sysfs as a card
reprogrammed by hand would report it) and the sidecar reports B in
Placement. A second server asking A's bitstream is scheduled to that card
and Cyborg binds it without programming. nova-compute checks the card's
function trait against the profile before the guest starts
(nova_cyborg.function_check):

* a second host can program A: the build is rescheduled there, ACTIVE
  with A loaded, nothing left on the first host (no ARQ, no usage) and
  its card still holds B (no guest ever ran on it);
* no other host: ERROR, the fault names both functions, no ARQ, no
  allocation, no domain.

Placement failing to free a refused host's allocation: Cyborg fails the
bind on the first host (its ``failed`` event), nova-compute reschedules
and first frees the host's allocation; Placement answers 500 to that
``DELETE /allocations/<server>`` (the MariaDB deadlock seen in a cloud):

* twice: the delete is retried (nova_cyborg.allocations.free) and the
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
import os  # noqa: E402
import threading  # noqa: E402

import fixtures  # noqa: E402
import requests  # noqa: E402

from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_faults_events  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402

F_A = test_sidecar.F_A
F_B = test_sidecar.F_B
F_OLD = test_sidecar.F_OLD
DEADLOCK = ('Deadlock found when trying to get lock; try restarting '
            'transaction')


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
        (self.pf,) = self.pf_bdfs('compute1')
        self.rp_name = 'compute1_' + self.pf

    def load_by_hand(self, function_id):
        """The card at compute1 loads ``function_id`` outside Cyborg; the
        sidecar reports it."""
        region = self.hosts['compute1'].functions[self.pf].region
        path = os.path.join(
            self.sidecars['compute1'].sysfs_root, 'bus', 'pci', 'devices',
            self.pf, 'fpga_region', 'region%d' % region, 'afu_id')
        with open(path, 'w') as f:
            f.write(function_id + '\n')
        trait = test_sidecar.function_trait(function_id)
        waits.wait_until(
            lambda: (self.sidecars['compute1'].cycle() or True) and
            trait in self.traits(self.rp_name),
            '%s reported for %s' % (trait, self.rp_name))

    def stale_cyborg_record(self):
        """Cyborg believes compute1's card holds A; it holds B."""
        first = self.boot(self.flavor)
        self.assertEqual('compute1', first['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(F_A, self.loaded('compute1', self.pf))
        self._delete_server(first)
        self.assert_nothing_left(first['id'])
        self.load_by_hand(F_B)
        traits = self.traits(self.rp_name)
        self.assertNotIn(test_sidecar.function_trait(F_A), traits)

    def test_wrong_function_reschedules(self):
        self.stale_cyborg_record()
        self.start_accel_compute('compute2', memory_gb=16,
                                 function_ids=[F_OLD])
        server = self.wait_active(self.post_server(self.flavor))
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        (pf2,) = self.pf_bdfs('compute2')
        self.assertEqual(F_A, self.loaded('compute2', pf2))
        (bound,) = self.assert_accelerated(server, 1)
        self.assertEqual([bound['uuid']],
                         [a['uuid'] for a in self.cyborg.list_arqs()])
        # compute1 was refused: its card keeps B, it holds nothing.
        self.assertEqual(F_B, self.loaded('compute1', self.pf))
        self.assertEqual([(self.pf, F_A)], self.programmed('compute1'))
        for name, rp in self.device_rp_uuids('compute1').items():
            self.assertEqual(0, self._get_provider_usages(rp)['FPGA'], name)
        self.assert_no_domain_on('compute1', server['id'])

    def test_wrong_function_on_the_only_host(self):
        self.stale_cyborg_record()
        server = self.wait_error(self.post_server(self.flavor))
        fault = self.fault(server)
        self.assertIn('device holds function INTEL_%s, profile asks %s'
                      % (F_B.upper(), F_A.upper()), fault)
        self.assertIn('Exhausted all hosts', fault)
        self.assert_clean(server)
        self.assertEqual(F_B, self.loaded('compute1', self.pf))

    def assert_no_domain_on(self, host, server_id):
        from nova.tests.fixtures import libvirt as fakelibvirt
        conn = self.computes[host].driver._host.get_connection()
        self.assertRaises(fakelibvirt.libvirtError,
                          conn.lookupByUUIDString, server_id)


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
