"""Hosts of the local cloud: when one is ready, stop and start."""

import os
import sys
import types
from unittest import mock

import fixtures
import testtools

from localcloud import hosts
from localcloud import layout as layout_mod
from localcloud import procs

ROOT1, ROOT2, FPGA1, FPGA2 = 'root-1', 'root-2', 'fpga-1', 'fpga-2'


class _Response:

    def __init__(self, body):
        self.body = body

    def json(self):
        return self.body

    def raise_for_status(self):
        pass


class FakeCloud:
    """What Nova's and Placement's APIs answer about the hosts."""

    def __init__(self):
        self.services = {}
        self.fpgas = {'compute1': [FPGA1], 'compute2': [FPGA2]}
        self.names = {'compute1', 'compute2'}
        self.puts = []
        self.placement = mock.Mock(get=self._placement)
        self.compute = mock.Mock(get=self._compute, put=self._put,
                                 hypervisors=self._hypervisors)

    def service(self, host, state='up', updated='2026-01-01T00:00:10',
                forced_down=False):
        self.services[host] = {'id': 'id-' + host, 'host': host,
                               'state': state, 'updated_at': updated,
                               'forced_down': forced_down}

    def _placement(self, path, microversion=None):
        roots = {'compute1': ROOT1, 'compute2': ROOT2}
        if path == '/resource_providers':
            rps = [{'uuid': roots[h], 'name': h} for h in roots]
            rps += [{'uuid': rp, 'name': 'dev'} for rps_ in
                    self.fpgas.values() for rp in rps_]
        else:
            rps = [{'uuid': rp, 'root_provider_uuid': roots[h]}
                   for h, rps_ in self.fpgas.items() for rp in rps_]
        return _Response({'resource_providers': rps})

    def _compute(self, path, microversion=None):
        return _Response({'services': list(self.services.values())})

    def _put(self, path, json=None, microversion=None):
        self.puts.append((path, json))
        for service in self.services.values():
            if path == '/os-services/%s' % service['id']:
                service.update(json)
        return _Response({})

    def _hypervisors(self):
        return [types.SimpleNamespace(name=n) for n in sorted(self.names)]


class HostsTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.layout = layout_mod.Layout(root=root, computes=2)
        for d in ('logs', 'pids', 'hosts/compute1', 'hosts/compute2'):
            os.makedirs(self.layout.path(d))
        self.cloud = FakeCloud()
        self.addCleanup(procs.stop_all, self.layout)

    def ready(self, *names):
        for host in names:
            with open(hosts.ready_file(self.layout, host), 'w') as f:
                f.write('1\n')

    def log(self, name, text):
        with open(procs.log_path(self.layout, name), 'w') as f:
            f.write(text)


class MissingTest(HostsTestCase):

    def _missing(self, since=None):
        return hosts.missing(self.layout, ['compute1', 'compute2'],
                             hosts.compute_services(self.cloud),
                             hosts.fpga_counts(self.cloud),
                             hosts.hypervisors(self.cloud), since)

    def test_fpgas_counted_in_each_compute_nodes_tree(self):
        self.cloud.fpgas['compute2'].append('fpga-3')
        self.assertEqual({'compute1': 1, 'compute2': 2},
                         hosts.fpga_counts(self.cloud))

    def test_ready(self):
        self.cloud.service('compute1')
        self.cloud.service('compute2')
        self.ready('compute1', 'compute2')
        self.assertEqual({}, self._missing())

    def test_each_host_says_what_it_lacks(self):
        self.cloud.service('compute1', state='down')
        self.cloud.fpgas['compute2'] = []
        self.cloud.names = {'compute2'}
        self.ready('compute2')
        self.assertEqual({
            'compute1': ['sidecar converged', 'hypervisor',
                         'nova-compute service up'],
            'compute2': ['nova-compute service up',
                         'FPGAs in Placement (0 of 1)']}, self._missing())

    def test_a_restarted_host_needs_a_new_heartbeat(self):
        self.cloud.service('compute1', updated='2026-01-01T00:00:10')
        self.cloud.service('compute2', updated='2026-01-01T00:00:10')
        self.ready('compute1', 'compute2')
        since = {'compute1': '2026-01-01T00:00:10', 'compute2': None}
        self.assertEqual({'compute1': ['nova-compute heartbeat']},
                         self._missing(since))
        self.cloud.service('compute1', updated='2026-01-01T00:00:20')
        self.assertEqual({}, self._missing(since))

    def test_heartbeat_since(self):
        self.assertFalse(hosts.heartbeat_since(None, None))
        self.assertFalse(hosts.heartbeat_since({'updated_at': None}, None))
        self.assertTrue(hosts.heartbeat_since({'updated_at': 'b'}, None))
        self.assertTrue(hosts.heartbeat_since({'updated_at': 'b'}, 'a'))
        self.assertFalse(hosts.heartbeat_since({'updated_at': 'a'}, 'a'))


