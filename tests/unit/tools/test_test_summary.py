"""tools/test-summary.py: CI's closing line from a tox log."""

import importlib.util
import os

import fixtures
import testtools

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'tools', 'test-summary.py')
_SPEC = importlib.util.spec_from_file_location('test_summary', _PATH)
summary = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(summary)


def totals(passed, failed=0, skipped=0, uxsuccess=0):
    """A stestr Totals block, as ``stestr run`` prints it."""
    return '''
======
Totals
======
Ran: %(ran)d tests in 41.2230 sec.
 - Passed: %(passed)d
 - Skipped: %(skipped)d
 - Expected Fail: 0
 - Unexpected Success: %(uxsuccess)d
 - Failed: %(failed)d
Sum of execute time for each test: 80.1122 sec.

==============
Worker Balance
==============
 - Worker 0 (300 tests) => 0:00:40.921187
 - Worker 1 (297 tests) => 0:00:41.118054
''' % {'ran': passed + failed + skipped + uxsuccess, 'passed': passed,
       'failed': failed, 'skipped': skipped, 'uxsuccess': uxsuccess}


PEP8_OK = '''\
pep8: install_deps> python -I -m pip install 'flake8>=7.0.0'
pep8: commands[0]> flake8 nova_cyborg sidecar tests tools benchmarks
pep8: OK \u2714 in 3.31 seconds
'''

PEP8_FAIL = '''\
pep8: commands[0]> flake8 nova_cyborg sidecar tests tools benchmarks
./tools/test-summary.py:12:80: E501 line too long (81 > 79 characters)
pep8: exit 1 (3.02 seconds) /work/main> flake8 nova_cyborg pid=311
pep8: FAIL \u2716 in 3.1 seconds
'''

PY3 = '''\
.pkg: _optional_hooks> python /usr/lib/pyproject_api/_backend.py True
.pkg: build_editable> python /usr/lib/pyproject_api/_backend.py True
py3: install_package> python -I -m pip install --force-reinstall -e .
py3: commands[0]> stestr --test-path=./tests/unit --top-dir=./ run
{0} tests.unit.test_client.DeviceProfileTest.test_get_groups [0.4s] ... ok
''' + totals(597) + '''\
py3: OK \u2714 in 1 minute 13.09 seconds
'''

FUNCTIONAL = '''\
functional: commands_pre[0]> tools/rabbitmq start
rabbitmq: running: amqp://127.0.0.1:5672 node nova-cyborg@localhost
functional: commands_pre[1]> nova-cyborg-patch apply
functional: commands[0]> stestr --test-path=./tests/functional run
''' + totals(159, failed=2) + '''\
functional: exit 1 (1173.33 seconds) /work/main> stestr run pid=4940
functional: commands_post[0]> tools/rabbitmq stop
rabbitmq: stopped node nova-cyborg@localhost (pid 32293)
functional: FAIL \u2716 in 20 minutes 7.99 seconds
'''

FUNCTIONAL_OK = '''\
functional: commands[0]> stestr --test-path=./tests/functional run
''' + totals(161, skipped=2) + '''\
functional: OK \u2714 in 20 minutes 7.99 seconds
'''

UPSTREAM = '''\
functional-upstream: commands_pre[1]> nova-cyborg-patch revert
functional-upstream: commands[0]> stestr run test_upstream
''' + totals(1) + '''\
functional-upstream: OK \u2714 in 1 minute 12.54 seconds
'''

# The local cloud did not come up: tempest never ran.
TEMPEST_DEAD = '''\
tempest: commands_pre[0]> nova-cyborg-patch apply
tempest: commands_pre[1]> python -m localcloud down
tempest: commands_pre[2]> python -m localcloud up --keep --no-demo
localcloud: compute: hosts not registered with their FPGAs after 180 s
tempest: exit 1 (201.18 seconds) /work/main> python -m localcloud up pid=9
tempest: commands_post[0]> python -m localcloud down
tempest: FAIL \u2716 in 3 minutes 24.4 seconds
'''

TEMPEST_OK = '''\
tempest: commands_pre[2]> python -m localcloud up --keep --no-demo
tempest: commands[0]> python -m localcloud tempest --concurrency 2
''' + totals(35, skipped=3) + '''\
tempest: OK \u2714 in 6 minutes 2.4 seconds
'''


