# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Tests for nova-cyborg-patch, run on copies of the installed Nova."""

import importlib.util
import io
import os
import shutil
import subprocess
import sys
from unittest import mock

import fixtures
import testtools

from nova_cyborg_patch import cli as patch
from nova_cyborg_patch import series as _series
from nova_cyborg_patch import unidiff as _unidiff

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
PATCHES = os.path.join(REPO, 'patches')
#: Every release with a series of its own.
SUPPORTED = sorted(os.path.basename(d)[len('nova-'):]
                   for d in os.listdir(PATCHES) if d.startswith('nova-'))


def installed_nova_dir():
    """site-packages (or wherever) holding the installed nova package."""
    spec = importlib.util.find_spec('nova')
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def _installed_release():
    """The series these tests use: the installed Nova's (tox -e py3:
    34.0.0, tox -e py3-nova33: 33.0.2), else 34.0.0."""
    try:
        version = patch.nova_version(installed_nova_dir())
    except patch.UnsupportedVersion:
        return '34.0.0'
    return version if version in SUPPORTED else '34.0.0'


VERSION = _installed_release()
#: The release's next stable point release, which has no series.
POINT_RELEASE = '%s.%d' % (VERSION.rsplit('.', 1)[0],
                           int(VERSION.rsplit('.', 1)[1]) + 1)
SERIES_DIR = os.path.join(PATCHES, 'nova-%s' % VERSION)
PATCH_LIST = _series.load_series(SERIES_DIR)
SERIES = [p.name for p in PATCH_LIST]
TOUCHED = sorted(set(rel for p in PATCH_LIST for rel in p.paths()))
# Files changed by patches that route into nova_cyborg.hooks (the others
# only by fixes of upstream bugs, *-fix-*, values added to Nova's enums,
# *-enum-*, or methods added to Nova's interfaces, *-interface-*).
ROUTED = sorted(set(rel for p in PATCH_LIST
                    if not any(kind in p.name for kind in
                               ('-fix-', '-enum-', '-interface-'))
                    for rel in p.paths()))


def first_patch_on(rel):
    """The first patch of the series that changes rel, and its changes."""
    for p in PATCH_LIST:
        for fp in p.files:
            if fp.target() == rel:
                return p, fp


def write_metadata(target, version):
    info = os.path.join(target, 'nova-%s.dist-info' % version)
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, 'METADATA'), 'w') as f:
        f.write('Metadata-Version: 2.1\nName: nova\nVersion: %s\n' % version)


class NovaCopyTestCase(testtools.TestCase):
    """Base class: a copy of the installed Nova's touched modules."""

    full_copy = False

    def setUp(self):
        super().setUp()
        self.source = installed_nova_dir()
        self.target = self.useFixture(fixtures.TempDir()).path
        if self.full_copy:
            shutil.copytree(
                os.path.join(self.source, 'nova'),
                os.path.join(self.target, 'nova'),
                ignore=shutil.ignore_patterns('__pycache__', 'tests'))
        # The touched modules; with a full copy, Nova's own tests that a
        # patch updates with its change (patch 0025's object hashes).
        for rel in TOUCHED:
            if self.full_copy and '/tests/' not in rel:
                continue
            os.makedirs(os.path.join(self.target, os.path.dirname(rel)),
                        exist_ok=True)
            shutil.copy2(os.path.join(self.source, rel),
                         os.path.join(self.target, rel))
        write_metadata(self.target, VERSION)
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', self.stderr))
        # Whatever this machine has in /etc/nova: no Nova service here.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg_patch.aliases.DEFAULT_CONFIG',
            os.path.join(self.target, 'no-nova.conf')))
        self.pristine = self.snapshot()

    def run_tool(self, *argv):
        out = io.StringIO()
        rc = patch.main(['--target', self.target, '--patches-dir', PATCHES] +
                        list(argv), out=out)
        return rc, out.getvalue(), self.stderr.getvalue()

    def read(self, rel):
        with open(os.path.join(self.target, rel), 'rb') as f:
            return f.read()

    def snapshot(self):
        return dict((rel, self.read(rel)) for rel in TOUCHED)

    def assertUnchanged(self, expected=None):
        self.assertEqual(expected or self.pristine, self.snapshot())

    def require_pristine_source(self):
        rc, out, _err = self.run_tool('check')
        if 'Series state: not applied' not in out:
            self.skipTest('installed Nova is not pristine %s:\n%s'
                          % (VERSION, out))


