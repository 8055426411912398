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

"""The contract between the patch series, the installed Nova and the hooks.

* Nova's side: every hunk's context and removed lines are where the hunk
  says in the pristine installed Nova (each patch on the text the patches
  before it left); a failure names the patch and the hunk.
* The hook layer's side: every reference the patched Nova makes to
  ``nova_cyborg`` goes through one module-level import of a
  ``nova_cyborg.hooks`` module, names a function (or class) that exists
  there and, for a call, passes arguments its signature accepts.
* Both at once: the patched Nova modules import, and each one's hook
  module is bound at module level.

These run wherever Nova is installed (tox -e py3 with a pristine Nova, tox
-e functional with the series applied): the texts are made in memory, and
the import test applies the series to a copy when the installed Nova is
pristine.
"""

import ast
import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys

import fixtures
import testtools

from nova_cyborg.model import actions
from nova_cyborg_patch import cli as patch_tool
from nova_cyborg_patch import series as _series
from nova_cyborg_patch import unidiff as _unidiff

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
#: The series the patch tool picks for the installed Nova (34.0.0, or
#: 33.0.2 in tox -e py3-nova33).
SERIES_DIR = patch_tool.installed_series(os.path.join(REPO, 'patches'))[0]
HOOKS = 'nova_cyborg.hooks'
#: Files an enum patch may change besides the enum: the versioned
#: notification payloads whose schema holds it (their VERSION, bumped) and
#: Nova's hash test of those objects (their expected version-fingerprint).
#: The regex's group is the version.
ENUM_VERSIONED_FILES = {
    'nova/notifications/objects/instance.py':
        r"^VERSION = '(\d+\.\d+)'$",
    'nova/tests/unit/notifications/objects/test_notification.py':
        r"^'Instance\w*Payload': '(\d+\.\d+)-[0-9a-f]{32}',$",
}


def is_fix(patch):
    """A fix of an upstream bug: plain Nova code, no hook call."""
    return '-fix-' in patch.name


def is_interface(patch):
    """Optional methods added to a Nova interface: no hook call."""
    return '-interface-' in patch.name


def is_enum(patch):
    """This product's values added to a Nova enum: no hook call."""
    return '-enum-' in patch.name


def is_nova_test(rel):
    """One of Nova's own tests (a patch updates it with the code)."""
    return rel.startswith('nova/tests/')


def routed_files(patches):
    return set(rel for p in patches
               if not is_fix(p) and not is_interface(p) and not is_enum(p)
               for rel in p.paths())


def installed_nova_dir():
    spec = importlib.util.find_spec('nova')
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def module_name(rel):
    name = rel[:-len('.py')].replace('/', '.')
    return name[:-len('.__init__')] if name.endswith('.__init__') else name


def hunk_name(patch, fp, hunk):
    return '%s: hunk @@ -%d,%d +%d,%d @@ (%s)' % (
        patch.name, hunk.old_start, hunk.old_len, hunk.new_start,
        hunk.new_len, fp.target())


def series_texts(test):
    """(patches, pristine texts, patched texts) of the installed Nova."""
    patches = _series.load_series(SERIES_DIR)
    target = installed_nova_dir()
    evaluation = _series.Evaluation(target, patches)
    state = evaluation.state()
    if state == _series.FULLY_APPLIED:
        patched = evaluation.originals
        pristine = _series.Evaluation(target, patches, revert=True).contents
    elif state == _series.NOT_APPLIED:
        pristine, patched = evaluation.originals, evaluation.contents
    else:
        test.fail('the installed Nova in %s is %s:\n%s' % (
            target, state, '\n'.join('%s %s %s' % (
                r.patch.name, r.status, r.detail)
                for r in evaluation.ordered)))
    return patches, pristine, patched


def context_problems(patches, pristine):
    """Hunks whose context or removed lines are not where they say.

    Each patch is checked on the text the patches before it left; after a
    patch fails on a file, the later ones on that file are not checked.
    """
    texts = dict(pristine)
    broken = {}
    problems = []
    for patch in patches:
        for fp in patch.files:
            rel = fp.target()
            if rel in broken:
                problems.append('%s: not checked on %s: comes after %s' % (
                    patch.name, rel, broken[rel]))
                continue
            lines = texts[rel]
            bad = [_moved(patch, fp, hunk, lines) for hunk in fp.hunks]
            bad = [problem for problem in bad if problem]
            if bad:
                problems.extend(bad)
                broken[rel] = patch.name
            else:
                texts[rel] = _unidiff.apply_hunks(lines, fp)
    return problems


