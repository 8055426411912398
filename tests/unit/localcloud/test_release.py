"""What differs between the releases the local cloud runs, and the
layout that records each process's environment (localcloud.release)."""

import configparser
import os
import sys
from unittest import mock

import fixtures
import testtools

from localcloud import configs
from localcloud import layout as layout_mod
from localcloud import release
from localcloud import upgrade


class ReleaseTest(testtools.TestCase):

    def test_nova_33_runs_on_eventlet_and_pins_the_sidecars(self):
        r = release._release('33.0.2', '16.0.1')
        self.assertEqual('2026.1', r.name)
        self.assertEqual({'OS_NOVA_DISABLE_EVENTLET_PATCHING': ''},
                         r.environment())
        self.assertEqual('2026.1', r.conductor_level)

    def test_nova_34_runs_on_threads_unpinned(self):
        r = release._release('34.0.1', '17.0.0')
        self.assertEqual('2026.2', r.name)
        self.assertEqual({'OS_NOVA_DISABLE_EVENTLET_PATCHING': '1'},
                         r.environment())
        self.assertIsNone(r.conductor_level)

    def test_other_releases_are_refused(self):
        self.assertRaises(release.UnsupportedRelease, release._release,
                          '32.1.0', '15.0.0')

    def test_this_environment(self):
        self.assertIn(release.of().name, ('2026.1', '2026.2'))
        self.assertEqual(release.of(), release.of(
            os.path.join(os.path.dirname(sys.executable), 'python')))

    def test_a_program_of_no_environment_gets_this_one(self):
        self.assertEqual(sys.executable,
                         release.environment_python('/usr/sbin/mariadbd'))
        self.assertEqual(sys.executable, release.environment_python(None))


class LayoutPythonsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=31000)

    def test_defaults_and_saved(self):
        self.assertEqual(sys.executable, self.layout.python_for('compute1'))
        self.layout.pythons = {'control': '/new/bin/python',
                               'compute2': '/old/bin/python'}
        self.layout.save()
        loaded = layout_mod.Layout.load(self.layout.root)
        self.assertEqual('/new/bin/python', loaded.python_for('compute1'))
        self.assertEqual('/old/bin/python', loaded.python_for('compute2'))
        self.assertEqual('/new/bin/nova-manage', loaded.bin('nova-manage'))
        self.assertEqual(['compute2'],
                         upgrade.pending(loaded, '/new/bin/python'))

    def _sidecar(self, conductor):
        with mock.patch.object(release, 'of', return_value=conductor):
            path = configs.sidecar(self.layout, 'compute1', '/sys-root')
        parser = configparser.RawConfigParser(strict=True)
        parser.read(path)
        return parser

    def test_sidecar_pinned_beside_cyborg_16_only(self):
        old = self._sidecar(release._release('33.0.2', '16.0.1'))
        self.assertEqual('2026.1',
                         old.get('upgrade_levels', 'cyborg_conductor'))
        new = self._sidecar(release._release('34.0.0', '17.0.0'))
        self.assertFalse(new.has_section('upgrade_levels'))
