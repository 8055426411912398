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

"""Evaluate a patch series against a Nova tree and write it atomically.

Nothing here imports Nova: the tree is handled as text files only.
"""

import glob
import os
import stat
import tempfile

from nova_cyborg.cmd import _unidiff

STRIP = 1
ENCODING = 'utf-8'

APPLIED = 'applied'
APPLICABLE = 'applicable'
CONFLICT = 'conflict'

# Overall states of a series on a tree.
FULLY_APPLIED = 'applied'
NOT_APPLIED = 'not applied'
PARTIAL = 'partially applied'
CONFLICTING = 'conflict'


class SeriesError(Exception):
    """The series cannot be read or does not fit the tree."""


class Patch(object):
    def __init__(self, name, files):
        self.name = name
        self.files = files

    def paths(self):
        return [fp.target(STRIP) for fp in self.files]


class Result(object):
    """One patch's status against the tree; detail explains a conflict."""

    def __init__(self, patch, status, detail=''):
        self.patch = patch
        self.status = status
        self.detail = detail


def load_series(series_dir):
    """Read <series_dir>/series and parse every patch it names, in order."""
    series_file = os.path.join(series_dir, 'series')
    try:
        with open(series_file, encoding=ENCODING) as f:
            names = [line.split('#', 1)[0].strip() for line in f]
    except OSError as exc:
        raise SeriesError('cannot read %s: %s' % (series_file, exc))
    patches = []
    for name in filter(None, names):
        try:
            with open(os.path.join(series_dir, name), encoding=ENCODING) as f:
                files = _unidiff.parse(f.read(), name)
        except (OSError, _unidiff.PatchError) as exc:
            raise SeriesError('patch %s: %s' % (name, exc))
        for fp in files:
            path = fp.target(STRIP)
            if os.path.isabs(path) or '..' in path.split('/'):
                raise SeriesError('patch %s: unsafe path %s' % (name, path))
        patches.append(Patch(name, files))
    if not patches:
        raise SeriesError('%s names no patches' % series_file)
    return patches


def read_lines(target, rel):
    with open(os.path.join(target, rel), 'rb') as f:
        text = f.read().decode(ENCODING, 'surrogateescape')
    return _unidiff.split_lines(text)


class Evaluation(object):
    """The series checked against a tree, patch by patch.

    The patches are walked in series order (reverse order when reverting)
    over an in-memory copy of the files they touch. A patch whose
    "to do" direction applies exactly is applied to that copy, so
    ``contents`` ends up holding the tree as it would be after the
    operation; ``originals`` holds the files as they are on disk.
    """

    def __init__(self, target, patches, revert=False):
        self.target = target
        self.revert = revert
        self.originals = {}
        self.contents = {}
        self.results = {}
        for patch in (reversed(patches) if revert else patches):
            self.results[patch.name] = self._evaluate(patch)
        self.ordered = [self.results[p.name] for p in patches]

    def _lines(self, rel):
        if rel not in self.contents:
            try:
                self.originals[rel] = read_lines(self.target, rel)
            except OSError as exc:
                raise SeriesError('cannot read %s: %s' % (rel, exc))
            self.contents[rel] = self.originals[rel]
        return self.contents[rel]

    def _try(self, patch, reverse):
        new, error = {}, None
        for fp in patch.files:
            rel = fp.target(STRIP)
            lines = new.get(rel, self._lines(rel))
            try:
                new[rel] = _unidiff.apply_hunks(lines, fp, reverse=reverse)
            except _unidiff.HunkMismatch as exc:
                states = _unidiff.hunk_states(lines, fp)
                error = '%s [hunks: %s]' % (exc, ', '.join(
                    '#%d %s' % (n, s) for n, s in enumerate(states, 1)))
                return None, error
        return new, None

    def _evaluate(self, patch):
        forward, error = self._try(patch, reverse=False)
        backward, _error = self._try(patch, reverse=True)
        if forward is not None and backward is not None:
            return Result(patch, CONFLICT, 'applies in both directions')
        if forward is None and backward is None:
            return Result(patch, CONFLICT, error)
        todo = backward if self.revert else forward
        if todo is not None:
            self.contents.update(todo)
        return Result(patch, APPLIED if backward is not None else APPLICABLE)

    def state(self):
        statuses = set(r.status for r in self.ordered)
        if CONFLICT in statuses:
            return CONFLICTING
        if statuses == {APPLIED}:
            return FULLY_APPLIED
        if statuses == {APPLICABLE}:
            return NOT_APPLIED
        return PARTIAL

    def changed(self):
        return sorted(rel for rel, lines in self.contents.items()
                      if lines != self.originals[rel])


def _stage(path, lines):
    """Write lines to a temp file next to path, with path's mode."""
    directory, base = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % base, suffix='.nova-cyborg',
                               dir=directory)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(''.join(lines).encode(ENCODING, 'surrogateescape'))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def commit(evaluation):
    """Replace the changed files on disk; all or (on error) none of them.

    Every new file is staged first; only then is each one moved into place
    with os.replace. If a replace fails the files already replaced are
    restored from the originals. Returns the relative paths written.
    """
    target = evaluation.target
    rels = evaluation.changed()
    staged = []
    try:
        for rel in rels:
            path = os.path.join(target, rel)
            staged.append((_stage(path, evaluation.contents[rel]), path))
    except BaseException:
        for tmp, _path in staged:
            os.unlink(tmp)
        raise
    done = []
    try:
        for tmp, path in staged:
            os.replace(tmp, path)
            done.append(path)
    except BaseException:
        for rel, path in zip(rels, done):
            os.replace(_stage(path, evaluation.originals[rel]), path)
        for tmp, path in staged[len(done):]:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise
    for rel in rels:
        remove_bytecode(target, rel)
    return rels


def remove_bytecode(target, rel):
    """Remove __pycache__/<module>.*.pyc of a replaced module."""
    directory, base = os.path.split(os.path.join(target, rel))
    module = os.path.splitext(base)[0]
    pattern = os.path.join(directory, '__pycache__', module + '.*.pyc')
    for pyc in glob.glob(pattern):
        try:
            os.unlink(pyc)
        except FileNotFoundError:
            pass
