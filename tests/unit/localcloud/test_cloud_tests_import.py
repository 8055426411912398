"""The cloud tests (tests/cloud) run in the tempest stage's interpreter,
where Nova's test fixtures cannot be imported (they need eventlet's
patching, which that stage turns off).  A cloud test module that pulls
them in fails to load and the stage runs nothing of it."""

import os
import pkgutil
import subprocess
import sys

import testtools

import tests.cloud

_PROBE = """
import importlib, sys
importlib.import_module(sys.argv[1])
bad = sorted(m for m in sys.modules if m.startswith('nova.tests'))
if bad:
    sys.exit('imports %s' % ', '.join(bad))
"""


class CloudTestsImportTest(testtools.TestCase):

    def test_every_cloud_test_module_imports_without_nova_fixtures(self):
        names = ['tests.cloud.' + m.name
                 for m in pkgutil.iter_modules(tests.cloud.__path__)]
        self.assertIn('tests.cloud.test_live_migration', names)
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        root = os.path.dirname(os.path.dirname(tests.cloud.__path__[0]))
        for name in names:
            proc = subprocess.run(
                [sys.executable, '-c', _PROBE, name], cwd=root, env=env,
                capture_output=True, text=True, timeout=300)
            self.assertEqual(0, proc.returncode,
                             '%s: %s' % (name, proc.stderr[-2000:]))
