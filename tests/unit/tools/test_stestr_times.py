"""tools/stestr-times.py: durations for stestr's first run."""

import importlib.util
import json
import os

import fixtures
from stestr import scheduler
from stestr.repository import util as repo_util
import testtools

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'tools', 'stestr-times.py')
_SPEC = importlib.util.spec_from_file_location('stestr_times', _PATH)
times = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(times)

LOG = '''\
functional: commands[7]> stestr --test-path=./tests/functional run
{0} tests.functional.test_a.ATest.test_long [41.2s] ... ok
{1} tests.functional.test_a.ATest.test_short [3.04s] ... ok
{2} tests.functional.test_b.BTest.test_failed [12.0s] ... FAILED
{1} tests.functional.test_b.BTest.test_skipped ... SKIPPED: no libvirtd
 - Passed: 2
'''


class StestrTimesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', self.out.stream))

    def test_record_reads_durations(self):
        log = os.path.join(self.dir, 'tox.log')
        with open(log, 'w') as f:
            f.write(LOG)
        self.assertEqual(0, times.record(log))
        self.out.stream.seek(0)
        self.assertEqual({'tests.functional.test_a.ATest.test_long': 41.2,
                          'tests.functional.test_a.ATest.test_short': 3.0,
                          'tests.functional.test_b.BTest.test_failed': 12.0},
                         json.loads(self.out.stream.read()))

    def test_seed_balances_the_first_run(self):
        # Round-robin, the two long tests would share a worker.
        durations = {'t.a': 100.0, 't.b': 1.0, 't.c': 99.0, 't.d': 2.0}
        path = os.path.join(self.dir, 'durations.json')
        with open(path, 'w') as f:
            json.dump(durations, f)
        self.assertEqual(0, times.seed(path, repo_dir=self.dir))
        repo = repo_util.get_repo_open(repo_url=self.dir)
        self.assertEqual(durations,
                         repo.get_test_times(list(durations))['known'])
        parts = scheduler.partition_tests(sorted(durations), 2, repo, None)
        self.assertEqual([101.0, 101.0],
                         sorted(sum(durations[t] for t in part)
                                for part in parts))
