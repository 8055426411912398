"""tools/renumber-series.py: hunks edited by hand get their true headers."""

import importlib.util
import io
import os
import shutil

import fixtures

from tests.unit.cmd import test_patch

TOOL = os.path.join(test_patch.REPO, 'tools', 'renumber-series.py')


def load_tool():
    spec = importlib.util.spec_from_file_location('renumber_series', TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RenumberSeriesTest(test_patch.NovaCopyTestCase):

    def setUp(self):
        super().setUp()
        self.require_pristine_source()
        self.tool = load_tool()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.series = os.path.join(self.root, 'nova-%s' % test_patch.VERSION)
        os.mkdir(self.series)
        for name in os.listdir(test_patch.SERIES_DIR):
            shutil.copy(os.path.join(test_patch.SERIES_DIR, name),
                        self.series)

    def text(self, name):
        with open(os.path.join(self.series, name)) as f:
            return f.read()

    def test_the_series_is_left_as_it_is(self):
        texts = self.tool.renumber(self.series, self.target)
        for name in test_patch.SERIES:
            self.assertEqual(self.text(name), texts[name], name)

    def test_a_line_added_by_hand_renumbers_the_next_patches(self):
        # A line added to the first hunk of the first patch on the compute
        # manager, its header left as it was: after renumbering, that
        # header counts it and the whole series applies exactly.
        rel = 'nova/compute/manager.py'
        first, fp = test_patch.first_patch_on(rel)
        hunk = fp.hunks[0]
        added = [t for tag, t in hunk.lines if tag == '+'][0]
        text = self.text(first.name)
        self.assertEqual(1, text.count('+' + added))
        with open(os.path.join(self.series, first.name), 'w') as f:
            f.write(text.replace('+' + added,
                                 '+' + added + '+        pass  # by hand\n'))
        self.assertNotEqual(0, self.apply())
        for name, new in self.tool.renumber(self.series, self.target).items():
            with open(os.path.join(self.series, name), 'w') as f:
                f.write(new)
        self.assertIn('@@ -%d,%d +%d,%d @@\n' % (
            hunk.old_start, hunk.old_len, hunk.new_start, hunk.new_len + 1),
            self.text(first.name))
        self.assertEqual(0, self.apply())
        self.assertIn(b'        pass  # by hand\n', self.read(rel))

    def apply(self):
        return test_patch.patch.main([
            '--target', self.target, '--patches-dir', self.root, 'apply'],
            out=io.StringIO())

    def test_a_hunk_that_fits_nowhere_is_named(self):
        name = test_patch.SERIES[-1]
        text = self.text(name)
        lines = text.split('\n')
        at = [i for i, line in enumerate(lines) if line.startswith('@@ ')][0]
        lines[at + 1] = ' # not in Nova'
        with open(os.path.join(self.series, name), 'w') as f:
            f.write('\n'.join(lines))
        error = self.assertRaises(SystemExit, self.tool.renumber,
                                  self.series, self.target)
        self.assertIn('%s: ' % name, str(error))
        self.assertIn('hunk #1', str(error))
