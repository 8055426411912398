"""The harness's fork server: a forked child is a process of its own.

:mod:`tests.functional.harness.fork_server` forks the Cyborg children of
every functional test; what the fixtures rely on is checked here against
the real server process: the child runs the requested module's ``main``
with the given arguments, environment, working directory and output file,
leads its own session (so that ``killpg`` reaches it), and its exit status
(an exit code, a signal, a failed import) is reported as
:class:`subprocess.Popen` would report it. No Nova or Cyborg service here.
"""

import json
import os
import signal
import sys

import fixtures
import testtools

from tests.functional.harness import fork_server

DEADLINE = 60


def main(argv):
    """What the forked child runs (this module, imported in the child)."""
    what = argv[0]
    print(json.dumps({'pid': os.getpid(), 'sid': os.getsid(0),
                      'ppid': os.getppid(), 'cwd': os.getcwd(),
                      'env': os.environ.get('FORK_PROBE'),
                      'argv': argv, 'stdin': sys.stdin.read()}))
    if what == 'wait':
        signal.pause()
    return int(what) if what.isdigit() else 0


class ForkServerTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(
            int(os.environ.get('OS_TEST_TIMEOUT', 160)), gentle=True))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.output = os.path.join(self.tmp, 'out')

    def _spawn(self, what, module=__name__):
        env = dict(os.environ, FORK_PROBE='probe-%s' % what)
        process = fork_server.spawn(module, [what, '--x'], env, self.tmp,
                                    self.output)
        self.addCleanup(self._kill, process)
        return process

    def _kill(self, process):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(DEADLINE)

    def _report(self):
        with open(self.output) as f:
            return json.loads(f.readline())

    def test_child_runs_main_as_its_own_process(self):
        process = self._spawn('3')
        self.assertEqual(3, process.wait(DEADLINE))
        self.assertEqual(3, process.poll())
        report = self._report()
        self.assertEqual(process.pid, report['pid'])
        self.assertNotEqual(os.getpid(), report['pid'])
        self.assertNotEqual(os.getpid(), report['ppid'])
        self.assertEqual(report['pid'], report['sid'])
        self.assertEqual(os.path.realpath(self.tmp),
                         os.path.realpath(report['cwd']))
        self.assertEqual('probe-3', report['env'])
        self.assertEqual(['3', '--x'], report['argv'])
        self.assertEqual('', report['stdin'])

    def test_killed_child_reports_the_signal(self):
        process = self._spawn('wait')
        self.assertIsNone(process.poll())
        os.killpg(process.pid, signal.SIGKILL)
        self.assertEqual(-signal.SIGKILL, process.wait(DEADLINE))

    def test_child_that_fails_to_start_exits_1_with_its_traceback(self):
        process = self._spawn('0', module='tests.functional.no_such_module')
        self.assertEqual(1, process.wait(DEADLINE))
        with open(self.output) as f:
            self.assertIn('ModuleNotFoundError', f.read())

    def test_children_are_independent(self):
        first, second = self._spawn('wait'), self._spawn('0')
        self.assertEqual(0, second.wait(DEADLINE))
        self.assertIsNone(first.poll())
        self.assertNotEqual(first.pid, second.pid)


class PidGivenAgainTest(testtools.TestCase):
    """A child forked with the pid of an earlier, reaped one is running:
    the earlier child's exit is not reported as its own (a child of the
    suite's Cyborg was once taken for dead at its start, 'exited with
    -9', the exit of the earlier child that had its pid)."""

    def test_new_child_with_an_old_pid_runs(self):
        client = fork_server._Client.__new__(fork_server._Client)
        client._cond = fork_server.threading.Condition()
        client._answers, client._exits, client._gone = [], {}, False
        lines = [{'exit': 4242, 'code': -9}, {'pid': 4242},
                 {'exit': 4243, 'code': 0}]

        class Stdout:
            def __iter__(self):
                return iter(json.dumps(m).encode() + b'\n' for m in lines)
        client.process = type('P', (), {'stdout': Stdout()})()
        client._read()
        # The lines end here, the server does not: it still runs.
        self.assertTrue(client._gone)
        client._gone = False
        self.assertIsNone(client.exit_code(4242))
        self.assertEqual(0, client.exit_code(4243))
        self.assertEqual([{'pid': 4242}], client._answers)
