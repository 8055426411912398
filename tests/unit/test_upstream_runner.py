"""The runner of Nova's own unit tests (tests/upstream/run.py)."""

import importlib.util
import os
import re

import fixtures
import testtools

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_PY = os.path.join(os.path.dirname(HERE), 'upstream', 'run.py')


def _runner():
    spec = importlib.util.spec_from_file_location('upstream_run', RUN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ExpectedDifferencesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.run_py = _runner()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def _write(self, text):
        path = os.path.join(self.dir, 'differences.txt')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_the_projects_list_reads(self):
        differences = self.run_py.read_differences(self.run_py.EXPECTED)
        for test_id, reason in differences:
            self.assertTrue(test_id.startswith('nova.tests.unit.'), test_id)
            self.assertTrue(reason)

    def test_a_line_without_a_reason_is_refused(self):
        path = self._write('# comment\n\nnova.tests.unit.a.B.test_c\n')
        self.assertRaisesRegex(ValueError, ':3: expected',
                               self.run_py.read_differences, path)

    def test_ids_prefixes_and_scenarios_match_exactly(self):
        regex = re.compile(self.run_py.exclusion_regex(
            'nova.tests.unit.a.B.test_c'))
        self.assertTrue(regex.search('nova.tests.unit.a.B.test_c'))
        self.assertTrue(regex.search('nova.tests.unit.a.B.test_c(scen)'))
        self.assertFalse(regex.search('nova.tests.unit.a.B.test_cd'))
        prefix = re.compile(self.run_py.exclusion_regex('nova.tests.unit.a.B'))
        self.assertTrue(prefix.search('nova.tests.unit.a.B.test_c'))
        self.assertFalse(prefix.search('nova.tests.unit.a.Bc.test_c'))

    def test_exclude_list_is_stestrs_format(self):
        path = os.path.join(self.dir, 'exclude.txt')
        self.run_py.write_exclude_list(
            [('nova.tests.unit.a.B', 'why # not')], path)
        with open(path) as f:
            self.assertEqual('^nova\\.tests\\.unit\\.a\\.B(?:[.(\\[]|$) # '
                             'why  not\n', f.read())

    def test_the_nova33_list_reads(self):
        path = os.path.join(os.path.dirname(RUN_PY),
                            'expected-differences-nova33.txt')
        for test_id, reason in self.run_py.read_differences(path):
            self.assertTrue(test_id.startswith('nova.tests.unit.'), test_id)
            self.assertTrue(reason)

    def _main(self, *argv):
        calls = []
        self.useFixture(fixtures.MockPatchObject(
            self.run_py, 'nova_site_packages', return_value=self.dir))
        self.useFixture(fixtures.MockPatchObject(
            self.run_py.subprocess, 'check_call'))
        self.useFixture(fixtures.MockPatchObject(
            self.run_py.subprocess, 'call',
            side_effect=lambda cmd, cwd: calls.append(cmd) or 0))
        work_dir = os.path.join(self.dir, 'work')
        self.assertEqual(0, self.run_py.main(
            ['--work-dir', work_dir] + list(argv)))
        with open(os.path.join(work_dir, 'exclude-list.txt')) as f:
            return calls[0], f.read()

    def test_expected_lists_are_read_together(self):
        first = self._write('nova.tests.unit.a.B.test_c  # one\n')
        second = os.path.join(self.dir, 'second.txt')
        with open(second, 'w') as f:
            f.write('# none here\nnova.tests.unit.d.E  # two\n')
        cmd, excluded = self._main('--expected', first, '--expected', second)
        self.assertEqual(['^nova\\.tests\\.unit\\.a\\.B\\.test_c(?:[.(\\[]|$)'
                          ' # one',
                          '^nova\\.tests\\.unit\\.d\\.E(?:[.(\\[]|$) # two'],
                         excluded.splitlines())
        self.assertIn(self.run_py.CI_SUBSET, cmd)

    def test_without_expected_the_projects_list_is_read(self):
        cmd, excluded = self._main()
        self.assertEqual(
            len(self.run_py.read_differences(self.run_py.EXPECTED)),
            len(excluded.splitlines()))
