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
