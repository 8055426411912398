"""Processes of the local cloud: started, named when they fail, stopped."""

import os
import sys

import fixtures
import testtools

from localcloud import layout as layout_mod
from localcloud import procs


class ProcsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.layout = layout_mod.Layout(root=root)
        for d in ('logs', 'pids'):
            os.makedirs(self.layout.path(d))
        self.addCleanup(procs.stop_all, self.layout)

    def test_stop_all_leaves_no_process(self):
        # A service and the child it started (as gunicorn's workers).
        procs.start(self.layout, 'svc', [
            sys.executable, '-c', 'import subprocess, time; subprocess.'
            'Popen(["sleep", "60"]); time.sleep(60)'])
        self.assertEqual(['svc'], list(procs.running(self.layout)))
        self.assertGreater(procs.memory(self.layout), 0)
        self.assertEqual(['svc'], procs.stop_all(self.layout))
        self.assertEqual({}, procs.running(self.layout))

    def test_a_service_that_exits_is_named_with_its_log(self):
        proc = procs.start(self.layout, 'broken', [
            sys.executable, '-c', 'print("bad config"); raise SystemExit(3)'])
        error = self.assertRaises(procs.ServiceError, procs.wait,
                                  self.layout, 'broken', proc,
                                  port=1, timeout=10)
        self.assertEqual('broken', error.name)
        self.assertIn('exited with 3', str(error))
        self.assertIn('bad config', str(error))
        self.assertIn(self.layout.path('logs', 'broken.log'), str(error))

    def test_a_failed_command_is_named(self):
        error = self.assertRaises(procs.ServiceError, procs.run,
                                  self.layout, 'x-db', [
                                      sys.executable, '-c',
                                      'raise SystemExit(2)'])
        self.assertIn('exited with 2', str(error))

    def test_an_error_shows_the_other_logs_it_names(self):
        for name, text in (('compute1', 'host line'),
                           ('cyborg-conductor', 'conductor line')):
            with open(procs.log_path(self.layout, name), 'w') as f:
                f.write(text + '\n')
        error = procs.ServiceError(
            'compute1', 'not ready', procs.log_path(self.layout, 'compute1'),
            also=[procs.log_path(self.layout, 'compute1'),
                  procs.log_path(self.layout, 'cyborg-conductor')])
        text = str(error)
        self.assertEqual(1, text.count('host line'))
        self.assertIn('-- last lines of %s:\nconductor line' %
                      procs.log_path(self.layout, 'cyborg-conductor'), text)

    def test_stop_one_service(self):
        for name in ('one', 'two'):
            procs.start(self.layout, name, [
                sys.executable, '-c', 'import time; time.sleep(60)'])
        self.assertTrue(procs.stop(self.layout, 'one'))
        self.assertEqual(['two'], list(procs.running(self.layout)))
        self.assertFalse(procs.stop(self.layout, 'one'))
