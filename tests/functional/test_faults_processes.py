"""Processes killed mid-operation, RabbitMQ restarted, Placement conflicts
and outages.

Each case asserts a recovery or a clear error, and afterwards that nothing
leaked: Cyborg holds ARQs only for the servers that exist (Bound to their
host), each device provider allocates exactly those ARQs and reserves
nothing, and no host has an mdev (the profiles ask for PCI VFs).

Cases and outcomes:

nova-compute killed (in the test process: its RPC server stops without
waiting, and its thread in the operation is frozen where it was, holding
no lock; see Freeze), then restarted:

* mid-boot, while it waits for Cyborg's bind event (Cyborg binds
  meanwhile, nobody hears it): the restarted service sets the server to
  ERROR, which keeps its ARQ and allocation; deleting it frees both, and a
  new server gets the host's only VF.
* mid-delete, after the guest was destroyed and the server marked
  DELETED, before its ARQ was deleted: the restarted service completes the
  deletion, frees the allocation and deletes the ARQ (patch 0003; it was
  left Bound, its attach handle in use, and the next server on that VF
  failed), and a new server gets the VF.

Cyborg's API and conductor (one child process) killed and restarted with
their database:

* while a bind job waits for the sidecar's fpga_program: nothing finishes
  the bind; Nova gives up after ``arq_binding_timeout`` (ERROR, "Timed out
  after N seconds waiting for Cyborg to bind"), deletes the ARQ in the
  restarted Cyborg and frees the allocation. The card was programmed all
  the same: the sidecar gives the provider back and reports the function.
  The restarted Cyborg binds the next server.

The sidecar daemon SIGKILLed (test_sidecar_daemon has it killed while
programming outside a boot):

* while it programs the card for a boot (the conductor waits for its
  fpga_program): the conductor's call times out, the ARQ is BindFailed,
  Nova reschedules and, with no other host, the server goes to ERROR
  ("Exceeded maximum number of retries") with no ARQ and no allocation.
  Started again, the sidecar undoes the reservation and the provider's
  function trait is the one the card really holds; a boot then programs
  the card and is ACTIVE.
* dead (between two report cycles) when Cyborg asks it to program the
  card for a boot: the call waits in its queue; started again within the
  conductor's RPC timeout, the sidecar programs the card and the boot
  ends ACTIVE with the new function trait.
* started again while Placement is down: it starts all the same, says
  it cannot read Placement ("Placement is unreachable") and keeps
  running; once Placement is back, it programs the card for a boot, which
  is ACTIVE.

RabbitMQ restarted (a private broker of the test, see
tests.functional.harness.broker.PrivateBroker; the shared one is never
touched). A restart from an empty node takes 8 s on an idle machine and
over 20 s on a busy one; every wait for its end has a deadline of minutes,
and cyborg-conductor's RPC timeout is as long:

* under cyborg-conductor and the sidecar: the sidecar's report of a change
  (a port's VF gone) goes through once both have reconnected (a failed one
  is sent again at the next cycle), and that port's deployable and
  provider go.
* once each of them consumes its queues again (a call sent before that is
  lost, in any deployment whose queues do not survive the broker), a
  boot asking for a bitstream programs the card (the conductor's call
  reaches the sidecar again) and is ACTIVE.
* while the conductor waits for the sidecar's fpga_program: both
  reconnect, the answer reaches the conductor, the boot ends ACTIVE with
  the new function.

Placement conflicts and outages:

* two boots scheduled at the same time for a host's last free VF: both
  get it as candidate, Placement takes one claim and refuses the other
  (HTTP 409, capacity); that server fails with "No valid host" holding
  nothing, the other is ACTIVE.
* the same with two FPGAs of one VF each: the refused claim is tried again
  with the host's next candidate (nova_cyborg.flows.scheduling.claim), and both
  servers are ACTIVE, one on each FPGA.
* Placement down while Nova schedules: the boot fails with "No valid
  host", no ARQ was created and nothing is allocated; once Placement is
  back a boot works.
* a generation conflict (HTTP 409) on cyborg-conductor's inventory update
  while the sidecar reports a VF of an SR-IOV PF gone (the PCI driver's
  device: one provider whose total is its VFs; a DFL card's port is a
  provider of one, which a VF gone removes): the conductor ignores it and
  answers the report, its database saying 3 VFs and Placement 4, for good
  (the next report changes nothing in its database). Fixed in the
  sidecar: after each report it checks its providers' totals and sets
  the one the conductor should have written. Three servers then boot, a
  fourth fails with "No valid host".
* Placement down (connections refused) while the sidecar reports: the
  conductor fails the report, the sidecar sends it again each cycle, and
  once Placement is back the inventory follows; three servers boot, a
  fourth fails with "No valid host".
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from unittest import mock  # noqa: E402

import fixtures  # noqa: E402
from keystoneauth1 import exceptions as ksa_exc  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from nova.scheduler.client import report  # noqa: E402
from oslo_concurrency import lockutils  # noqa: E402
from testtools import content  # noqa: E402

from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from tests.functional.harness import broker as broker_mod  # noqa: E402
from tests.functional.harness import cyborg_fixture  # noqa: E402
from tests.functional.harness import loopback  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402

LOG = logging.getLogger(__name__)

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
#: Functions of the test bitstreams (see test_sidecar).
F_A = test_sidecar.F_A
F_OLD = test_sidecar.F_OLD


class Killed(Exception):
    """The process running this thread was killed (raised at cleanup)."""


class Freeze(fixtures.Fixture):
    """nova-compute "killed" in an operation on a server: its thread that
    calls ``target`` (with the instance as positional argument
    ``instance_arg``) stops there and never goes on while the test runs.

    A dead process holds no lock: the instance's lock, which the build
    holds, is released meanwhile, so that the restarted nova-compute
    (in the same test process) can delete the server. Only calls made
    while ``active`` freeze. :meth:`release` (due before the services of
    the test are torn down, whose stop waits for their threads) takes the
    lock back and lets the thread go on with :class:`Killed` raised.
    """

    def __init__(self, target, instance_arg):
        super().__init__()
        self.target = target
        self.instance_arg = instance_arg
        self.active = True

    def _setUp(self):
        self.entered = threading.Event()
        self._release = threading.Event()
        self._locks = []
        module, _, attr = self.target.rpartition('.')
        real = getattr(__import__(module, fromlist=[attr]), attr)
        fixture = self

        def frozen(*args, **kwargs):
            if not fixture.active:
                return real(*args, **kwargs)
            lock = lockutils._semaphores.get(
                args[fixture.instance_arg].uuid)
            lock.release()
            fixture._locks.append(lock)
            fixture.entered.set()
            fixture._release.wait()
            raise Killed('killed at %s' % fixture.target)

        self.useFixture(fixtures.MonkeyPatch(self.target, frozen))
        self.addCleanup(self.release)

    def wait_entered(self, timeout=waits.DEADLINE):
        if not self.entered.wait(timeout):
            raise AssertionError('nothing reached %s' % self.target)

    def release(self):
        if self._release.is_set():
            return
        for lock in self._locks:
            lock.acquire(timeout=30)
        self._release.set()


class ProcessFaultBase(base.AcceleratorTestBase):
    """What every case checks once the fault is over: nothing leaked."""

    #: cyborg-conductor's (and API's) RPC timeout, e.g. for fpga_program;
    #: None for oslo.messaging's 60 s.
    CYBORG_RPC_TIMEOUT = None
    #: {test method name: its CYBORG_RPC_TIMEOUT}, for a test whose fault
    #: is a call that times out.
    CYBORG_RPC_TIMEOUTS = {}

    def setUp(self):
        rpc_timeout = self.CYBORG_RPC_TIMEOUTS.get(
            self._testMethodName, self.CYBORG_RPC_TIMEOUT)
        if rpc_timeout:
            self.useFixture(fixtures.MonkeyPatch(
                'tests.functional.harness.cyborg_fixture.CONFIG_TEMPLATE',
                cyborg_fixture.CONFIG_TEMPLATE +
                '\n[DEFAULT]\nrpc_response_timeout = %d\n' % rpc_timeout))
        # Keep the loopback servers of the harness (Placement for Cyborg
        # and the sidecars is the first one) to take Placement down.
        self.served = []
        real_serve = loopback.serve

        def serve(app, host='127.0.0.1', port=0):
            server, url = real_serve(app, host, port)
            self.served.append((server, app))
            return server, url
        patcher = mock.patch.object(loopback, 'serve', serve)
        patcher.start()
        try:
            super().setUp()
        finally:
            patcher.stop()
        # The Cyborg process's log, for a test that fails (Nova's and the
        # sidecar's are in the captured logging already).
        self.addOnException(self._attach_cyborg_log)

    def _attach_cyborg_log(self, exc_info):
        path = getattr(getattr(self, 'cyborg', None), 'log_path', None)
        if path and os.path.exists(path):
            with open(path, errors='replace') as f:
                lines = f.readlines()
            self.addDetail('cyborg.log', content.text_content(
                ''.join(lines[-400:])))
        # A sidecar daemon in a process of its own logs to its file.
        daemon = getattr(self, 'daemon', None)
        if daemon is not None and hasattr(daemon, 'read_log'):
            self.addDetail('sidecar-daemon.log', content.text_content(
                ''.join(daemon.read_log().splitlines(True)[-400:])))

    # Providers

    def inventory(self, name):
        return test_sidecar.SidecarTestBase.inventory(self, name)

    def provider(self, name):
        return test_sidecar.SidecarTestBase.provider(self, name)

    def traits(self, name):
        return test_sidecar.SidecarTestBase.traits(self, name)

    def wait_for(self, predicate, what, timeout=waits.DEADLINE):
        waits.wait_until(predicate, what, timeout=timeout, poll=0.2)

    def bitstream_flavor(self, function_id, extra=''):
        image = self.create_bitstream(function_id, extra=extra)
        return self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:bitstream_id': image}])[1]

    # Placement as Cyborg and the sidecars reach it (a loopback server)

    def placement_app(self, wrapper):
        """Put ``wrapper(app)`` in front of the Placement app that Cyborg
        and the sidecars call."""
        server, app = self.served[0]
        server.set_app(wrapper(app))

    def placement_down(self):
        """Stop the loopback server: connections are refused."""
        server, _app = self.served[0]
        loopback.stop(server)

    def placement_back(self):
        """Serve Placement on its port again."""
        server, app = self.served[0]
        new, url = loopback.serve(server.get_app(), port=server.server_port)
        self.addCleanup(loopback.stop, new)
        self.assertEqual(self.placement_url, url)
        self.served[0] = (new, app)

    # Servers

    def post_server(self, flavor, name='server'):
        return self.api.post_server({'server': self._build_server(
            flavor_id=flavor, image_uuid=base.IMAGE, networks='none',
            name=name)})

    def wait_settled(self, servers, timeout=waits.DEADLINE):
        """Wait until no server is building; return them, fresh."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            servers = [self.api.get_server(s['id']) for s in servers]
            if all(s['status'] in ('ACTIVE', 'ERROR') and
                   s['OS-EXT-STS:task_state'] is None for s in servers):
                return servers
            time.sleep(0.2)
        self.fail('servers still building: %s' % [
            (s['id'], s['status'], s['OS-EXT-STS:task_state'])
            for s in servers])

    def assert_programmed_then_deleted(self, server, function_id):
        """``server`` is ACTIVE with a port's VF, whose provider carries
        ``function_id``; deleting it leaves nothing."""
        self.assert_accelerated(server, 1)
        (vf,) = self.hostdev_bdfs(server)
        self.assertIn(test_sidecar.function_trait(function_id),
                      self.traits('%s_%s' % (server['OS-EXT-SRV-ATTR:host'],
                                             vf)))
        self.assert_no_leaks([server])
        self.delete_all([server])
        self.assert_no_leaks()

    def delete_all(self, servers):
        """Delete servers (an ERROR one too, as a user would) and check
        each leaves nothing behind."""
        for server in servers:
            self._delete_server(server)
            self.assert_nothing_left(server['id'])

    # Leaks

    def sysfs_root(self, hostname):
        sidecar = self.sidecars.get(hostname)
        return sidecar.sysfs_root if sidecar is not None else None

    def mdevs(self, hostname):
        """mdevs on the host: in its sysfs tree and in libvirt."""
        found = []
        root = self.sysfs_root(hostname)
        if root is not None:
            path = os.path.join(root, 'bus', 'mdev', 'devices')
            if os.path.isdir(path):
                found.extend(os.listdir(path))
        conn = self.computes[hostname].driver._host.get_connection()
        found.extend(conn.mdev_info.devices)
        return found

    def assert_no_leaks(self, servers=()):
        """Cyborg holds ARQs only for ``servers`` (bound to their hosts),
        each device provider allocates exactly their ARQs and reserves
        nothing, and no host has an mdev (the profiles ask for VFs)."""
        live = {s['id']: s['OS-EXT-SRV-ATTR:host'] for s in servers}
        arqs = self.cyborg.list_arqs()
        self.assertEqual(
            sorted(live), sorted(a['instance_uuid'] for a in arqs))
        expected = {}
        for arq in arqs:
            self.assertEqual(('Bound', live[arq['instance_uuid']]),
                             (arq['state'], arq['hostname']))
            expected[arq['device_rp_uuid']] = expected.get(
                arq['device_rp_uuid'], 0) + 1
        for host in self.computes:
            for name, rp in self.device_rp_uuids(host).items():
                self.assertEqual(
                    expected.get(rp, 0),
                    sum(self._get_provider_usages(rp).values()), name)
                inventory = self.placement.get(
                    '/resource_providers/%s/inventories' % rp,
                    version='1.26').body['inventories']
                self.assertEqual(
                    {0}, {inv['reserved'] for inv in inventory.values()},
                    name)
            self.assertEqual([], self.mdevs(host))


