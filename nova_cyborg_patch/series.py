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

from nova_cyborg_patch import unidiff as _unidiff

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


def series_names(series_dir):
    """The patches <series_dir>/series names, in order (comments and
    blank lines left out).

    :raises: OSError if the file cannot be read.
    """
    with open(os.path.join(series_dir, 'series'), encoding=ENCODING) as f:
        names = [line.split('#', 1)[0].strip() for line in f]
    return [name for name in names if name]


def load_series(series_dir):
    """Read <series_dir>/series and parse every patch it names, in order."""
    series_file = os.path.join(series_dir, 'series')
    try:
        names = series_names(series_dir)
    except OSError as exc:
        raise SeriesError('cannot read %s: %s' % (series_file, exc))
    patches = []
    for name in names:
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

    Several patches may change one file: they apply in series order, each
    on the text the previous one left (its line numbers count from there).
    So for a file changed by patches p1..pn the only states a tree can be
    in are "p1..pk applied" for some k. Each k is tried on the file as it
    is on disk: reverting pk..p1 must give the pristine text and applying
    p(k+1)..pn the fully patched one, every hunk matching exactly. Exactly
    one k may fit; none is a conflict (a modified or other Nova file),
    several is a conflict too (a patch that applies in both directions).

    ``contents`` holds each file as it would be after the operation (the
    fully patched text, or the pristine text when reverting);
    ``originals`` holds the files as they are on disk.
    """

    def __init__(self, target, patches, revert=False, max_offset=0):
        self.target = target
        self.revert = revert
        self.originals = {}
        self.contents = {}
        chains = {}
        for patch in patches:
            for fp in patch.files:
                chains.setdefault(fp.target(STRIP), []).append((patch, fp))
        verdicts = dict((patch.name, []) for patch in patches)
        for rel, chain in sorted(chains.items()):
            lines = self._read(rel)
            judged, pristine, patched = judge_file(rel, lines, chain,
                                                   max_offset)
            for (patch, _fp), verdict in zip(chain, judged):
                verdicts[patch.name].append((rel,) + verdict)
            if pristine is not None:
                self.contents[rel] = pristine if revert else patched
        self.results = dict((patch.name, _combine(patch, verdicts[patch.name]))
                            for patch in patches)
        self.ordered = [self.results[p.name] for p in patches]

    def _read(self, rel):
        try:
            lines = read_lines(self.target, rel)
        except OSError as exc:
            raise SeriesError('cannot read %s: %s' % (rel, exc))
        self.originals[rel] = self.contents[rel] = lines
        return lines

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


def first_mismatches(target, patches, max_offset=0):
    """Applying the series to the tree as it is, file by file: the first
    hunk of each file that does not match, as ``<patch>: <mismatch>``.

    For a tree the series is not applied to (a Nova release it was not
    made on), this names what changed where :class:`Evaluation`'s
    explanation may pick another reading.
    """
    chains = {}
    for patch in patches:
        for fp in patch.files:
            chains.setdefault(fp.target(STRIP), []).append((patch, fp))
    found = []
    for rel, chain in sorted(chains.items()):
        lines = read_lines(target, rel)
        for patch, fp in chain:
            try:
                lines = _unidiff.apply_hunks(lines, fp,
                                             max_offset=max_offset)
            except _unidiff.HunkMismatch as exc:
                found.append('%s: %s' % (patch.name, exc))
                break
    return found


def _combine(patch, verdicts):
    """One patch's Result from its (file, status, detail) verdicts."""
    conflicts = ['%s' % detail for _rel, status, detail in verdicts
                 if status == CONFLICT]
    if conflicts:
        return Result(patch, CONFLICT, '; '.join(conflicts))
    statuses = set(status for _rel, status, _detail in verdicts)
    if len(statuses) == 1:
        return Result(patch, statuses.pop())
    return Result(patch, CONFLICT, 'applied to %s but not to %s' % (
        ', '.join(rel for rel, status, _d in verdicts if status == APPLIED),
        ', '.join(rel for rel, status, _d in verdicts
                  if status == APPLICABLE)))


def _walk(lines, steps, reverse, max_offset=0):
    """Apply (patch, file patch) steps in turn, stopping at a mismatch.

    Returns (lines, steps done, hunks that matched, mismatch detail or
    None).
    """
    hunks = 0
    for done, (_patch, fp) in enumerate(steps):
        try:
            lines = _unidiff.apply_hunks(lines, fp, reverse=reverse,
                                         max_offset=max_offset)
        except _unidiff.HunkMismatch as exc:
            states = _unidiff.hunk_states(lines, fp)
            return lines, done, hunks + exc.number - 1, '%s [hunks: %s]' % (
                exc, ', '.join('#%d %s' % (n, s)
                               for n, s in enumerate(states, 1)))
        hunks += len(fp.hunks)
    return lines, len(steps), hunks, None


def judge_file(rel, lines, chain, max_offset=0):
    """Judge one file changed by the (patch, file patch) steps of chain.

    Returns ([(status, detail)] parallel to chain, pristine lines, fully
    patched lines); both texts are None if the file is in conflict.
    """
    count = len(chain)
    fits, walks = [], []
    for k in range(count + 1):
        pristine, back, back_hunks, back_error = _walk(
            lines, list(reversed(chain[:k])), reverse=True,
            max_offset=max_offset)
        patched, ahead, ahead_hunks, ahead_error = _walk(
            lines, chain[k:], reverse=False, max_offset=max_offset)
        if back_error is None and ahead_error is None:
            fits.append((k, pristine, patched))
        walks.append((back_hunks + ahead_hunks, -k, k, back, back_error,
                      ahead, ahead_error))
    if len(fits) == 1:
        k, pristine, patched = fits[0]
        return ([(APPLIED, '')] * k + [(APPLICABLE, '')] * (count - k),
                pristine, patched)
    if fits:
        low, high = fits[0][0], fits[-1][0]
        return ([(APPLIED, '')] * low +
                [(CONFLICT, '%s: applies in both directions' % rel)] *
                (high - low) + [(APPLICABLE, '')] * (count - high),
                None, None)
    # No k fits: explain with the k under which most hunks matched (the
    # fewest patches applied on a tie).
    return _explain(rel, count, *max(walks)[2:]), None, None


def _explain(rel, count, k, back, back_error, ahead, ahead_error):
    """Verdicts for a conflicting file, assuming its first k steps applied.

    Reverting steps k-1..0 stopped after ``back`` of them (at a mismatch
    if back_error); applying steps k..count-1 stopped after ``ahead``.
    """
    verdicts = []
    for i in range(count):
        if i < k - back - 1:
            verdicts.append((CONFLICT, '%s: comes before a conflicting patch'
                             % rel))
        elif i == k - back - 1:
            verdicts.append((CONFLICT, back_error))
        elif i < k:
            verdicts.append((APPLIED, ''))
        elif i < k + ahead:
            verdicts.append((APPLICABLE, ''))
        elif i == k + ahead and ahead_error is not None:
            verdicts.append((CONFLICT, ahead_error))
        else:
            verdicts.append((CONFLICT, '%s: comes after a conflicting patch'
                             % rel))
    return verdicts


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