class WaitTest(HostsTestCase):

    def setUp(self):
        super().setUp()
        # The services every host needs, as a running cloud has them.
        for name in hosts.RPC_SERVICES:
            procs.start(self.layout, name, [sys.executable, '-c',
                                            'import time; time.sleep(60)'])
        self.host = procs.start(self.layout, 'compute1', [
            sys.executable, '-c', 'import time; time.sleep(60)'])

    def test_forced_down_cleared_after_the_new_processs_heartbeat(self):
        self.cloud.service('compute1', state='down', forced_down=True,
                           updated='2026-01-01T00:00:20')
        self.ready('compute1')
        calls = []

        def services(conn):
            calls.append(1)
            if len(calls) > 1:       # Nova says up once no more forced
                self.cloud.services['compute1']['state'] = 'up'
            return dict(self.cloud.services)

        self.useFixture(fixtures.MockPatchObject(
            hosts, 'compute_services', side_effect=services))
        hosts.wait(self.layout, self.cloud, {'compute1': self.host},
                   since={'compute1': '2026-01-01T00:00:10'}, sleep=0)
        self.assertEqual([('/os-services/id-compute1',
                           {'forced_down': False})], self.cloud.puts)

    def test_not_forced_up_before_the_new_process_reported(self):
        self.cloud.service('compute1', state='down', forced_down=True,
                           updated='2026-01-01T00:00:10')
        self.ready('compute1')
        self.assertRaises(procs.ServiceError, hosts.wait, self.layout,
                          self.cloud, {'compute1': self.host},
                          since={'compute1': '2026-01-01T00:00:10'},
                          timeout=0.2, sleep=0.05)
        self.assertEqual([], self.cloud.puts)

    def test_devices_not_back_shows_the_host_and_conductor_logs(self):
        self.cloud.service('compute1')
        self.cloud.fpgas['compute1'] = []
        self.ready('compute1')
        self.log('compute1', 'compute line\n')
        self.log('cyborg-conductor', 'Failed to add device\n')
        error = self.assertRaises(
            procs.ServiceError, hosts.wait, self.layout, self.cloud,
            {'compute1': self.host}, timeout=0.2, sleep=0.05)
        text = str(error)
        self.assertEqual('compute1', error.name)
        self.assertIn('compute1 lacks FPGAs in Placement (0 of 1)', text)
        self.assertIn('compute line', text)
        self.assertIn('last lines of %s' % procs.log_path(
            self.layout, 'cyborg-conductor'), text)
        self.assertIn('Failed to add device', text)

    def test_a_host_that_exits_is_named(self):
        host = procs.start(self.layout, 'compute2', [
            sys.executable, '-c', 'print("no sysfs"); raise SystemExit(1)'])
        host.wait()
        error = self.assertRaises(
            procs.ServiceError, hosts.wait, self.layout, self.cloud,
            {'compute2': host}, timeout=30, sleep=0.05)
        self.assertIn('compute2: exited with 1', str(error))
        self.assertIn('no sysfs', str(error))

    def test_a_conductor_that_exits_is_named(self):
        procs.stop(self.layout, 'cyborg-conductor')
        error = self.assertRaises(
            procs.ServiceError, hosts.wait, self.layout, self.cloud,
            {'compute1': self.host}, timeout=30, sleep=0.05)
        self.assertEqual('cyborg-conductor', error.name)


class CommandsTest(HostsTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatch(
            'localcloud.identity.admin_connection', return_value=self.cloud))
        self.out = []

    def test_stop_stops_the_host_and_forces_it_down(self):
        procs.start(self.layout, 'compute1', [
            sys.executable, '-c', 'import time; time.sleep(60)'])
        self.ready('compute1')
        self.cloud.service('compute1')
        hosts.stop(self.layout, 'compute1', out=self.out.append)
        self.assertNotIn('compute1', procs.running(self.layout))
        self.assertFalse(os.path.exists(hosts.ready_file(self.layout,
                                                         'compute1')))
        self.assertEqual([('/os-services/id-compute1',
                           {'forced_down': True})], self.cloud.puts)
        self.assertEqual(['compute1: stopped; nova-compute forced down'],
                         self.out)

    def test_start_waits_since_the_last_heartbeat(self):
        self.cloud.service('compute1', updated='2026-01-01T00:00:10',
                           forced_down=True)
        launch = self.useFixture(fixtures.MockPatchObject(
            hosts, 'launch')).mock
        wait = self.useFixture(fixtures.MockPatchObject(hosts, 'wait')).mock
        hosts.start(self.layout, 'compute1', out=self.out.append)
        launch.assert_called_once_with(self.layout, 'compute1', unpatched=None)
        wait.assert_called_once_with(
            self.layout, self.cloud, {'compute1': launch.return_value},
            since={'compute1': '2026-01-01T00:00:10'}, timeout=hosts.TIMEOUT)
        self.assertIn('compute1: started', self.out[0])

    def test_start_refuses_a_running_host(self):
        procs.start(self.layout, 'compute1', [
            sys.executable, '-c', 'import time; time.sleep(60)'])
        error = self.assertRaises(ValueError, hosts.start, self.layout,
                                  'compute1')
        self.assertIn('compute1: already running', str(error))

    def test_unknown_host(self):
        error = self.assertRaises(ValueError, hosts.stop,
                                  self.layout, 'compute9')
        self.assertIn('no such host (hosts: compute1, compute2)', str(error))
