"""The sidecar writes to sysfs only through its privsep context.

A static check of the sidecar's source: every call that can write a file
(``open`` in a write mode, ``os.open`` with write flags, ``os.write``,
``Path.write_*``, ``shutil`` copies and moves) is either in
``sidecar/privileged.py``, whose functions run in the privsep daemon and
check their arguments again, or in a module allowed to write its own
files, none of which knows where sysfs is.
"""

import ast
import os

import testtools

SIDECAR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'sidecar')

PRIVILEGED = 'privileged.py'
#: Modules that write files of their own: the bitstream staging directory
#: (program/glance.py), the job journal and the state files in the state
#: directory (program/journal.py, state/cache.py), the archive of
#: ``nova-cyborg-sidecar-manage capture`` (cmd/archive.py). The simulated
#: hosts that tests generate are outside the package (sidecar_simulator).
OWN_FILES = {os.path.join('program', 'glance.py'),
             os.path.join('program', 'journal.py'),
             os.path.join('state', 'cache.py'),
             os.path.join('cmd', 'archive.py')}
WRITE_FLAGS = {'O_WRONLY', 'O_RDWR', 'O_CREAT', 'O_TRUNC', 'O_APPEND'}


def _modules():
    for root, _dirs, files in os.walk(SIDECAR):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(root, name)
                yield os.path.relpath(path, SIDECAR), path


def _name(node):
    if isinstance(node, ast.Attribute):
        return '%s.%s' % (_name(node.value), node.attr)
    if isinstance(node, ast.Name):
        return node.id
    return '?'


def _writes(call):
    func = _name(call.func)
    if func == 'open' or func.endswith('.fdopen'):
        mode = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == 'mode'), None)
        return (isinstance(mode, ast.Constant) and
                any(c in str(mode.value) for c in 'wax+'))
    if func == 'os.open':
        used = {n.attr for n in ast.walk(call) if isinstance(n, ast.Attribute)}
        return bool(used & WRITE_FLAGS)
    return (func == 'os.write' or func.endswith(('.write_text',
                                                 '.write_bytes')) or
            func.startswith('shutil.'))


def write_sites():
    """{module: [line, ...]} of every call that can write a file."""
    sites = {}
    for rel, path in _modules():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _writes(node):
                sites.setdefault(rel, []).append(node.lineno)
    return sites


class PrivsepOnlyTest(testtools.TestCase):

    def test_writes_are_privileged_or_own_files(self):
        sites = write_sites()
        self.assertIn(PRIVILEGED, sites)    # the check sees writes at all
        unexpected = {rel: lines for rel, lines in sites.items()
                      if rel != PRIVILEGED and rel not in OWN_FILES}
        self.assertEqual({}, unexpected)

    def test_modules_writing_own_files_do_not_know_sysfs(self):
        for rel in OWN_FILES:
            with open(os.path.join(SIDECAR, rel)) as f:
                source = f.read()
            self.assertNotIn('sysfs', source, rel)
            self.assertNotIn("'/sys", source, rel)

    def test_the_check_finds_a_write(self):
        tree = ast.parse("open(p, 'w')\nos.open(p, os.O_WRONLY)\n"
                         "open(p)\nos.open(p, os.O_RDONLY)\n")
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and _name(n.func) in ('open', 'os.open')]
        self.assertEqual([True, True, False, False],
                         [_writes(c) for c in sorted(
                             calls, key=lambda c: c.lineno)])
