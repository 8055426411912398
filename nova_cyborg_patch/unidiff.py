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

"""A small, strict unified-diff parser and applier.

Only what the nova-cyborg patch series needs: modifications of existing
text files. A hunk applies only if its context and removed lines match the
file exactly: there is no fuzz. By default they must be at the line number
given in its header. With ``max_offset`` (a Nova point release the series
was not made on, whose patched regions are unchanged but may have moved)
the hunk is looked for up to that many lines away, nearest first, every
later hunk starting from where the one before it was found; two matches
at the same distance are a mismatch. Reverse application swaps the old
and new sides.
"""

import re

_HUNK_RE = re.compile(r'^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@')
_NO_EOL = '\\'


class PatchError(Exception):
    """A patch file is malformed or does not apply."""


class HunkMismatch(PatchError):
    """A hunk's expected lines are not in the file where it says."""

    def __init__(self, path, number, line, changed=''):
        self.path = path
        self.number = number
        self.line = line
        self.changed = changed
        super().__init__('%s: hunk #%d (at line %d) does not match%s'
                         % (path, number, line,
                            ' (%s)' % changed if changed else ''))


class Hunk(object):
    def __init__(self, old_start, old_len, new_start, new_len):
        self.old_start = old_start
        self.old_len = old_len
        self.new_start = new_start
        self.new_len = new_len
        # (tag, text) with tag in ' ', '-', '+'; text keeps its newline.
        self.lines = []

    def side(self, reverse=False):
        """Return (start, expected lines, replacement lines)."""
        old = [t for tag, t in self.lines if tag in ' -']
        new = [t for tag, t in self.lines if tag in ' +']
        if reverse:
            return self.new_start, self.new_len, new, old
        return self.old_start, self.old_len, old, new


class FilePatch(object):
    def __init__(self, old_path, new_path):
        self.old_path = old_path
        self.new_path = new_path
        self.hunks = []

    def target(self, strip=1):
        """The path of the patched file, relative, with strip applied."""
        parts = self.new_path.split('/')
        if len(parts) <= strip:
            raise PatchError('cannot strip %d component(s) from %r'
                             % (strip, self.new_path))
        return '/'.join(parts[strip:])


def split_lines(text):
    """Split on '\\n' only, keeping line endings (unlike str.splitlines)."""
    lines = text.split('\n')
    result = [line + '\n' for line in lines[:-1]]
    if lines[-1]:
        result.append(lines[-1])
    return result


def _path(line, prefix):
    # Drop the prefix and a trailing timestamp ("\t2024-01-01 ...").
    return line[len(prefix):].rstrip('\n').split('\t')[0].strip()


def parse(text, name='<patch>'):
    """Parse unified diff text into a list of FilePatch objects.

    Lines before the first '--- ' line (and between files) are comments.
    """
    lines = split_lines(text)
    files = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith('--- '):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith('+++ '):
            raise PatchError('%s:%d: "---" not followed by "+++"'
                             % (name, i + 1))
        fp = FilePatch(_path(line, '--- '), _path(lines[i + 1], '+++ '))
        if '/dev/null' in (fp.old_path, fp.new_path):
            raise PatchError('%s:%d: file creation/deletion is not supported'
                             % (name, i + 1))
        files.append(fp)
        i += 2
        while i < len(lines) and lines[i].startswith('@@ '):
            i = _parse_hunk(lines, i, fp, name)
    if not files:
        raise PatchError('%s: no file changes found' % name)
    return files


def _parse_hunk(lines, i, fp, name):
    match = _HUNK_RE.match(lines[i])
    if not match:
        raise PatchError('%s:%d: bad hunk header' % (name, i + 1))
    old_start, old_len, new_start, new_len = (
        int(g) if g is not None else 1 for g in match.groups())
    hunk = Hunk(old_start, old_len, new_start, new_len)
    fp.hunks.append(hunk)
    old_left, new_left = old_len, new_len
    i += 1
    while old_left > 0 or new_left > 0:
        if i >= len(lines):
            raise PatchError('%s: hunk #%d of %s is truncated'
                             % (name, len(fp.hunks), fp.new_path))
        line = lines[i]
        tag, body = line[:1], line[1:]
        if line == '\n':
            # A blank context line whose leading space was stripped.
            tag, body = ' ', '\n'
        if tag == ' ' and old_left and new_left:
            old_left -= 1
            new_left -= 1
        elif tag == '-' and old_left:
            old_left -= 1
        elif tag == '+' and new_left:
            new_left -= 1
        elif tag != _NO_EOL:
            raise PatchError('%s:%d: unexpected line in hunk #%d of %s'
                             % (name, i + 1, len(fp.hunks), fp.new_path))
        if tag == _NO_EOL:
            _strip_eol(hunk, name, i)
        else:
            hunk.lines.append((tag, body))
        i += 1
    # A trailing "\ No newline at end of file" for the last line.
    if i < len(lines) and lines[i].startswith(_NO_EOL):
        _strip_eol(hunk, name, i)
        i += 1
    return i