def report(*results, failed=None):
    """tox's report at the end of a run: (env, status) pairs."""
    lines = []
    for env, status in results:
        lines.append('  %s: %s (12.34=setup[0.50]+cmd[11.84] seconds)'
                     % (env, status))
    failed = any(s.startswith('FAIL') for _e, s in results) \
        if failed is None else failed
    lines.append('  evaluation failed :( (2001.12 seconds)' if failed else
                 '  congratulations :) (2001.12 seconds)')
    return '\n'.join(lines) + '\n'


class SummarizeTest(testtools.TestCase):

    def check(self, log, line, status):
        self.assertEqual((line, status),
                         summary.summarize(log.splitlines(True)))

    def test_all_green(self):
        self.check(PEP8_OK + PY3 + FUNCTIONAL_OK + UPSTREAM + TEMPEST_OK +
                   report(('pep8', 'OK'), ('py3', 'OK'),
                          ('functional', 'OK'),
                          ('functional-upstream', 'OK'),
                          ('tempest', 'OK')),
                   '794 passed, 0 failed, 5 skipped', 0)

    def test_failed_tests(self):
        self.check(PEP8_OK + PY3 + FUNCTIONAL + UPSTREAM +
                   report(('pep8', 'OK'), ('py3', 'OK'),
                          ('functional', 'FAIL code 1'),
                          ('functional-upstream', 'OK')),
                   '757 passed, 2 failed, 0 skipped', 1)

    def test_env_dead_before_its_tests(self):
        # The red run that ended "759 passed, 0 failed, 0 skipped".
        self.check(PEP8_OK + PY3 + FUNCTIONAL_OK + UPSTREAM + TEMPEST_DEAD +
                   report(('pep8', 'OK'), ('py3', 'OK'),
                          ('functional', 'OK'),
                          ('functional-upstream', 'OK'),
                          ('tempest', 'FAIL code 1')),
                   '759 passed, 1 failed, 2 skipped '
                   '(tempest: FAIL code 1 before any test ran)', 1)

    def test_pep8_failing(self):
        # flake8 prints no Totals: its env failing is the failure.
        self.check(PEP8_FAIL + PY3 +
                   report(('pep8', 'FAIL code 1'), ('py3', 'OK')),
                   '597 passed, 1 failed, 0 skipped '
                   '(pep8: FAIL code 1 before any test ran)', 1)

    def test_env_failing_after_its_tests(self):
        # Every test passed, then a later command failed.
        log = FUNCTIONAL_OK.replace(
            'functional: OK \u2714', 'functional: commands_post[0]> '
            'tools/rabbitmq stop\nrabbitmq: ERROR: processes left: 12\n'
            'functional: FAIL \u2716')
        self.check(PY3 + log + report(('py3', 'OK'),
                                      ('functional', 'FAIL code 1')),
                   '758 passed, 1 failed, 2 skipped '
                   '(functional: FAIL code 1 with no failed test)', 1)

    def test_failed_envs_named_in_order(self):
        self.check(PEP8_FAIL + PY3 + TEMPEST_DEAD +
                   report(('pep8', 'FAIL code 1'), ('py3', 'OK'),
                          ('tempest', 'FAIL code 1')),
                   '597 passed, 2 failed, 0 skipped '
                   '(pep8: FAIL code 1 before any test ran; '
                   'tempest: FAIL code 1 before any test ran)', 1)

    def test_result_without_the_report(self):
        # tox's line after the env is enough (a log cut before the
        # report): the env still counts.
        self.check(PY3 + TEMPEST_DEAD,
                   '597 passed, 1 failed, 0 skipped '
                   '(tempest: FAIL before any test ran)', 1)

    def test_run_cut_short(self):
        # tox was killed in the middle of the tempest env.
        self.check(PY3 + TEMPEST_DEAD.split('tempest: exit')[0],
                   '597 passed, 1 failed, 0 skipped '
                   '(tempest: no result, the run was cut short)', 1)

    def test_skipped_and_ignored_envs_pass(self):
        self.check(PY3 + 'py27: SKIP \u26a0 in 0.01 seconds\n' +
                   report(('py3', 'OK'), ('py27', 'SKIP'),
                          ('docs', 'NOT AVAILABLE'),
                          ('bench', 'IGNORED FAIL code 1'), failed=False),
                   '597 passed, 0 failed, 0 skipped', 0)

    def test_unexpected_success_counts_as_failed(self):
        log = PY3.replace(totals(597), totals(596, uxsuccess=1))
        self.check(log + report(('py3', 'FAIL code 1')),
                   '596 passed, 1 failed, 0 skipped', 1)

    def test_colours_are_ignored(self):
        log = PY3 + TEMPEST_DEAD + report(('py3', 'OK'),
                                          ('tempest', 'FAIL code 1'))
        coloured = log.replace(
            ' - Passed', '\x1b[32m - Passed').replace(
            'Passed: 597', 'Passed: 597\x1b[39m').replace(
            'tempest: FAIL code 1', '\x1b[31mtempest: FAIL code 1')
        self.assertNotEqual(log, coloured)
        self.check(coloured, '597 passed, 1 failed, 0 skipped '
                   '(tempest: FAIL code 1 before any test ran)', 1)

    def test_no_test_ran(self):
        self.check(PEP8_OK + report(('pep8', 'OK')),
                   '0 passed, 1 failed, 0 skipped (no test ran)', 1)
        self.check('', '0 passed, 1 failed, 0 skipped (no test ran)', 1)

    def test_stestr_alone(self):
        # A log of stestr without tox: its Totals blocks are summed.
        self.check(totals(10, skipped=1) + totals(5, failed=1),
                   '15 passed, 1 failed, 1 skipped', 1)

    def test_test_output_is_not_a_result(self):
        # Lines of the tests' own output that look like tox's.
        log = PY3.replace(
            '... ok\n', '... ok\n  compute1: FAIL code 3 (injected)\n'
            'tempest: OK \u2714 in 0 seconds\n')
        self.check(log + report(('py3', 'OK')),
                   '597 passed, 0 failed, 0 skipped', 0)


