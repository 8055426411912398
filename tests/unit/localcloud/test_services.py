"""``python -m localcloud service``: stop and start one service."""

import io
import os
import signal
import subprocess
import sys
from unittest import mock

import fixtures
import testtools

from localcloud import __main__ as cli
from localcloud import layout as layout_mod
from localcloud import procs
from localcloud import services

#: The names the churn test and the guide use.
NAMES = ['mariadb', 'rabbitmq', 'keystone', 'placement', 'neutron',
         'glance', 'nova-api', 'cyborg-api', 'nova-conductor',
         'nova-scheduler', 'cyborg-conductor', 'nova-compute@compute1',
         'sidecar@compute1', 'nova-compute@compute2', 'sidecar@compute2']


class NamesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.layout = layout_mod.Layout(computes=2)

    def test_names(self):
        self.assertEqual(NAMES, services.names(self.layout))

    def test_services_of_one_process_go_together(self):
        for name, process, together in (
                ('neutron', 'placement', ('placement', 'neutron')),
                ('nova-scheduler', 'nova-conductor',
                 ('nova-conductor', 'nova-scheduler')),
                ('sidecar@compute2', 'compute2',
                 ('nova-compute@compute2', 'sidecar@compute2')),
                ('nova-api', 'nova', ('nova-api',)),
                ('mariadb', 'mariadb', ('mariadb',))):
            found = services.resolve(self.layout, name)
            self.assertEqual((process, together),
                             (found.process, found.names), name)

    def test_process_names_are_accepted(self):
        self.assertEqual(('nova-api',),
                         services.resolve(self.layout, 'nova').names)
        self.assertEqual('compute1',
                         services.resolve(self.layout, 'compute1').host)

    def test_unknown_name(self):
        error = self.assertRaises(ValueError, services.resolve,
                                  self.layout, 'nova-compute@compute3')
        self.assertIn('no such service', str(error))
        self.assertIn('sidecar@compute2', str(error))


class StopTest(testtools.TestCase):
    """Real processes in their own process groups, as ``up`` starts
    them."""

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.layout = layout_mod.Layout(root=root, computes=2)
        for d in ('logs', 'pids', 'hosts/compute1'):
            os.makedirs(self.layout.path(d))
        self.lines = []

    def _start(self, name, also=()):
        proc = procs.start(self.layout, name, [
            sys.executable, '-c', 'import time; time.sleep(600)'],
            also=also)
        self.addCleanup(proc.wait)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def test_stop_kills_the_whole_process(self):
        proc = self._start('placement', also=('neutron',))
        self.assertTrue(services.stop(self.layout, 'neutron',
                                      out=self.lines.append))
        self.assertEqual(-signal.SIGKILL, proc.wait(timeout=60))
        self.assertEqual({}, procs.running(self.layout))
        self.assertEqual([], os.listdir(self.layout.path('pids')))
        self.assertEqual(['neutron: stopped (SIGKILL) (with placement: '
                          'one process, placement)'], self.lines)

    def test_graceful_stop_terminates(self):
        proc = self._start('nova-conductor', also=('nova-scheduler',))
        services.stop(self.layout, 'nova-conductor', graceful=True,
                      out=self.lines.append)
        self.assertEqual(-signal.SIGTERM, proc.wait(timeout=60))
        self.assertIn('stopped (SIGTERM)', self.lines[0])

    def test_host_stop_is_a_crash(self):
        proc = self._start('compute1')
        ready = self.layout.path('hosts', 'compute1', 'ready')
        open(ready, 'w').close()
        with mock.patch('localcloud.hosts.set_forced_down') as forced:
            services.stop(self.layout, 'nova-compute@compute1',
                          out=self.lines.append)
        self.assertEqual(-signal.SIGKILL, proc.wait(timeout=60))
        forced.assert_not_called()
        self.assertFalse(os.path.exists(ready))
        self.assertIn('with sidecar@compute1', self.lines[0])

    def test_stopped_service(self):
        self.assertFalse(services.stop(self.layout, 'glance',
                                       out=self.lines.append))
        self.assertEqual(['glance: was not running'], self.lines)

    def test_start_of_a_running_service_waits_for_it(self):
        self._start('glance')
        with mock.patch.object(procs, 'wait') as wait, \
                mock.patch('localcloud.cloud.wsgi_service') as launch:
            services.start(self.layout, 'glance', out=self.lines.append,
                           timeout=7)
        launch.assert_not_called()
        wait.assert_called_once_with(
            self.layout, 'glance', None,
            url=self.layout.url('glance', '/'), timeout=7)
        self.assertTrue(self.lines[0].startswith('glance: was running, '
                                                 'answers'), self.lines)

    def test_start_launches_and_waits_for_each_api(self):
        with mock.patch.object(procs, 'wait') as wait, \
                mock.patch('localcloud.cloud.wsgi_service') as launch:
            services.start(self.layout, 'neutron', out=self.lines.append)
        launch.assert_called_once_with(self.layout, 'placement', mock.ANY,
                                       also=('neutron',))
        self.assertEqual(
            [self.layout.url('placement', '/'),
             self.layout.url('neutron', '/')],
            [c.kwargs['url'] for c in wait.call_args_list])
        self.assertTrue(self.lines[0].startswith('neutron: started'))


class CommandTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.layout = layout_mod.Layout(root=root, computes=2)
        self.layout.save()
        os.makedirs(self.layout.path('pids'))
        self.out = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        proc = subprocess.Popen([sys.executable, '-c',
                                 'import time; time.sleep(600)'],
                                start_new_session=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        with open(self.layout.path('pids', 'nova-conductor.pid'), 'w') as f:
            f.write('%d\n' % proc.pid)
        self.pid = proc.pid

    def test_list(self):
        self.assertEqual(0, cli.main(['--dir', self.layout.root, 'service',
                                      'list']))
        lines = self.out.getvalue().splitlines()
        self.assertEqual(['SERVICE', 'PROCESS', 'PIDS'], lines[0].split())
        rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
        self.assertEqual(NAMES, list(rows))
        self.assertEqual(['nova-conductor', str(self.pid)],
                         rows['nova-scheduler'])
        self.assertEqual(['mariadb', '(stopped)'], rows['mariadb'])

    def test_unknown_name_fails(self):
        self.assertEqual(1, cli.main(['--dir', self.layout.root, 'service',
                                      'stop', 'nova-compute']))
        self.assertIn('ERROR: nova-compute: no such service',
                      self.out.getvalue())

    def test_stop_needs_a_name(self):
        self.assertEqual(2, cli.main(['--dir', self.layout.root, 'service',
                                      'stop']))
