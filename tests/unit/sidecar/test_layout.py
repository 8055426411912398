"""The simulator is test tooling: the sidecar daemon never imports it.

A static check of every module under ``sidecar/`` (imports at any level,
including inside functions), and a check of a fresh interpreter that
imports every sidecar module: ``sidecar_simulator`` is not loaded.
"""

import ast
import os
import pkgutil
import subprocess
import sys

import testtools

import sidecar

SIDECAR = os.path.dirname(os.path.abspath(sidecar.__file__))
SIMULATOR = 'sidecar_simulator'


def _imports(path):
    """Every module name an ``import`` or ``from ... import`` names."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module


def simulator_imports():
    """[(module path, line, name)] of imports of the simulator."""
    found = []
    for root, _dirs, files in os.walk(SIDECAR):
        for name in files:
            if not name.endswith('.py'):
                continue
            path = os.path.join(root, name)
            for line, module in _imports(path):
                if module.split('.')[0] == SIMULATOR:
                    found.append((os.path.relpath(path, SIDECAR), line,
                                  module))
    return found


class LayoutTest(testtools.TestCase):

    def test_check_sees_imports(self):
        # The check reads the imports of the package at all.
        path = os.path.join(SIDECAR, 'daemon', 'factory.py')
        self.assertIn('sidecar.daemon', {m for _l, m in _imports(path)})

    def test_no_sidecar_module_imports_the_simulator(self):
        self.assertEqual([], simulator_imports())

    def test_importing_every_sidecar_module_leaves_simulator_unloaded(self):
        modules = sorted(
            m.name for m in pkgutil.walk_packages([SIDECAR], 'sidecar.'))
        self.assertIn('sidecar.daemon.service', modules)
        code = ('import importlib, sys\n'
                'for name in %r:\n'
                '    importlib.import_module(name)\n'
                'print(sorted(m for m in sys.modules\n'
                '             if m.split(".")[0] == %r))\n'
                % (modules, SIMULATOR))
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        out = subprocess.run(
            [sys.executable, '-c', code], capture_output=True, text=True,
            env=env, cwd=os.path.dirname(SIDECAR), check=False)
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual('[]', out.stdout.strip().splitlines()[-1])

    def test_the_simulator_is_not_under_the_runtime_package(self):
        self.assertFalse(os.path.exists(os.path.join(SIDECAR, SIMULATOR)))
        self.assertEqual([], [n for n in os.listdir(SIDECAR)
                              if n.startswith('simulator')])
