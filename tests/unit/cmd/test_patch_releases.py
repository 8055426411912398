"""One series per supported Nova release, chosen by content.

``patches/`` holds a series for Nova 34.0.0 and one for Nova 33.0.2. These
tests run on copies of the installed Nova: tox -e py3 has 34.0.0, tox -e
py3-nova33 has 33.0.2, so each env checks its own release's series and
that the other release's series is refused naming a file and a hunk.

With NOVA_CYBORG_NOVA_WHEELS set to a directory of Nova wheels
(``pip download --no-deps nova==33.0.1 -d DIR``), every wheel there is
unpacked and judged too, as an operator's ``nova-cyborg-patch check``
would judge it.
"""

import glob
import io
import os
import shutil
import zipfile

import fixtures
import testtools

from nova_cyborg_patch import cli as patch
from tests.unit.cmd import test_patch

#: nova/compute/api.py of Nova 33.0.2, and what 33.0.0 and 33.0.1 have
#: there instead (the flavor lookup of a resize, changed by a stable
#: update inside the context of patch 0006's third hunk).
FLAVOR_LOOKUP_33_0_2 = (' ' * 16 +
                        'flavor_id, ctxt=context, read_deleted="no")\n')
FLAVOR_LOOKUP_33_0_1 = ' ' * 16 + 'flavor_id, read_deleted="no")\n'


def _other_releases():
    return [v for v in test_patch.SUPPORTED if v != test_patch.VERSION]


class SeriesByContentTest(test_patch.NovaCopyTestCase):

    def setUp(self):
        super().setUp()
        self.require_pristine_source()

    def test_check_names_the_series_that_fits(self):
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        self.assertIn('Series by content (whatever the version says):', out)
        self.assertIn('  nova-%s: fits (not applied)' % test_patch.VERSION,
                      out)
        for other in _other_releases():
            line = [text for text in out.splitlines()
                    if text.startswith('  nova-%s: ' % other)]
            self.assertEqual(1, len(line), out)
            self.assertIn('does not fit: ', line[0])
            self.assertIn(': hunk #', line[0])

        self.assertEqual(0, self.run_tool('apply')[0])
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        self.assertIn('  nova-%s: fits (applied)' % test_patch.VERSION, out)

    def test_mislabelled_tree_refused_and_check_says_which_fits(self):
        # The tree says it is another release; its content is this one's.
        other = _other_releases()[0]
        shutil.rmtree(os.path.join(self.target, 'nova-%s.dist-info'
                                   % test_patch.VERSION))
        test_patch.write_metadata(self.target, other)
        rc, out, err = self.run_tool('apply')
        self.assertEqual(1, rc)
        self.assertIn('cannot apply: the series does not match this Nova '
                      'tree; nothing was changed.', err)
        self.assertIn(': hunk #', err)
        self.assertUnchanged()
        rc, out, err = self.run_tool('check')
        self.assertEqual(1, rc)
        self.assertIn('  nova-%s: fits (not applied)' % test_patch.VERSION,
                      out)


class Nova33PointReleasesTest(test_patch.NovaCopyTestCase):
    """Nova 33.0.0 and 33.0.1, made from the installed 33.0.2 the way
    they differ from it in the files the series changes (tox -e
    py3-nova33)."""

    def setUp(self):
        super().setUp()
        if test_patch.VERSION != '33.0.2':
            self.skipTest('the installed Nova is %s, not 33.0.2 (tox -e '
                          'py3-nova33 runs this)' % test_patch.VERSION)
        self.require_pristine_source()
        shutil.rmtree(os.path.join(self.target, 'nova-33.0.2.dist-info'))
        test_patch.write_metadata(self.target, '33.0.1')

    def test_changed_flavor_lookup_refused_naming_the_hunk(self):
        path = os.path.join(self.target, 'nova', 'compute', 'api.py')
        with open(path, encoding='utf-8') as f:
            lines = f.readlines()
        index = lines.index(FLAVOR_LOOKUP_33_0_2)
        lines[index] = FLAVOR_LOOKUP_33_0_1
        with open(path, 'w', encoding='utf-8') as f:
            f.writelines(lines)
        before = self.snapshot()
        for command in ('apply', 'check'):
            rc, out, err = self.run_tool(command)
            self.assertEqual(2, rc)
            self.assertIn('Nova 33.0.1 has no series of its own, and the '
                          'series of Nova 33.0.2 does not fit it', err)
            self.assertIn('0006-api-allow-accelerator-operations.patch: '
                          'nova/compute/api.py: hunk #3', err)
            self.assertIn('expected %r, found %r' % (
                FLAVOR_LOOKUP_33_0_2.rstrip('\n'),
                FLAVOR_LOOKUP_33_0_1.rstrip('\n')), err)
            self.assertIn('nothing was changed', err)
        self.assertIn('  nova-33.0.2: does not fit: ', out)
        self.assertUnchanged(before)


class RealReleasesTest(testtools.TestCase):
    """Nova wheels from PyPI, judged by content (NOVA_CYBORG_NOVA_WHEELS)."""

    def setUp(self):
        super().setUp()
        self.wheels = sorted(glob.glob(os.path.join(
            os.environ.get('NOVA_CYBORG_NOVA_WHEELS', '/nonexistent'),
            'nova-*.whl')))
        if not self.wheels:
            self.skipTest('NOVA_CYBORG_NOVA_WHEELS names no Nova wheels')

    def _unpack(self, wheel):
        target = self.useFixture(fixtures.TempDir()).path
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target, [
                name for name in archive.namelist()
                if name in test_patch.TOUCHED or
                name.endswith('.dist-info/METADATA')])
        return target

    def test_each_release_fits_or_is_refused_naming_a_hunk(self):
        for wheel in self.wheels:
            target = self._unpack(wheel)
            out = io.StringIO()
            err = self.useFixture(fixtures.MonkeyPatch(
                'sys.stderr', io.StringIO())).new_value
            rc = patch.main(
                ['--target', target, '--patches-dir', test_patch.PATCHES,
                 'check'], out=out)
            if rc == 0:
                self.assertIn('Series state: not applied', out.getvalue())
                self.assertIn(': fits (not applied)', out.getvalue())
            else:
                self.assertEqual(2, rc, err.getvalue())
                self.assertIn(': hunk #', err.getvalue())
                self.assertIn('nothing was changed', err.getvalue())
