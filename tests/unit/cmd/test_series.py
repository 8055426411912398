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

"""nova-cyborg-patch on a small series where patches share files.

The tree is a made-up "nova" package of two modules; the series has three
patches: 0001 and 0002 both change nova/a.py (0002's line numbers count
from 0001's result, and its first hunk is above 0001's so that 0001's
lines move), 0003 changes nova/b.py.
"""

import io
import os

import fixtures
import testtools

from nova_cyborg_patch import cli as patch
from nova_cyborg_patch import series as _series

VERSION = '34.0.0'
A = ''.join('a%d\n' % i for i in range(1, 21))
B = 'b1\nb2\nb3\n'
P1 = ('Routes a10.\n'
      '--- a/nova/a.py\n'
      '+++ b/nova/a.py\n'
      '@@ -9,3 +9,4 @@\n'
      ' a9\n'
      '-a10\n'
      '+A10\n'
      '+hook1()\n'
      ' a11\n')
# On top of P1: one line added above P1's hunk, one below it.
P2 = ('Routes a2 and a15.\n'
      '--- a/nova/a.py\n'
      '+++ b/nova/a.py\n'
      '@@ -1,3 +1,4 @@\n'
      ' a1\n'
      '+hook2()\n'
      ' a2\n'
      ' a3\n'
      '@@ -15,3 +16,3 @@\n'
      ' a14\n'
      '-a15\n'
      '+A15\n'
      ' a16\n')
P3 = ('Routes b2.\n'
      '--- a/nova/b.py\n'
      '+++ b/nova/b.py\n'
      '@@ -1,3 +1,3 @@\n'
      ' b1\n'
      '-b2\n'
      '+B2\n'
      ' b3\n')
A1 = A.replace('a10\n', 'A10\nhook1()\n')
A12 = A1.replace('a1\n', 'a1\nhook2()\n', 1).replace('a15\n', 'A15\n')
B3 = B.replace('b2', 'B2')
NAMES = ['0001-a-first.patch', '0002-a-second.patch', '0003-b.patch']


class SeriesTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.target = os.path.join(root, 'site')
        self.patches = os.path.join(root, 'patches')
        os.makedirs(os.path.join(self.target, 'nova'))
        info = os.path.join(self.target, 'nova-%s.dist-info' % VERSION)
        os.makedirs(info)
        with open(os.path.join(info, 'METADATA'), 'w') as f:
            f.write('Metadata-Version: 2.1\nName: nova\nVersion: %s\n'
                    % VERSION)
        self.series = os.path.join(self.patches, 'nova-%s' % VERSION)
        os.makedirs(self.series)
        for name, text in zip(NAMES, (P1, P2, P3)):
            self.write_patch(name, text)
        with open(os.path.join(self.series, 'series'), 'w') as f:
            f.write('# comment\n' + '\n'.join(NAMES) + '\n')
        self.set_tree(A, B)
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', self.stderr))

    def write_patch(self, name, text):
        with open(os.path.join(self.series, name), 'w') as f:
            f.write(text)

    def set_tree(self, a, b):
        for rel, text in (('nova/a.py', a), ('nova/b.py', b)):
            with open(os.path.join(self.target, rel), 'w') as f:
                f.write(text)

    def tree(self):
        texts = []
        for rel in ('nova/a.py', 'nova/b.py'):
            with open(os.path.join(self.target, rel)) as f:
                texts.append(f.read())
        return tuple(texts)

    def run_tool(self, *argv):
        out = io.StringIO()
        self.stderr.truncate(0)
        self.stderr.seek(0)
        rc = patch.main(['--target', self.target, '--patches-dir',
                         self.patches] + list(argv), out=out)
        return rc, out.getvalue(), self.stderr.getvalue()

    def statuses(self, revert=False):
        evaluation = _series.Evaluation(
            self.target, _series.load_series(self.series), revert=revert)
        return [r.status for r in evaluation.ordered], evaluation.state()