def _strip_eol(hunk, name, i):
    if not hunk.lines:
        raise PatchError('%s:%d: misplaced "\\" line' % (name, i + 1))
    tag, body = hunk.lines[-1]
    hunk.lines[-1] = (tag, body[:-1] if body.endswith('\n') else body)


def _locate(lines, expected, index, pos, max_offset):
    """Where ``expected`` is, nearest to ``index`` and not before ``pos``;
    None if nowhere within ``max_offset`` lines or ambiguous."""
    def fits(at):
        return at >= pos and lines[at:at + len(expected)] == expected
    if fits(index):
        return index
    if not expected:
        return None
    for distance in range(1, max_offset + 1):
        found = [at for at in (index - distance, index + distance)
                 if fits(at)]
        if len(found) == 1:
            return found[0]
        if found:
            return None
    return None


def _what_changed(lines, expected, index, max_offset):
    """The first expected line that differs where most of the hunk's lines
    are in place (nearest on a tie) within the window:
    ``line N: expected '...', found '...'``."""
    best = None
    for at in range(max(0, index - max_offset),
                    min(len(lines), index + max_offset) + 1):
        same = sum(1 for i, text in enumerate(expected)
                   if at + i < len(lines) and lines[at + i] == text)
        key = (same, -abs(at - index))
        if best is None or key > best[0]:
            best = (key, at)
    if best is None or not expected:
        return ''
    at = best[1]
    for i, text in enumerate(expected):
        found = lines[at + i] if at + i < len(lines) else '<end of file>'
        if found != text:
            return 'line %d: expected %r, found %r' % (
                at + i + 1, text.rstrip('\n'), found.rstrip('\n'))
    return ''


def apply_hunks(lines, file_patch, reverse=False, max_offset=0):
    """Apply one file's hunks to a list of lines; return the new list.

    Raises HunkMismatch naming the first hunk that does not match exactly
    (within ``max_offset`` lines of where its header and the hunks before
    it say; see the module's docstring).
    """
    result = []
    pos = 0  # index into lines of the next line not yet copied
    shift = 0  # how far the hunks before were from their headers
    hunks = file_patch.hunks
    for number, hunk in enumerate(hunks, 1):
        start, length, expected, replacement = hunk.side(reverse)
        # For an empty old side, start is the line *after* which to insert.
        index = (start if length == 0 else start - 1) + shift
        at = _locate(lines, expected, index, pos, max_offset) \
            if len(expected) == length else None
        if at is None:
            raise HunkMismatch(
                file_patch.target(), number, start,
                _what_changed(lines, expected, index, max_offset)
                if max_offset else '')
        shift = at - (index - shift)
        result.extend(lines[pos:at])
        result.extend(replacement)
        pos = at + len(expected)
    result.extend(lines[pos:])
    return result


def hunk_states(lines, file_patch):
    """Describe each hunk as 'applied', 'pristine' or 'conflict'.

    Every hunk is looked at where its header says on the respective side;
    this is a diagnosis aid for a partially applied or modified file.
    """
    states = []
    for hunk in file_patch.hunks:
        found = []
        for reverse, label in ((False, 'pristine'), (True, 'applied')):
            start, length, expected, _new = hunk.side(reverse)
            index = start if length == 0 else start - 1
            # Earlier hunks may have shifted lines; look around a bit.
            shift = abs(hunk.new_start - hunk.old_start) + 1
            for offset in range(-shift, shift + 1):
                at = index + offset
                if at >= 0 and lines[at:at + len(expected)] == expected:
                    found.append(label)
                    break
        states.append(found[0] if len(found) == 1 else
                      'ambiguous' if found else 'conflict')
    return states