class ComputeKilledTest(ProcessFaultBase):
    """nova-compute killed mid-boot and mid-delete, then restarted."""

    def kill_compute(self, hostname):
        """Stop serving at once, as a killed process does: without waiting
        for the RPC handlers in progress (a frozen one would never end)."""
        service = self.computes[hostname]
        service._wait_rpc_server = lambda rpc_server, topic: None
        service.stop()

    def _killed_mid_boot(self):
        self.start_accel_compute('compute1', num_vfs=1)
        _name, self.flavor = self.create_profile_flavor(PROFILE)
        freeze = self.useFixture(Freeze(
            'nova_cyborg.steps.bound_arqs._wait', 2))
        server = self.post_server(self.flavor)
        freeze.wait_entered()
        # Killed: it serves nothing more and its build never goes on.
        self.kill_compute('compute1')
        freeze.active = False
        # Cyborg bound the ARQ meanwhile: nobody was there to hear it.
        self._wait_for_assert(lambda: self.assertEqual(
            ['Bound'], [a['state'] for a in
                        self.cyborg.list_arqs(server['id'])]))
        self.restart_compute_service('compute1')
        # Before the restarted service's stop, which waits for the threads.
        self.addCleanup(freeze.release)
        # nova-compute's start finds a server it was building: ERROR.
        return self._wait_for_server_parameter(
            server, {'status': 'ERROR', 'OS-EXT-STS:task_state': None},
            wait_for_fault_key=False)

    def test_killed_waiting_for_the_bind_event_then_deleted(self):
        server = self._killed_mid_boot()
        # It keeps its ARQ and allocation until it is deleted.
        self.assert_no_leaks([server])
        self.delete_all([server])
        self.assert_no_leaks()
        # The only VF is free again.
        server2 = self.boot(self.flavor)
        self.assert_accelerated(server2, 1)
        self.delete_all([server2])
        self.assert_no_leaks()

    def test_killed_deleting_after_the_guest_is_gone(self):
        # Killed in the delete after the guest is destroyed and the server
        # marked DELETED, before its ARQ is deleted: the restarted
        # nova-compute completes the deletion.
        self.start_accel_compute('compute1', num_vfs=1)
        _name, flavor = self.create_profile_flavor(PROFILE)
        server = self.boot(flavor)
        self.assert_accelerated(server, 1)
        freeze = self.useFixture(Freeze(
            'nova_cyborg.flows.cleanup.delete.'
            'delete_arqs_of_deleting_instance', 1))
        self.api.delete_server(server['id'])
        freeze.wait_entered()
        self.kill_compute('compute1')
        freeze.active = False
        self.restart_compute_service('compute1')
        self.addCleanup(freeze.release)
        self._wait_until_deleted(server)
        self.assertEqual({}, self.allocations(server['id']))
        # Its ARQ too (patch 0003: _complete_partial_deletion).
        self.assert_nothing_left(server['id'])
        self.assert_no_leaks()
        server2 = self.boot(flavor)
        self.assert_accelerated(server2, 1)
        self.delete_all([server2])
        self.assert_no_leaks()


