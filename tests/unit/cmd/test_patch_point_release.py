"""A Nova point release with no series of its own is judged by content.

A stable update (34.0.1 where the series was made on 34.0.0) usually
leaves the regions the series changes alone but moves them (a backport
above them adds lines). The series of its release applies there and
reverts byte for byte; a point release that changed a patched region is
refused, naming the file, the hunk and the line; another release is
refused as before. The point releases here are copies of the installed
Nova (34.0.0, or 33.0.2 in tox -e py3-nova33) changed the way a stable
update changes files.
"""

import os
import shutil

from tests.unit.cmd import test_patch

#: What a backport above every patched region looks like.
BACKPORT = ['# Backported from master: a fix above every patched region.\n'
            ] * 7


class PointReleaseTest(test_patch.NovaCopyTestCase):

    def setUp(self):
        super().setUp()
        self.require_pristine_source()
        shutil.rmtree(os.path.join(self.target, 'nova-%s.dist-info'
                                   % test_patch.VERSION))
        test_patch.write_metadata(self.target, test_patch.POINT_RELEASE)

    def edit(self, rel, change):
        path = os.path.join(self.target, rel)
        with open(path, encoding='utf-8') as f:
            lines = f.readlines()
        with open(path, 'w', encoding='utf-8') as f:
            f.writelines(change(lines))

    def moved(self):
        """Every touched file with lines added at its top (after its
        license header, before the regions the series changes)."""
        for rel in test_patch.TOUCHED:
            self.edit(rel, lambda lines: lines[:12] + BACKPORT + lines[12:])
        return self.snapshot()

    def test_moved_regions_apply_and_revert_byte_for_byte(self):
        before = self.moved()
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        self.assertIn('Nova %s has no series of its own; the series of '
                      'Nova %s fits its content'
                      % (test_patch.POINT_RELEASE, test_patch.VERSION), out)
        self.assertIn('Series state: not applied', out)

        rc, out, err = self.run_tool('apply')
        self.assertEqual(0, rc, err)
        self.assertIn('Applied %d patch(es)' % len(test_patch.SERIES), out)
        # Where the series' own line numbers say, 7 lines lower.
        patch, fp = test_patch.first_patch_on(test_patch.TOUCHED[0])
        added = [text for tag, text in fp.hunks[0].lines if tag == '+'][0]
        lines = self.read(test_patch.TOUCHED[0]).decode().splitlines(True)
        start = fp.hunks[0].new_start - 1 + len(BACKPORT)
        self.assertIn(added, lines[start:start + len(fp.hunks[0].lines)])
        rc, out, _err = self.run_tool('check')
        self.assertIn('Series state: applied', out)

        rc, out, err = self.run_tool('revert', '--skip-alias-check')
        self.assertEqual(0, rc, err)
        self.assertUnchanged(before)

    def test_changed_region_is_refused_naming_it(self):
        self.moved()
        patch, fp = test_patch.first_patch_on(test_patch.TOUCHED[-1])
        hunk = fp.hunks[0]
        # The hunk's first context line, where it is after the backport.
        offset = [tag for tag, _text in hunk.lines].index(' ')
        index = hunk.old_start - 1 + len(BACKPORT) + offset
        old = hunk.lines[offset][1]

        def change(lines):
            self.assertEqual(old, lines[index])
            lines[index] = old.rstrip('\n') + '  # changed upstream\n'
            return lines
        self.edit(fp.target(), change)
        changed = self.snapshot()

        rc, out, err = self.run_tool('apply')
        self.assertEqual(2, rc)
        self.assertIn('Nova %s has no series of its own, and the series '
                      'of Nova %s does not fit it'
                      % (test_patch.POINT_RELEASE, test_patch.VERSION), err)
        self.assertIn('%s: %s: hunk #1' % (patch.name, fp.target()), err)
        self.assertIn('line %d: expected %r, found %r' % (
            index + 1, old.rstrip('\n'),
            old.rstrip('\n') + '  # changed upstream'), err)
        self.assertIn('nothing was changed', err)
        self.assertUnchanged(changed)

    def test_another_release_is_refused(self):
        shutil.rmtree(os.path.join(self.target, 'nova-%s.dist-info'
                                   % test_patch.POINT_RELEASE))
        test_patch.write_metadata(self.target, '35.0.0')
        rc, _out, err = self.run_tool('apply')
        self.assertEqual(2, rc)
        self.assertIn('nova-cyborg supports Nova %s; found 35.0.0'
                      % ', '.join(test_patch.SUPPORTED), err)
        self.assertUnchanged()
