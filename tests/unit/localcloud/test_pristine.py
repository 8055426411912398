"""Unpatched hosts of the local cloud: their names, the pristine copy's
checks and the traits ``up`` expects in Placement."""

import base64
import hashlib
import os
from unittest import mock

import fixtures
import testtools

from localcloud import hosts
from localcloud import layout as layout_mod
from localcloud import pristine

INFO = 'nova-34.0.0.dist-info'


def _digest(data):
    return 'sha256=' + base64.urlsafe_b64encode(
        hashlib.sha256(data).digest()).rstrip(b'=').decode()


class LayoutTest(testtools.TestCase):

    def test_unpatched_hosts_follow_the_patched(self):
        layout = layout_mod.Layout(root='/x', computes=2, unpatched=2)
        self.assertEqual(['compute-old', 'compute-old2'],
                         layout.unpatched_hosts)
        self.assertEqual(['compute1', 'compute2', 'compute-old',
                          'compute-old2'], layout.hosts)
        # Each has its own address.
        self.assertEqual(4, len({layout.host_address(h)
                                 for h in layout.hosts}))

    def test_none_by_default(self):
        self.assertEqual([], layout_mod.Layout(root='/x').unpatched_hosts)


class RecordTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.target = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.target, 'nova', 'compute'))
        os.makedirs(os.path.join(self.target, INFO))
        self.files = {'nova/__init__.py': b'', 'nova/compute/api.py':
                      b'released\n'}
        for path, data in self.files.items():
            with open(os.path.join(self.target, path), 'wb') as f:
                f.write(data)
        with open(os.path.join(self.target, INFO, 'RECORD'), 'w') as f:
            for path, data in self.files.items():
                f.write('%s,%s,%d\n' % (path, _digest(data), len(data)))
            f.write('nova-34.0.0.dist-info/RECORD,,\n')

    def test_released_files_match(self):
        self.assertEqual([], pristine.record_mismatches(self.target, INFO))

    def test_a_patched_file_is_named(self):
        with open(os.path.join(self.target, 'nova/compute/api.py'),
                  'ab') as f:
            f.write(b'# nova-cyborg\n')
        self.assertEqual(['nova/compute/api.py'],
                         pristine.record_mismatches(self.target, INFO))

    def test_a_missing_file_is_named(self):
        os.unlink(os.path.join(self.target, 'nova/__init__.py'))
        self.assertEqual(['nova/__init__.py (missing)'],
                         pristine.record_mismatches(self.target, INFO))


class TraitsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.layout = layout_mod.Layout(root='/x', computes=1, unpatched=1)
        self.traits = {'compute1': {pristine.TRAIT, 'COMPUTE_NODE'},
                       'compute-old': {'COMPUTE_NODE'}}
        self.useFixture(fixtures.MockPatchObject(
            pristine, 'node_traits',
            side_effect=lambda conn, host: self.traits[host]))

    def test_as_expected(self):
        pristine.check_traits(self.layout, mock.sentinel.conn)

    def test_unpatched_host_with_the_trait(self):
        self.traits['compute-old'].add('CUSTOM_NOVA_CYBORG_1_1')
        exc = self.assertRaises(pristine.NotPristine, pristine.check_traits,
                                self.layout, mock.sentinel.conn)
        self.assertIn('compute-old runs unpatched Nova', str(exc))

    def test_patched_host_without_the_trait(self):
        self.traits['compute1'] = {'COMPUTE_NODE'}
        exc = self.assertRaises(pristine.NotPristine, pristine.check_traits,
                                self.layout, mock.sentinel.conn)
        self.assertIn('compute1 runs patched Nova', str(exc))


class LaunchTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.layout = layout_mod.Layout(root=root, computes=1, unpatched=1)
        self.start = self.useFixture(fixtures.MockPatch(
            'localcloud.procs.start')).mock

    def test_unpatched_host_imports_the_copy_first(self):
        hosts.launch(self.layout, 'compute-old')
        argv = self.start.call_args[0][2]
        env = self.start.call_args[1]['env']
        copy = os.path.join(self.layout.root, 'pristine')
        self.assertEqual(copy, argv[argv.index('--pristine-nova') + 1])
        self.assertEqual(copy, env['PYTHONPATH'].split(os.pathsep)[0])
        self.assertEqual(layout_mod.REPO_ROOT,
                         env['PYTHONPATH'].split(os.pathsep)[1])

    def test_patched_host_unchanged(self):
        hosts.launch(self.layout, 'compute1')
        self.assertNotIn('--pristine-nova', self.start.call_args[0][2])
        self.assertIsNone(self.start.call_args[1]['env'])
