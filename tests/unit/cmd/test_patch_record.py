"""nova-cyborg upgraded while Nova stays: the recorded series.

The earlier release here is this project's own series without its last
patch (the series as it stood before that patch landed); the tree is a
copy of the installed Nova's patched modules with its dist-info.
"""

import glob
import os
import shutil

import fixtures

from nova_cyborg_patch import record as _record
from nova_cyborg_patch import series as _series
from tests.unit.cmd import test_patch


class RecordedSeriesTest(test_patch.NovaCopyTestCase):

    def setUp(self):
        super().setUp()
        self.earlier = self.useFixture(fixtures.TempDir()).path
        series = os.path.join(self.earlier, 'nova-%s' % test_patch.VERSION)
        shutil.copytree(test_patch.SERIES_DIR, series)
        with open(os.path.join(series, 'series'), 'w') as f:
            f.write('\n'.join(test_patch.SERIES[:-1]) + '\n')
        self.record = glob.glob(os.path.join(
            self.target, 'nova-*.dist-info'))[0] + '/' + _record.RECORD

    def run_earlier(self, *argv):
        """The earlier release's nova-cyborg-patch."""
        with fixtures.MonkeyPatch('tests.unit.cmd.test_patch.PATCHES',
                                  self.earlier):
            return self.run_tool(*argv)

    def recorded(self):
        return _series.series_names(self.record)

    def test_apply_records_and_revert_forgets(self):
        rc, _out, _err = self.run_tool('apply')
        self.assertEqual(0, rc)
        self.assertEqual(test_patch.SERIES, self.recorded())
        rc, _out, _err = self.run_tool('revert')
        self.assertEqual(0, rc)
        self.assertFalse(os.path.exists(self.record))
        self.assertEqual(self.pristine, self.snapshot())

    def test_upgrade_without_revert_replaces_the_earlier_series(self):
        self.assertEqual(0, self.run_earlier('apply')[0])
        self.assertEqual(test_patch.SERIES[:-1], self.recorded())
        earlier = self.snapshot()
        rc, out, err = self.run_tool('apply')
        self.assertEqual(0, rc, err)
        self.assertIn('Replaced the series of another nova-cyborg release '
                      '(%d patch(es)' % (len(test_patch.SERIES) - 1), out)
        self.assertEqual(test_patch.SERIES, self.recorded())
        self.assertNotEqual(earlier, self.snapshot())
        # The same files as this release's series on the pristine tree.
        rc, out, _err = self.run_tool('apply')
        self.assertIn('Nothing to do: the series is already applied', out)
        rc, _out, _err = self.run_tool('revert')
        self.assertEqual(0, rc)
        self.assertEqual(self.pristine, self.snapshot())

    def test_revert_by_the_new_release_reverts_the_recorded_series(self):
        self.assertEqual(0, self.run_earlier('apply')[0])
        rc, out, err = self.run_tool('revert')
        self.assertEqual(0, rc, err)
        self.assertIn('The series of another nova-cyborg release is '
                      'applied', out)
        self.assertEqual(self.pristine, self.snapshot())
        self.assertFalse(os.path.exists(self.record))

    def test_without_a_record_the_partial_tree_is_refused(self):
        # Nothing says which series the tree holds: as before, apply
        # refuses a partially applied tree and changes nothing.
        self.assertEqual(0, self.run_earlier('apply')[0])
        shutil.rmtree(self.record)
        earlier = self.snapshot()
        rc, _out, err = self.run_tool('apply')
        self.assertEqual(1, rc)
        self.assertIn('partially applied', err)
        self.assertEqual(earlier, self.snapshot())

    def test_a_changed_file_is_refused_and_nothing_changes(self):
        # The earlier series is recorded but a file it patched was changed
        # since (a hot fix): nothing is replaced.
        self.assertEqual(0, self.run_earlier('apply')[0])
        rel = test_patch.TOUCHED[0]
        path = os.path.join(self.target, rel)
        with open(path, 'rb') as f:
            lines = f.read().splitlines(True)
        # A comment before every line: no hunk of either series matches.
        with open(path, 'wb') as f:
            f.write(b''.join(b'# hot fix\n' + line for line in lines))
        changed = self.snapshot()
        rc, _out, _err = self.run_tool('apply')
        self.assertEqual(1, rc)
        self.assertEqual(changed, self.snapshot())
        self.assertEqual(test_patch.SERIES[:-1], self.recorded())