class Daemon:
    """``nova-cyborg-sidecar`` as a process for a simulated host, which can
    be SIGKILLed and started again (as in test_sidecar_daemon).

    It asks ``test:///default`` which devices domains use: it cannot see
    the domains of the host's fakelibvirt, which only matters to the
    refusal to reprogram a card under a running server.
    """

    def __init__(self, test, hostname):
        self.test = test
        self.hostname = hostname
        glance = test.start_glance()
        base_dir = test.useFixture(fixtures.TempDir()).path
        self.sysfs_root = test.hosts[hostname].write(
            os.path.join(base_dir, 'sys'))
        self.state = os.path.join(base_dir, 'state')
        self.config = sidecar_fixture.write_config(
            os.path.join(base_dir, 'sidecar.conf'), host=hostname,
            sysfs_root=self.sysfs_root, state_path=self.state,
            placement_url=test.placement_url, glance_url=glance.endpoint,
            cyborg_url=test.cyborg.endpoint)
        helper = os.path.join(os.path.dirname(sys.executable),
                              'privsep-helper')
        with open(self.config, 'a') as f:
            f.write('\n[DEFAULT]\ntransport_url = %s\n'
                    '[sidecar]\nlibvirt_uri = test:///default\n'
                    '[sidecar_privsep]\nhelper_command = %s --config-file '
                    '%s\n' % (test.broker.transport_url, helper,
                              self.config))
        self.log = os.path.join(base_dir, 'sidecar.log')
        self.process = None

    def start(self, wait=True):
        self.starts = self.started() + 1
        script = os.path.join(os.path.dirname(sys.executable),
                              'nova-cyborg-sidecar')
        self.process = subprocess.Popen(
            [script, '--config-file', self.config, '--log-file', self.log],
            cwd=sidecar_fixture.REPO_ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.test.addCleanup(self.kill)
        if wait:
            self.wait_started()

    def started(self):
        return self.read_log().count('Sidecar for host %s started'
                                     % self.hostname)

    def read_log(self):
        if not os.path.exists(self.log):
            return ''
        with open(self.log) as f:
            return f.read()

    def wait_started(self, timeout=waits.DEADLINE):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.started() >= self.starts:
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.test.fail('the sidecar did not start; its log:\n%s'
                       % self.read_log()[-4000:])

    def kill(self):
        """SIGKILL the daemon and what it started (privsep, programmer)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class SidecarKilledTest(ProcessFaultBase):
    """The sidecar daemon killed mid-operation and started again."""

    #: The conductor waits this long for a call to the sidecar: long enough
    #: for a sidecar started again on a busy machine.
    CYBORG_RPC_TIMEOUT = 180
    #: The call that the killed sidecar never answers times out sooner.
    CYBORG_RPC_TIMEOUTS = {
        'test_killed_while_the_conductor_waits_for_fpga_program': 20}

    def setUp(self):
        super().setUp()
        self.start_glance()
        # A card with one port, released to its VF: one provider of one.
        self.start_accel_compute('compute1', sidecar=False, num_vfs=1,
                                 function_ids=[F_OLD])
        (self.pf,) = self.pf_bdfs('compute1')
        (self.name,) = self.fpga_providers('compute1', self.pf)
        self.daemon = Daemon(self, 'compute1')
        self.daemon.start()

    def sysfs_root(self, hostname):
        return self.daemon.sysfs_root

    def loaded(self):
        host = self.hosts['compute1']
        path = host.afu_id_path(host.fpga_card(self.pf).handles()[0])
        with open(path) as f:
            return f.read().strip()

    def test_killed_while_the_conductor_waits_for_fpga_program(self):
        # The sidecar dies while it programs the port for a boot: the
        # conductor's call times out, the bind fails, and the boot fails
        # on the only host. Started again, the sidecar gives the provider
        # back with the function the card really holds; a boot then
        # programs the card.
        slow = self.bitstream_flavor(F_A, extra='sleep 120\n')
        server = self.post_server(slow)
        self.wait_for(lambda: self.inventory(self.name)['FPGA'][
            'reserved'] == 1, 'the reservation while programming')
        self.daemon.kill()
        self.daemon.start()
        self.wait_for(lambda: self.inventory(self.name)['FPGA'][
            'reserved'] == 0, 'the reservation to be undone')
        self.assertEqual(F_OLD, self.loaded())
        self.assertIn(test_sidecar.function_trait(F_OLD),
                      self.traits(self.name))
        self.assertNotIn(test_sidecar.function_trait(F_A),
                         self.traits(self.name))
        server = self._wait_for_server_parameter(
            server, {'status': 'ERROR', 'OS-EXT-STS:task_state': None})
        # Rescheduled after the failed bind (BindFailed): no other host.
        self.assertIn('Exceeded maximum number of retries',
                      server['fault']['message'])
        self.assert_nothing_left(server['id'])
        self.assert_no_leaks()

        fast = self.bitstream_flavor(F_A)
        server2 = self.boot(fast)
        self.assert_accelerated(server2, 1)
        self.assertEqual(F_A, self.loaded())
        self.delete_all([server, server2])
        self.assert_no_leaks()

    def test_down_while_a_boot_binds(self):
        # The sidecar is dead (between two report cycles) when Cyborg asks
        # it to program the card for a boot: the call waits in the
        # sidecar's queue; started again within the conductor's RPC
        # timeout, the sidecar programs the card and the boot ends ACTIVE.
        self.daemon.kill()
        fast = self.bitstream_flavor(F_A)
        server = self.post_server(fast)
        self.wait_for(lambda: 'fpga_program' in self.cyborg_log(),
                      'the call to the sidecar')
        self.daemon.start()
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(F_A, self.loaded())
        self.assert_programmed_then_deleted(server, F_A)

    def test_started_while_placement_is_down(self):
        # Killed, and started again while Placement is down: it cannot
        # find its provider, says why and keeps running (since 06fcf77 it
        # no longer exits for its unit file to restart it); once Placement
        # is back, it serves the conductor again.
        self.daemon.kill()
        self.placement_down()
        self.daemon.start()
        self.wait_for(lambda: 'Cannot read Placement: Placement: Placement '
                      'is unreachable' in self.daemon.read_log(),
                      'the sidecar saying Placement is unreachable')
        self.assertIsNone(self.daemon.process.poll())
        self.placement_back()
        server = self.boot(self.bitstream_flavor(F_A))
        self.assert_accelerated(server, 1)
        self.assertEqual(F_A, self.loaded())
        self.delete_all([server])
        self.assert_no_leaks()

    def cyborg_log(self):
        with open(self.cyborg.log_path) as f:
            return f.read()


class RabbitRestartTest(ProcessFaultBase):
    """The broker restarted under cyborg-conductor and the sidecar."""

    #: The conductor's fpga_program call spans a restart of the broker
    #: (8 s idle, over 20 s on a busy machine) and the reconnections.
    CYBORG_RPC_TIMEOUT = 180
    #: Each test is a restart and a boot on top of the deadlines above.
    TIMEOUT_SCALING_FACTOR = 3

    def setUp(self):
        self.rabbit = self.useFixture(broker_mod.PrivateBroker())
        super().setUp()
        self.assertEqual(self.rabbit.port, self.broker.port)
        self.start_glance()
        # A card with four ports, each released to its VF: four
        # providers of one FPGA each.
        self.start_accel_compute('compute1', function_ids=[F_OLD],
                                 num_vfs=4, rpc_timeout=5)
        (self.pf,) = self.pf_bdfs('compute1')
        self.names = self.fpga_providers('compute1', self.pf)

    def restart_broker(self, wait=False):
        """Restart the broker; with ``wait``, return once every queue that
        had a consumer before (the conductor's, the sidecar's, their reply
        queues) has one again."""
        consumed = [name for name, count in
                    self.rabbit.consumers(self.broker.vhost).items() if count]
        self.assertTrue(consumed)
        LOG.info('Restarting the broker; queues with consumers: %s',
                 ', '.join(sorted(consumed)))
        start = time.monotonic()
        self.rabbit.restart(vhosts=[self.broker])
        LOG.info('The broker is back after %.1f s',
                 time.monotonic() - start)
        if wait:
            self.rabbit.wait_consumers(self.broker.vhost, consumed,
                                       timeout=waits.DEADLINE)
            LOG.info('Every queue has its consumers again after %.1f s',
                     time.monotonic() - start)

    def report_until_sent(self, timeout=waits.DEADLINE):
        """Cycles until a report goes through (each failed one is sent
        again); returns how many failed."""
        failed = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sidecars['compute1'].cycle():
                return failed
            failed += 1
            time.sleep(1)
        self.fail('no report went through in %d s' % timeout)

    def test_report_after_a_restart(self):
        self.restart_broker()
        # The last port's VF goes: the report drops its deployable.
        host = self.hosts['compute1']
        host.remove_function(max(host.functions[self.pf].virtfns.values()))
        self.report_until_sent()
        kept, gone = self.names[:3], self.names[3]
        self.assertEqual(kept, sorted(
            d['name'] for d in self.cyborg.list_deployables()))
        for name in kept:
            self.assertEqual(1, self.inventory(name)['FPGA']['total'])
        self.assertEqual([], self.placement.get(
            '/resource_providers?name=%s' % gone,
            version='1.14').body['resource_providers'])

    def test_boot_programs_after_a_restart(self):
        self.restart_broker(wait=True)
        # The conductor's fpga_program call reaches the sidecar again.
        server = self.boot(self.bitstream_flavor(F_A))
        self.assert_programmed_then_deleted(server, F_A)

    def programmed_at(self):
        """When the card finished each programming job (time.time())."""
        log = os.path.join(os.path.dirname(
            self.sidecars['compute1'].sysfs_root), 'programmed.log')
        with open(log) as f:
            return [float(line.split()[0]) for line in f]

    def test_restart_while_the_conductor_waits_for_fpga_program(self):
        # The broker goes while the sidecar programs a port: both ends
        # reconnect, the conductor's reply queue is declared again and the
        # sidecar's answer reaches it; the boot ends ACTIVE.
        slow = self.bitstream_flavor(F_A, extra='sleep 15\n')
        server = self.post_server(slow)
        self.wait_for(lambda: sum(self.inventory(name)['FPGA']['reserved']
                                  for name in self.names) == 1,
                      'the reservation of a port while programming')
        self.rabbit.stop()
        stopped = time.time()
        self.rabbit.start(vhosts=[self.broker])
        (server,) = self.wait_settled(
            [server], timeout=self.CYBORG_RPC_TIMEOUT + waits.DEADLINE)
        # The card was done after the broker had gone: the answer crossed
        # the restart.
        (finished,) = self.programmed_at()
        self.assertGreater(finished, stopped)
        self.assert_programmed_then_deleted(server, F_A)


class CyborgKilledTest(ProcessFaultBase):
    """Cyborg's API and conductor killed mid-bind, then restarted."""

    def test_killed_while_the_fpga_is_programmed(self):
        # The bind job (in the API process) waits for the sidecar's
        # fpga_program when Cyborg is killed: nothing ends the bind, Nova
        # gives up after arq_binding_timeout and deletes the ARQ in the
        # restarted Cyborg.
        self.flags(arq_binding_timeout=15)
        self.start_glance()
        slow = self.bitstream_flavor(F_A, extra='sleep 10\n')
        # A card with one port, released to its VF.
        self.start_accel_compute('compute1', function_ids=[F_OLD],
                                 num_vfs=1)
        (pf,) = self.pf_bdfs('compute1')
        (vf,) = self.handle_bdfs('compute1')
        (name,) = self.fpga_providers('compute1', pf)
        server = self.post_server(slow)
        self.wait_for(lambda: self.inventory(name)['FPGA']['reserved'] == 1,
                      'the reservation while programming')
        self.cyborg.restart()
        server = self._wait_for_server_parameter(
            server, {'status': 'ERROR', 'OS-EXT-STS:task_state': None})
        # Nova gave up on the bind: after arq_binding_timeout, or at once
        # when Cyborg died before Nova had read its answer to the bind's
        # PATCH (seen with Nova 33 on eventlet beside Cyborg 16).
        self.assertRegex(
            server['fault']['message'],
            'Timed out after 15 seconds waiting for Cyborg|'
            'Failed to bind accelerator requests: could not reach Cyborg '
            'for PATCH /accelerator_requests')
        self.assert_nothing_left(server['id'])
        # The card was programmed all the same; the sidecar gave the
        # provider back and reported the function.
        self.wait_for(lambda: self.inventory(name)['FPGA']['reserved'] == 0,
                      'the end of the reservation')
        self.assertEqual(F_A, test_sidecar.SidecarTestBase.loaded(
            self, 'compute1', vf))
        self.assertIn(test_sidecar.function_trait(F_A), self.traits(name))
        self.assert_no_leaks()
        # The restarted Cyborg binds (with the same function: the sidecar
        # promised the card to it), in Nova's usual time.
        self.flags(arq_binding_timeout=300)
        server2 = self.boot(slow)
        self.assert_accelerated(server2, 1)
        self.delete_all([server, server2])
        self.assert_no_leaks()


class ConflictOnce:
    """WSGI middleware in front of Placement: before the first request that
    ``match(method, path)`` selects, another writer updates the provider
    (a trait is added and removed: its generation moves by two), so the request
    meets a generation conflict. Records who sent the requests (the
    sidecar or another) and the statuses answered."""

    def __init__(self, test, match):
        self.test = test
        self.match = match
        self.statuses = []
        self.app = None

    def __call__(self, app):
        self.app = app
        return self.handle

    def handle(self, environ, start_response):
        method, path = environ['REQUEST_METHOD'], environ['PATH_INFO']
        if not self.match(method, path):
            return self.app(environ, start_response)
        if not self.statuses:
            rp = path.split('/')[2]
            url = '/resource_providers/%s/traits' % rp
            body = self.test.placement.get(url, version='1.6').body
            traits = body['traits']
            generation = body['resource_provider_generation']
            for written in (traits + ['HW_CPU_X86_AVX'], traits):
                generation = self.test.placement.put(url, {
                    'resource_provider_generation': generation,
                    'traits': written}, version='1.6').body[
                        'resource_provider_generation']

        sender = ('sidecar' if 'nova-cyborg-sidecar' in environ.get(
            'HTTP_USER_AGENT', '') else 'other')

        def record(status, headers, exc_info=None):
            self.statuses.append((sender, int(status.split()[0])))
            return start_response(status, headers, exc_info)
        return self.app(environ, record)


class PlacementReportTest(ProcessFaultBase):
    """A generation conflict and an outage of Placement while the sidecar
    reports (cyborg-conductor writes Placement).

    The device is an SR-IOV PF reported by the PCI driver: one provider
    whose total is its VFs, so a VF gone changes a total (every port of a
    DFL card is a provider of one, which a VF gone removes instead)."""

    RC = 'CUSTOM_SRIOV_VF'
    SPEC = {'vendor_id': '8086', 'product_id': '1528', 'resource_class': RC}

    def setUp(self):
        super().setUp()
        self.start_accel_compute(
            'compute1', num_vfs=4, drivers=('pci',), plain_pfs=True,
            extra_config='[pci]\ndevice_spec = %s' % json.dumps(self.SPEC))
        host = self.hosts['compute1']
        (self.pf,) = [f.address for f in host.functions.values()
                      if f.virtfns]
        self.name = 'compute1_' + self.pf
        self.sidecar = self.sidecars['compute1']
        # A VF disappears: the next report lowers the inventory to 3.
        host.remove_function(max(host.functions[self.pf].virtfns.values()))

    def assert_reported(self, total):
        self.assertEqual(total, self.inventory(self.name)[self.RC]['total'])
        (deployable,) = self.cyborg.list_deployables()
        self.assertEqual(total, deployable['num_accelerators'])
        self.assertFalse(self.sidecar.cycle())

    def assert_boots(self, count):
        """``count`` servers fit on the device, each with one of its VFs,
        and not one more."""
        _name, flavor = self.create_profile_flavor(
            [{'resources:%s' % self.RC: '1'}])
        servers = [self.boot(flavor) for _ in range(count)]
        vfs = set(self.hosts['compute1'].functions[self.pf].virtfns.values())
        for server in servers:
            (arq,) = self.cyborg.list_arqs(server['id'])
            self.assertEqual(('Bound', 'PCI'), (
                arq['state'], arq['attach_handle_type']))
            self.assertEqual([self.arq_bdf(arq)], self.hostdev_bdfs(server))
            self.assertIn(self.arq_bdf(arq), vfs)
        self.assertEqual(count, len({tuple(self.hostdev_bdfs(s))
                                     for s in servers}))
        extra = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', extra['fault']['message'])
        self.assert_no_leaks(servers)
        self.delete_all(servers + [extra])
        self.assert_no_leaks()

    def test_inventory_conflict_while_reporting(self):
        conflict = ConflictOnce(self, lambda method, path: (
            method == 'PUT' and path.endswith('/inventories')))
        self.placement_app(conflict)
        # The conductor's inventory update meets the conflict, which it
        # ignores: it answers the report, its database says 3 and
        # Placement 4. The sidecar checks the totals after a report and
        # sets the one the conductor should have written.
        self.assertTrue(self.sidecar.cycle())
        self.assertEqual([('other', 409), ('sidecar', 200)],
                         conflict.statuses)
        self.assert_reported(3)
        self.assert_boots(3)

    def test_placement_down_while_reporting(self):
        self.placement_down()
        self.assertFalse(self.sidecar.cycle())
        self.assertFalse(self.sidecar.cycle())
        self.assertEqual(4, self.inventory(self.name)[self.RC]['total'])
        self.placement_back()
        self.assertTrue(self.sidecar.cycle())
        self.assert_reported(3)
        self.assert_boots(3)


class PlacementSchedulingTest(ProcessFaultBase):
    """Placement conflicts and outage while Nova schedules."""

    def _boot_concurrently(self, flavor):
        """Boot two servers whose scheduling runs at the same time: each
        claim waits until both servers have their allocation candidates,
        so both claim the same free VF first. Returns the servers, once
        settled, and the result of each claim."""
        barrier = threading.Barrier(2, timeout=waits.DEADLINE)
        claims = []
        waited = set()
        real = report.SchedulerReportClient.claim_resources

        def claim_resources(client, context, consumer_uuid, *args,
                            **kwargs):
            if consumer_uuid not in waited:
                waited.add(consumer_uuid)
                barrier.wait()
            claimed = real(client, context, consumer_uuid, *args, **kwargs)
            claims.append((consumer_uuid, claimed))
            return claimed
        # Cyborg's binds one after the other: the harness runs Cyborg on
        # SQLite, which fails one of two concurrent bind transactions
        # ("database is locked", HTTP 500; a deployment's database server
        # serializes them).
        binding = threading.Lock()
        real_bind = nc_client.CyborgClient.bind_arqs

        def bind_arqs(cyclient, bindings):
            with binding:
                return real_bind(cyclient, bindings)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))
        with mock.patch.object(report.SchedulerReportClient,
                               'claim_resources', claim_resources):
            servers = [self.post_server(flavor, name='server-%d' % i)
                       for i in range(2)]
            servers = self.wait_settled(servers)
        return servers, claims

    def test_concurrent_boots_for_the_last_vf(self):
        # Placement takes one claim and refuses the other (HTTP 409, the
        # VF is gone): that server fails with NoValidHost, holding nothing.
        self.start_accel_compute('compute1', num_vfs=1)
        _name, flavor = self.create_profile_flavor(PROFILE)
        servers, claims = self._boot_concurrently(flavor)
        by_status = {s['status']: s for s in servers}
        self.assertEqual({'ACTIVE', 'ERROR'}, set(by_status))
        self.assertEqual([True, False], sorted(
            (claimed for _uuid, claimed in claims), reverse=True))
        self.assertIn('No valid host',
                      by_status['ERROR']['fault']['message'])
        self.assert_accelerated(by_status['ACTIVE'], 1)
        self.assert_nothing_left(by_status['ERROR']['id'])
        self.assert_no_leaks([by_status['ACTIVE']])
        self.delete_all(servers)
        self.assert_no_leaks()

    def test_concurrent_boots_claim_the_next_candidate(self):
        # Two FPGAs with one VF each: the refused claim is tried again with
        # the host's next candidate (nova_cyborg.flows.scheduling.claim), the
        # other FPGA; both servers are ACTIVE, one on each.
        self.start_accel_compute('compute1', num_pfs=2, num_vfs=2)
        _name, flavor = self.create_profile_flavor(PROFILE)
        servers, claims = self._boot_concurrently(flavor)
        self.assertEqual(['ACTIVE', 'ACTIVE'],
                         [s['status'] for s in servers])
        self.assertEqual(3, len(claims))
        self.assertEqual([False, True, True],
                         sorted(claimed for _uuid, claimed in claims))
        rps = set()
        for server in servers:
            (arq,) = self.assert_accelerated(server, 1)
            rps.add(arq['device_rp_uuid'])
        self.assertEqual(2, len(rps))
        self.assert_no_leaks(servers)
        self.delete_all(servers)
        self.assert_no_leaks()

    def test_placement_down_during_scheduling(self):
        self.start_accel_compute('compute1')
        _name, flavor = self.create_profile_flavor(PROFILE)
        client = self.placement_fixture._client
        down = []

        def request(url, method, *args, **kwargs):
            down.append((method, url))
            raise ksa_exc.ConnectFailure('injected: Placement is down')
        with mock.patch.object(client, 'request', request):
            server = self.boot(flavor, expected_state='ERROR')
        self.assertTrue(down)
        self.assertIn('No valid host', server['fault']['message'])
        self.assert_nothing_left(server['id'])
        self.assert_no_leaks()
        # Placement back: a boot works; the failed server is deleted.
        server2 = self.boot(flavor)
        self.assert_accelerated(server2, 1)
        self.delete_all([server, server2])
        self.assert_no_leaks()