class MainTest(testtools.TestCase):

    def run_main(self, path):
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))
        self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', self.useFixture(
                fixtures.StringStream('stderr')).stream))
        status = summary.main(path)
        out.stream.seek(0)
        return status, out.stream.read().splitlines()

    def test_no_log(self):
        status, lines = self.run_main('/nonexistent/tox.log')
        self.assertEqual(1, status)
        self.assertEqual(1, len(lines))
        self.assertTrue(lines[0].startswith(
            '0 passed, 1 failed, 0 skipped (the log could not be summed '
            'up: '), lines)

    def test_prints_the_line_last(self):
        path = self.useFixture(fixtures.TempDir()).join('tox.log')
        with open(path, 'w') as f:
            f.write(PY3 + TEMPEST_DEAD + report(('py3', 'OK'),
                                                ('tempest', 'FAIL code 1')))
        self.assertEqual((1, ['597 passed, 1 failed, 0 skipped '
                              '(tempest: FAIL code 1 before any test ran)']),
                         self.run_main(path))

    def test_names_failed_tests_before_the_line(self):
        path = self.useFixture(fixtures.TempDir()).join('tox.log')
        with open(path, 'w') as f:
            f.write(TEMPEST_FAILED_TEST + report(('tempest', 'FAIL code 1')))
        status, lines = self.run_main(path)
        self.assertEqual(1, status)
        self.assertEqual([
            'Failed tests (1):',
            '- tempest_plugin.tests.scenario.test_x.XTest.test_boot '
            '(tempest)',
            '    Traceback (most recent call last):',
            '    File "test_x.py", line 3, in test_boot',
            '    self.wait_for_active(server)',
            '    TimeoutException: server 1 not ACTIVE in 300 s',
            '9 passed, 1 failed, 0 skipped',
        ], lines)


TEMPEST_FAILED_TEST = '''\
tempest: commands[3]> python -m localcloud tempest --concurrency 2
{1} tempest_plugin.tests.api.test_a.ATest.test_list [1.1s] ... ok
{0} tempest_plugin.tests.scenario.test_x.XTest.test_boot [300.2s] ... FAILED

Captured traceback:
~~~~~~~~~~~~~~~~~~~
    Traceback (most recent call last):

      File "test_x.py", line 3, in test_boot
        self.wait_for_active(server)

    TimeoutException: server 1 not ACTIVE in 300 s

Captured pythonlogging:
~~~~~~~~~~~~~~~~~~~~~~~
    2026-11-29 10:00:00 DEBUG tempest.lib.common.rest_client GET /servers/1

{1} tempest_plugin.tests.api.test_a.ATest.test_show [1.1s] ... ok
''' + totals(9, failed=1)