def _moved(patch, fp, hunk, lines):
    start, length, expected, _new = hunk.side()
    index = start if length == 0 else start - 1
    if lines[index:index + len(expected)] == expected:
        return None
    found = [at + 1 for at in range(len(lines))
             if lines[at:at + len(expected)] == expected]
    where = ('now at line %s' % ', '.join(map(str, found[:3])) if found
             else 'not found in the file')
    return ("%s: Nova's code around this hook moved or changed (%s)"
            % (hunk_name(patch, fp, hunk), where))


def added_lines(patches):
    """{stripped added line: [hunk names]} of the whole series."""
    index = {}
    for patch in patches:
        for fp in patch.files:
            for hunk in fp.hunks:
                for tag, text in hunk.lines:
                    if tag == '+' and text.strip():
                        index.setdefault(text.strip(), []).append(
                            hunk_name(patch, fp, hunk))
    return index


def hook_references(text, rel):
    """Hook references of one patched file, and its import problems.

    Returns ({alias: hooks module}, [(line, alias, name, call node or
    None)], [problem]).
    """
    tree = ast.parse(text, rel)
    top = set(id(node) for node in tree.body)
    aliases, problems = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or '']
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        if not any(m.split('.')[0] == 'nova_cyborg' for m in modules):
            continue
        if id(node) not in top:
            problems.append('%s:%d: a nova_cyborg import that is not at '
                            'module level' % (rel, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module == HOOKS:
            for alias in node.names:
                aliases[alias.asname or alias.name] = '%s.%s' % (
                    HOOKS, alias.name)
        else:
            problems.append('%s:%d: imports %s, not a module of %s'
                            % (rel, node.lineno, ', '.join(modules), HOOKS))
    refs, called = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _hook_attr(node.func, aliases):
            called.add(id(node.func))
            refs.append((node.lineno, node.func.value.id, node.func.attr,
                         node))
    for node in ast.walk(tree):
        if _hook_attr(node, aliases) and id(node) not in called:
            refs.append((node.lineno, node.value.id, node.attr, None))
    return aliases, sorted(refs, key=lambda ref: ref[:3]), problems


def _hook_attr(node, aliases):
    return (isinstance(node, ast.Attribute) and
            isinstance(node.value, ast.Name) and node.value.id in aliases)


def call_problem(func, call):
    """Why the call's arguments do not fit func's signature, or None."""
    if (any(isinstance(arg, ast.Starred) for arg in call.args) or
            any(kw.arg is None for kw in call.keywords)):
        return None
    try:
        inspect.signature(func).bind(
            *[None] * len(call.args),
            **dict((kw.arg, None) for kw in call.keywords))
    except TypeError as exc:
        return str(exc)
    return None


def call_site_problems(patched, patches):
    """Every hook reference in the patched texts checked against the
    hook modules; each problem names the hunk(s) that added the line."""
    added = added_lines(patches)
    problems = []
    for rel, lines in sorted(patched.items()):
        aliases, refs, import_problems = hook_references(''.join(lines), rel)
        problems.extend(import_problems)
        for line, alias, name, call in refs:
            source = lines[line - 1].strip()
            where = '%s:%d [%s]' % (rel, line, '; '.join(
                added.get(source, ["not an added line"])))
            module = importlib.import_module(aliases[alias])
            func = getattr(module, name, None)
            if func is None:
                problems.append('%s: %s has no %s' % (where, module.__name__,
                                                      name))
            elif call is not None:
                problem = call_problem(func, call)
                if problem:
                    problems.append('%s: %s.%s(): %s' % (
                        where, module.__name__, name, problem))
    return problems


class TestSeriesContract(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.patches, self.pristine, self.patched = series_texts(self)

    def test_hunks_fit_the_installed_nova(self):
        self.assertEqual([], context_problems(self.patches, self.pristine))

    def test_hook_call_sites_fit_the_hooks(self):
        self.assertEqual([], call_site_problems(self.patched, self.patches))

    def test_every_routed_file_imports_one_hook_module(self):
        routed = routed_files(self.patches)
        for rel, lines in sorted(self.patched.items()):
            aliases, refs, _problems = hook_references(''.join(lines), rel)
            if rel not in routed:
                continue
            self.assertEqual(1, len(aliases), '%s: %s' % (rel, aliases))
            self.assertNotEqual([], refs, rel)

    def test_fix_patches_use_no_nova_cyborg_code(self):
        fixes = [p for p in self.patches if is_fix(p)]
        for patch in fixes:
            for fp in patch.files:
                for hunk in fp.hunks:
                    for tag, text in hunk.lines:
                        if tag == '+':
                            self.assertNotIn('nova_cyborg', text,
                                             hunk_name(patch, fp, hunk))
                            self.assertNotIn('cyborg_hooks', text,
                                             hunk_name(patch, fp, hunk))
        # Fixes come first: they apply on pristine Nova, alone.
        self.assertEqual(fixes, self.patches[:len(fixes)])

    def test_interface_patches_add_only_optional_methods(self):
        # Each method an interface patch adds to the interface's file
        # raises NotImplementedError (no code for a driver that lacks it)
        # and is implemented in a routed file (checked there like every
        # hook call).
        interfaces = [p for p in self.patches if is_interface(p)]
        routed = routed_files(self.patches)
        for patch in interfaces:
            interface_files = [rel for rel in patch.paths()
                               if rel not in routed]
            self.assertNotEqual([], interface_files, patch.name)
            for rel in interface_files:
                tree = ast.parse(''.join(self.patched[rel]))
                added = [text.strip() for fp in patch.files
                         if fp.target() == rel for hunk in fp.hunks
                         for tag, text in hunk.lines if tag == '+']
                names = [line.split('(')[0][len('def '):] for line in added
                         if line.startswith('def ')]
                self.assertNotEqual([], names, patch.name)
                for func in ast.walk(tree):
                    if (isinstance(func, ast.FunctionDef) and
                            func.name in names):
                        body = [n for n in func.body
                                if not isinstance(n, ast.Expr)]
                        self.assertEqual(1, len(body), func.name)
                        self.assertIsInstance(body[0], ast.Raise)
                        self.assertEqual('NotImplementedError',
                                         body[0].exc.func.id)
                        self.assertNotIn('nova_cyborg',
                                         ast.unparse(func), func.name)
                for name in names:
                    self.assertTrue(any(
                        'def %s(' % name in ''.join(self.patched[other])
                        for other in routed), name)

    def test_enum_patches_add_only_this_products_values(self):
        # Each line an enum patch adds to the enum is a comment, a
        # constant whose value is one of the accelerator actions' task
        # states, or those constants' names added to the enum's ALL;
        # nothing is removed but the line ALL's members end on. In the
        # versioned notification payloads whose schema has the enum, the
        # patch changes only versions (bumped, with a comment); in Nova's
        # object hash test only their expected versions and fingerprints.
        enums = [p for p in self.patches if is_enum(p)]
        self.assertNotEqual([], enums)
        values = set(actions.TASK_STATES.values())
        for patch in enums:
            names = set()
            for fp in patch.files:
                if fp.target() in ENUM_VERSIONED_FILES:
                    self._assert_version_bumps_only(patch, fp)
                    continue
                for hunk in fp.hunks:
                    for tag, text in hunk.lines:
                        line = text.strip()
                        if tag != '+' or not line or line.startswith('#'):
                            continue
                        name, sep, value = line.partition(' = ')
                        if sep:
                            self.assertIn(ast.literal_eval(value), values,
                                          line)
                            names.add(name)
                        else:
                            members = {m.strip() for m in line.strip(
                                '(),').split(',') if m.strip()}
                            self.assertLessEqual(members - names,
                                                 {'SHELVING_OFFLOADING',
                                                  'UNSHELVING'}, line)
            self.assertEqual(len(values), len(names), patch.name)

    def _assert_version_bumps_only(self, patch, fp):
        pattern = ENUM_VERSIONED_FILES[fp.target()]
        removed, added = [], []
        for hunk in fp.hunks:
            for tag, text in hunk.lines:
                line = text.strip()
                if tag == ' ' or (tag == '+' and line.startswith('#')):
                    continue
                self.assertRegex(line, pattern, '%s: %s' % (patch.name,
                                                            fp.target()))
                (added if tag == '+' else removed).append(
                    re.match(pattern, line).group(1))
        # Each changed version goes up, in the same major version.
        self.assertEqual(len(removed), len(added), fp.target())
        for old, new in zip(removed, added):
            old_major, old_minor = (int(n) for n in old.split('.'))
            new_major, new_minor = (int(n) for n in new.split('.'))
            self.assertEqual((old_major, old_minor + 1),
                             (new_major, new_minor), fp.target())

    def test_moved_nova_code_names_the_hunk(self):
        # One line more at the top of the first file the series changes:
        # every hunk of the first patch on it has moved by one line.
        patch = self.patches[0]
        fp = patch.files[0]
        pristine = dict(self.pristine)
        pristine[fp.target()] = ['# moved\n'] + pristine[fp.target()]

        problems = context_problems(self.patches, pristine)

        hunk = fp.hunks[0]
        self.assertIn("%s: Nova's code around this hook moved or changed "
                      "(now at line %d)" % (hunk_name(patch, fp, hunk),
                                            hunk.old_start + 1), problems)

    def test_bad_call_sites_are_named(self):
        text = ('from nova_cyborg.hooks import compute as cyborg_hooks\n'
                'from nova_cyborg import client\n'
                'def f(context, instance):\n'
                '    from nova_cyborg.hooks import api\n'
                '    cyborg_hooks.no_such_hook(context)\n'
                '    cyborg_hooks.endpoints()\n'
                '    return cyborg_hooks.endpoints(manager=instance)\n')
        problems = call_site_problems({'nova/x.py': _unidiff.split_lines(
            text)}, self.patches)
        self.assertEqual([
            'nova/x.py:2: imports nova_cyborg, not a module of '
            'nova_cyborg.hooks',
            'nova/x.py:4: a nova_cyborg import that is not at module level',
            'nova/x.py:5 [not an added line]: nova_cyborg.hooks.compute has '
            'no no_such_hook',
            "nova/x.py:6 [not an added line]: "
            "nova_cyborg.hooks.compute.endpoints(): missing a required "
            "argument: 'manager'"], problems)


IMPORT_CHECK = '''
import importlib, json, sys
problems = []
# nova.cmd refuses to load after eventlet was imported: it goes first.
modules = sorted(json.loads(sys.argv[1]).items(),
                 key=lambda item: (not item[0].startswith('nova.cmd'), item))
for name, aliases in modules:
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        problems.append('%s does not import: %r' % (name, exc))
        continue
    if not module.__file__.startswith(sys.argv[2]):
        problems.append('%s imported from %s' % (name, module.__file__))
    for alias, hooks in aliases.items():
        if getattr(module, alias, None) is not importlib.import_module(hooks):
            problems.append('%s.%s is not %s' % (name, alias, hooks))
print(json.dumps(problems))
'''


class TestPatchedNovaImports(testtools.TestCase):
    """Every patched Nova module imports, with its hook module bound."""

    def test_patched_modules_import(self):
        patches, _pristine, patched = series_texts(self)
        target = installed_nova_dir()
        if patched != _series.Evaluation(target, patches).originals:
            # A pristine installed Nova: import a patched copy of it.
            copy = self.useFixture(fixtures.TempDir()).path
            shutil.copytree(os.path.join(target, 'nova'),
                            os.path.join(copy, 'nova'),
                            ignore=shutil.ignore_patterns('__pycache__',
                                                          'tests'))
            # Nova's own tests the series updates (an enum patch's object
            # hash test), copied too: they are patched, not imported.
            for rel in patched:
                if is_nova_test(rel):
                    os.makedirs(os.path.dirname(os.path.join(copy, rel)),
                                exist_ok=True)
                    shutil.copy(os.path.join(target, rel),
                                os.path.join(copy, rel))
            evaluation = _series.Evaluation(copy, patches)
            self.assertEqual(_series.NOT_APPLIED, evaluation.state())
            _series.commit(evaluation)
            target = copy
        modules = dict(
            (module_name(rel), hook_references(''.join(lines), rel)[0])
            for rel, lines in patched.items() if not is_nova_test(rel))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [target, REPO] + sys.path))
        result = subprocess.run(
            [sys.executable, '-c', IMPORT_CHECK, json.dumps(modules),
             os.path.join(target, 'nova')],
            capture_output=True, text=True, env=env, cwd=REPO)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([], json.loads(result.stdout.splitlines()[-1]))