class TestSeriesInSequence(SeriesTestCase):

    def test_two_patches_on_one_file_apply_in_order(self):
        self.assertEqual((['applicable'] * 3, 'not applied'),
                         self.statuses())

        rc, out, err = self.run_tool('apply')

        self.assertEqual(0, rc, err)
        self.assertIn('Applied 3 patch(es), 2 file(s)', out)
        self.assertEqual((A12, B3), self.tree())
        self.assertEqual((['applied'] * 3, 'applied'), self.statuses())

    def test_apply_twice_and_revert_twice(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        rc, out, err = self.run_tool('apply')
        self.assertEqual(0, rc, err)
        self.assertIn('already applied', out)
        self.assertEqual((A12, B3), self.tree())

        rc, out, err = self.run_tool('revert')
        self.assertEqual(0, rc, err)
        self.assertIn('Reverted 3 patch(es), 2 file(s)', out)
        self.assertEqual((A, B), self.tree())
        rc, out, err = self.run_tool('revert')
        self.assertEqual(0, rc, err)
        self.assertIn('Nothing to do', out)
        self.assertEqual((A, B), self.tree())

    def test_revert_goes_in_reverse_order(self):
        # 0002's hunk above 0001's moves 0001's lines by one: reverting
        # 0001 first (series order) would not match; it must go last.
        self.set_tree(A12, B3)
        evaluation = _series.Evaluation(
            self.target, _series.load_series(self.series), revert=True)
        self.assertEqual(['applied'] * 3,
                         [r.status for r in evaluation.ordered])
        self.assertEqual(A, ''.join(evaluation.contents['nova/a.py']))

    def test_status_of_a_partially_applied_series(self):
        # 0001 applied, 0002 (same file) not, 0003 applied.
        self.set_tree(A1, B3)

        self.assertEqual((['applied', 'applicable', 'applied'],
                          'partially applied'), self.statuses())
        rc, out, err = self.run_tool('check')
        self.assertEqual(1, rc)
        self.assertRegex(out, r'0001-a-first.patch\s+applied\n')
        self.assertRegex(out, r'0002-a-second.patch\s+applicable\n')

        rc, out, err = self.run_tool('apply')
        self.assertEqual(1, rc)
        self.assertIn('partially applied', err)
        self.assertEqual((A1, B3), self.tree())

        rc, out, err = self.run_tool('apply', '--allow-partial')
        self.assertEqual(0, rc, err)
        self.assertIn('Applied 1 patch(es), 1 file(s)', out)
        self.assertEqual((A12, B3), self.tree())

    def test_revert_a_partially_applied_series(self):
        self.set_tree(A1, B)
        rc, out, err = self.run_tool('revert', '--allow-partial')
        self.assertEqual(0, rc, err)
        self.assertIn('Reverted 1 patch(es), 1 file(s)', out)
        self.assertEqual((A, B), self.tree())

    def test_conflict_in_second_patch_leaves_tree_untouched(self):
        # 0001 and 0003 would apply; a changed context line of 0002's
        # second hunk makes the whole apply fail and write nothing.
        a = A.replace('a16\n', 'changed\n')
        self.set_tree(a, B)

        rc, out, err = self.run_tool('apply')

        self.assertEqual(1, rc)
        self.assertEqual((a, B), self.tree())
        self.assertIn('nothing was changed', err)
        self.assertIn('0002-a-second.patch: nova/a.py: hunk #2 (at line 15) '
                      'does not match [hunks: #1 pristine, #2 conflict]', err)
        self.assertNotIn('0001-a-first.patch:', err)
        self.assertRegex(out, r'0001-a-first.patch\s+applicable\n')
        self.assertRegex(out, r'0003-b.patch\s+applicable\n')
        self.assertEqual(1, self.run_tool('apply', '--allow-partial')[0])
        self.assertEqual((a, B), self.tree())

    def test_conflict_in_second_patch_when_reverting(self):
        a = A12.replace('A15\n', 'changed\n')
        self.set_tree(a, B3)

        rc, out, err = self.run_tool('revert')

        self.assertEqual(1, rc)
        self.assertEqual((a, B3), self.tree())
        # 0002 cannot be reverted, so 0001 (below it) cannot be judged.
        self.assertRegex(out, r'0001-a-first.patch\s+conflict: nova/a.py: '
                              r'comes before a conflicting patch\n')
        self.assertRegex(out, r'0002-a-second.patch\s+conflict: '
                              r'nova/a.py: hunk #2 \(at line 16\) does not '
                              r'match \[hunks: #1 applied, #2 conflict\]\n')
        self.assertRegex(out, r'0003-b.patch\s+applied\n')

    def test_conflict_in_first_patch(self):
        a = A.replace('a9\n', 'changed\n')
        self.set_tree(a, B)
        rc, out, err = self.run_tool('check')
        self.assertEqual(1, rc)
        self.assertRegex(out, r'0001-a-first.patch\s+conflict: nova/a.py: '
                              r'hunk #1')
        self.assertRegex(out, r'0002-a-second.patch\s+conflict: nova/a.py: ')
        self.assertRegex(out, r'0003-b.patch\s+applicable\n')
        self.assertIn('Series state: conflict', out)

    def test_patch_applied_to_one_file_only_is_a_conflict(self):
        # One patch changing both files, applied to only one of them.
        self.write_patch(NAMES[2], P3 + P1.split('\n', 1)[1])
        with open(os.path.join(self.series, 'series'), 'w') as f:
            f.write(NAMES[2] + '\n')
        self.set_tree(A1, B)
        rc, out, err = self.run_tool('check')
        self.assertEqual(1, rc)
        self.assertRegex(out, r'0003-b.patch\s+conflict: applied to '
                              r'nova/a.py but not to nova/b.py')

    def test_patch_applying_both_ways_is_a_conflict(self):
        # Adding a line equal to its context: on "x x" both the pristine
        # side ("x" at line 1) and the patched side ("x x") match.
        self.write_patch(NAMES[2], '--- a/nova/b.py\n+++ b/nova/b.py\n'
                                   '@@ -1,1 +1,2 @@\n x\n+x\n')
        with open(os.path.join(self.series, 'series'), 'w') as f:
            f.write(NAMES[2] + '\n')
        self.set_tree(A, 'x\nx\n')
        rc, out, err = self.run_tool('apply')
        self.assertEqual(1, rc)
        self.assertIn('nova/b.py: applies in both directions', err)
        self.assertEqual((A, 'x\nx\n'), self.tree())

    def test_other_nova_version_is_refused(self):
        info = os.path.join(self.target, 'nova-%s.dist-info' % VERSION)
        with open(os.path.join(info, 'METADATA'), 'w') as f:
            f.write('Metadata-Version: 2.1\nName: nova\nVersion: 33.0.0\n')
        rc, out, err = self.run_tool('apply')
        self.assertEqual(2, rc)
        self.assertIn('found 33.0.0', err)
        self.assertEqual((A, B), self.tree())