class TestApplyRevert(NovaCopyTestCase):

    def setUp(self):
        super().setUp()
        self.require_pristine_source()

    def test_apply_changes_files_and_routes(self):
        pycache = os.path.join(self.target, 'nova', 'compute', '__pycache__')
        os.makedirs(pycache)
        stale = os.path.join(pycache, 'manager.cpython-311.pyc')
        other = os.path.join(pycache, 'rpcapi.cpython-311.pyc')
        for path in (stale, other):
            open(path, 'wb').close()

        rc, out, err = self.run_tool('apply')

        self.assertEqual(0, rc, err)
        self.assertIn('Applied %d patch(es), %d file(s)'
                      % (len(SERIES), len(TOUCHED)), out)
        for rel in TOUCHED:
            text = self.read(rel).decode('utf-8')
            self.assertNotEqual(self.pristine[rel], self.read(rel))
            compile(text, rel, 'exec')
            if rel in ROUTED:
                self.assertIn('# nova-cyborg:', text)
                self.assertIn('from nova_cyborg.hooks import ', text)
        self.assertFalse(os.path.exists(stale))
        self.assertTrue(os.path.exists(other))

    def test_apply_keeps_file_mode(self):
        path = os.path.join(self.target, TOUCHED[0])
        os.chmod(path, 0o640)
        self.assertEqual(0, self.run_tool('apply')[0])
        self.assertEqual(0o640, os.stat(path).st_mode & 0o777)

    def test_apply_twice_is_noop(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        applied = self.snapshot()
        mtimes = [os.stat(os.path.join(self.target, rel)).st_mtime_ns
                  for rel in TOUCHED]

        rc, out, err = self.run_tool('apply')

        self.assertEqual(0, rc, err)
        self.assertIn('already applied', out)
        self.assertUnchanged(applied)
        self.assertEqual(mtimes, [
            os.stat(os.path.join(self.target, rel)).st_mtime_ns
            for rel in TOUCHED])

    def test_check_pristine(self):
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        for name in SERIES:
            self.assertRegex(out, r'%s\s+applicable' % name)
        self.assertIn('Series state: not applied', out)
        self.assertUnchanged()

    def test_check_applied(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        for name in SERIES:
            self.assertRegex(out, r'%s\s+applied' % name)
        self.assertIn('Series state: applied', out)

    def test_status(self):
        rc, out, err = self.run_tool('status')
        self.assertEqual(0, rc, err)
        self.assertIn('Nova %s in %s' % (VERSION, self.target), out)
        self.assertIn(os.path.join(PATCHES, 'nova-' + VERSION), out)

    def test_options_after_command(self):
        rc = patch.main(['check', '--target', self.target,
                         '--patches-dir', PATCHES], out=io.StringIO())
        self.assertEqual(0, rc)

    def test_revert_restores_byte_identical(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        rc, out, err = self.run_tool('revert')
        self.assertEqual(0, rc, err)
        self.assertIn('Reverted %d patch(es), %d file(s)'
                      % (len(SERIES), len(TOUCHED)), out)
        self.assertUnchanged()

        rc, out, err = self.run_tool('revert')
        self.assertEqual(0, rc, err)
        self.assertIn('Nothing to do', out)
        self.assertUnchanged()

    def test_corrupted_target_apply_fails_and_changes_nothing(self):
        # Change one context line of the last hunk of the first patch on
        # the libvirt driver: the patches before it would apply, but
        # nothing may be written.
        rel = 'nova/virt/libvirt/driver.py'
        bad_patch, fp = first_patch_on(rel)
        number = len(fp.hunks)
        start, _length, expected, _new = fp.hunks[-1].side()
        lines = _unidiff.split_lines(self.read(rel).decode('utf-8'))
        self.assertEqual(expected[0], lines[start - 1])
        lines[start - 1] = '# changed\n'
        with open(os.path.join(self.target, rel), 'w') as f:
            f.write(''.join(lines))
        corrupted = self.snapshot()
        self.assertNotEqual(self.pristine, corrupted)

        rc, out, err = self.run_tool('apply')

        self.assertEqual(1, rc)
        self.assertIn('%s: %s: hunk #%d' % (bad_patch.name, rel, number),
                      err)
        self.assertIn('nothing was changed', err)
        self.assertUnchanged(corrupted)
        rc, out, err = self.run_tool('check')
        self.assertEqual(1, rc)
        self.assertRegex(out, r'%s\s+conflict' % bad_patch.name)

    def test_corrupted_target_revert_fails_and_changes_nothing(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        rel = 'nova/accelerator/cyborg.py'
        text = self.read(rel).replace(b'def get_client(context):',
                                      b'def get_client(ctxt):')
        with open(os.path.join(self.target, rel), 'wb') as f:
            f.write(text)
        before = self.snapshot()

        rc, out, err = self.run_tool('revert')

        self.assertEqual(1, rc)
        self.assertIn('%s: %s: hunk #' % (first_patch_on(rel)[0].name, rel),
                      err)
        self.assertUnchanged(before)

    def test_wrong_version_exits_2_and_changes_nothing(self):
        shutil.rmtree(os.path.join(self.target, 'nova-%s.dist-info'
                                   % VERSION))
        write_metadata(self.target, '30.0.0')
        for command in ('apply', 'check', 'revert', 'status'):
            rc, out, err = self.run_tool(command)
            self.assertEqual(2, rc)
            self.assertIn('nova-cyborg supports Nova %s; found 30.0.0; '
                          % ', '.join(SUPPORTED) +
                          'no patch series for it', err)
        self.assertUnchanged()

    def test_unknown_version_exits_2(self):
        shutil.rmtree(os.path.join(self.target, 'nova-%s.dist-info'
                                   % VERSION))
        rc, out, err = self.run_tool('apply')
        self.assertEqual(2, rc)
        self.assertIn('cannot determine the Nova version', err)
        self.assertUnchanged()

    def test_partial_state_detected(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        applied = self.snapshot()
        rel = 'nova/compute/manager.py'
        on_rel = [p.name for p in PATCH_LIST if p.paths() == [rel]]
        self.assertEqual(on_rel, [p.name for p in PATCH_LIST
                                  if rel in p.paths()])
        with open(os.path.join(self.target, rel), 'wb') as f:
            f.write(self.pristine[rel])
        partial = self.snapshot()

        rc, out, err = self.run_tool('check')
        self.assertEqual(1, rc)
        for name in on_rel:
            self.assertRegex(out, r'%s\s+applicable' % name)
        self.assertIn('Series state: partially applied', out)
        for command in ('apply', 'revert'):
            rc, out, err = self.run_tool(command)
            self.assertEqual(1, rc)
            self.assertIn('partially applied', err)
            self.assertUnchanged(partial)

        rc, out, err = self.run_tool('apply', '--allow-partial')
        self.assertEqual(0, rc, err)
        self.assertIn('Applied %d patch(es), 1 file(s)' % len(on_rel), out)
        self.assertUnchanged(applied)

    def test_partial_hunks_within_a_file_is_a_conflict(self):
        # The patches before it, then the first patch on the compute
        # manager with three hunks or more, all hunks but #2.
        rel = 'nova/compute/manager.py'
        lines = _unidiff.split_lines(self.read(rel).decode('utf-8'))
        for bad_patch in PATCH_LIST:
            (fp,) = [f for f in bad_patch.files if f.target() == rel] or [None]
            if fp is None:
                continue
            if len(fp.hunks) > 2:
                break
            lines = _unidiff.apply_hunks(lines, fp)
        some = _unidiff.FilePatch(fp.old_path, fp.new_path)
        some.hunks = fp.hunks[:1] + fp.hunks[2:]
        with open(os.path.join(self.target, rel), 'w') as f:
            f.write(''.join(_unidiff.apply_hunks(lines, some)))
        before = self.snapshot()

        rc, out, err = self.run_tool('apply')

        self.assertEqual(1, rc)
        self.assertIn(bad_patch.name, err)
        self.assertIn('#1 applied, #2 pristine, #3 applied', err)
        self.assertUnchanged(before)

    def test_failed_replace_rolls_back(self):
        real_replace = os.replace
        calls = []

        def flaky_replace(src, dst):
            calls.append(dst)
            if len(calls) == 3:
                raise OSError('disk on fire')
            return real_replace(src, dst)

        with mock.patch.object(_series.os, 'replace', flaky_replace):
            rc, out, err = self.run_tool('apply')

        self.assertEqual(1, rc)
        self.assertIn('disk on fire', err)
        self.assertUnchanged()
        leftovers = [name for _d, _s, names in os.walk(self.target)
                     for name in names if name.endswith('.nova-cyborg')]
        self.assertEqual([], leftovers)


class TestInstalledPristineNova(NovaCopyTestCase):
    """The series against a full copy of the installed Nova (34.0.0, or
    33.0.2 in tox -e py3-nova33)."""

    full_copy = True

    def test_series_applies_cleanly(self):
        try:
            installed = patch.nova_version(self.source)
        except patch.UnsupportedVersion as exc:
            self.skipTest(str(exc))
        if installed != VERSION:
            self.skipTest('installed Nova is %s, not %s'
                          % (installed, VERSION))
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        if 'Series state: applied' in out:
            # This environment's Nova is patched (tox -e functional, a
            # deployment): start from the reverted copy.
            self.assertEqual(0, self.run_tool('revert')[0])
            rc, out, err = self.run_tool('check')
        self.assertIn('Series state: not applied', out)
        pristine = self.snapshot()

        rc, out, err = self.run_tool('apply')
        self.assertEqual(0, rc, err)
        for rel in TOUCHED:
            compile(self.read(rel), rel, 'exec')
        self.assertEqual(0, self.run_tool('revert')[0])
        self.assertUnchanged(pristine)


class TestLocations(testtools.TestCase):

    def test_default_target_does_not_import_nova(self):
        code = ('import sys; from nova_cyborg_patch import cli as patch; '
                'print(patch.default_target()); print("nova" in sys.modules)')
        result = subprocess.run([sys.executable, '-c', code], cwd=REPO,
                                capture_output=True, text=True, check=True)
        target, imported = result.stdout.split()
        self.assertEqual(installed_nova_dir(), target)
        self.assertEqual('False', imported)

    def test_default_patches_dir_in_checkout(self):
        self.assertEqual(PATCHES, patch.default_patches_dir())

    def test_default_patches_dir_installed(self):
        prefix = self.useFixture(fixtures.TempDir()).path
        installed = os.path.join(prefix, 'share', 'nova-cyborg', 'patches')
        os.makedirs(installed)
        self.useFixture(fixtures.MonkeyPatch(
            'os.path.isfile', lambda path: False))
        self.useFixture(fixtures.MonkeyPatch('sys.prefix', prefix))
        self.assertEqual(installed, patch.default_patches_dir())


class TestUnidiff(testtools.TestCase):

    OLD = 'a\nb\nc\nd\ne\nf\ng\n'
    NEW = 'a\nb\nC\nd\ne\nf\ng\nh'
    DIFF = ('comment\n'
            '--- a/x.py\n'
            '+++ b/x.py\n'
            '@@ -2,3 +2,3 @@\n'
            ' b\n'
            '-c\n'
            '+C\n'
            ' d\n'
            '@@ -6,2 +6,3 @@\n'
            ' f\n'
            ' g\n'
            '+h\n'
            '\\ No newline at end of file\n')

    def _apply(self, text, reverse=False):
        (fp,) = _unidiff.parse(self.DIFF)
        lines = _unidiff.split_lines(text)
        return ''.join(_unidiff.apply_hunks(lines, fp, reverse=reverse))

    def test_parse(self):
        (fp,) = _unidiff.parse(self.DIFF)
        self.assertEqual('x.py', fp.target(1))
        self.assertEqual(2, len(fp.hunks))

    def test_apply_and_reverse(self):
        self.assertEqual(self.NEW, self._apply(self.OLD))
        self.assertEqual(self.OLD, self._apply(self.NEW, reverse=True))

    def test_no_offset_guessing(self):
        exc = self.assertRaises(_unidiff.HunkMismatch, self._apply,
                                'z\n' + self.OLD)
        self.assertEqual(1, exc.number)

    def test_exact_context(self):
        exc = self.assertRaises(_unidiff.HunkMismatch, self._apply,
                                self.OLD.replace('g\n', 'G\n'))
        self.assertEqual(2, exc.number)

    def test_truncated_hunk(self):
        self.assertRaises(_unidiff.PatchError, _unidiff.parse,
                          self.DIFF.split('@@ -6')[0][:-4])

    def test_no_files(self):
        self.assertRaises(_unidiff.PatchError, _unidiff.parse, 'hello\n')
