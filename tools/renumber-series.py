#!/usr/bin/env python3
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

"""Recompute the hunk headers of a series after hunks were edited by hand.

Usage:
  tools/renumber-series.py SERIES_DIR PRISTINE_NOVA_DIR [--dry-run]

Each hunk's body is read up to the next hunk, file or end of the patch
(its "@@" counts are ignored, so lines may be added to or removed from a
hunk in an editor). Patches are then applied in series order, as
nova-cyborg-patch does, on the files of PRISTINE_NOVA_DIR (the directory
holding the ``nova`` package): each hunk's old side must occur exactly in
the text the patches before it left; the occurrence nearest to the
hunk's stated line is used, and the header rewritten with the true start
lines and counts. A hunk whose old side is found nowhere stops the tool,
naming it. The header comments of each patch are kept as they are.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nova_cyborg_patch import series as _series  # noqa: E402
from nova_cyborg_patch import unidiff as _unidiff  # noqa: E402


def parse_loose(text):
    """(header text, [(old path, new path, [[stated start, lines]]))."""
    lines = _unidiff.split_lines(text)
    while lines and lines[-1] == '\n':
        lines.pop()
    i = 0
    while i < len(lines) and not lines[i].startswith('--- '):
        i += 1
    header, files = ''.join(lines[:i]), []
    while i < len(lines):
        old = _unidiff._path(lines[i], '--- ')
        new = _unidiff._path(lines[i + 1], '+++ ')
        hunks = []
        files.append((old, new, hunks))
        i += 2
        while i < len(lines) and lines[i].startswith('@@ '):
            start = int(lines[i].split()[1][1:].split(',')[0])
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith(('@@ ', '--- ')):
                line = lines[i]
                body.append((' ', '\n') if line == '\n' else
                            (line[:1], line[1:]))
                i += 1
            hunks.append([start, body])
    return header, files


def locate(lines, old, stated, after):
    """The start (0-based) of old in lines at or after ``after``."""
    n = len(old)
    found = [i for i in range(after, len(lines) - n + 1)
             if lines[i:i + n] == old]
    if not found:
        return None
    return min(found, key=lambda i: abs(i + 1 - stated))


def renumber(series_dir, nova_dir):
    """Return {patch name: new text}; raise SystemExit on a lost hunk."""
    texts, staged = {}, {}
    with open(os.path.join(series_dir, 'series')) as f:
        names = [line.split('#', 1)[0].strip() for line in f]
    for name in filter(None, names):
        with open(os.path.join(series_dir, name)) as f:
            header, files = parse_loose(f.read())
        out = header.rstrip('\n') + '\n\n'
        for old_path, new_path, hunks in files:
            rel = new_path.split('/', 1)[1]
            if rel not in staged:
                staged[rel] = _series.read_lines(nova_dir, rel)
            lines = staged[rel]
            out += '--- %s\n+++ %s\n' % (old_path, new_path)
            result, pos, delta = [], 0, 0
            for number, (stated, body) in enumerate(hunks, 1):
                old = [t for tag, t in body if tag in ' -']
                new = [t for tag, t in body if tag in ' +']
                at = locate(lines, old, stated - delta, pos)
                if at is None:
                    raise SystemExit('%s: %s hunk #%d (@@ -%d) matches '
                                     'nowhere' % (name, rel, number, stated))
                result += lines[pos:at] + new
                pos = at + len(old)
                out += '@@ -%d,%d +%d,%d @@\n' % (
                    at + 1, len(old), at + 1 + delta, len(new))
                out += ''.join(tag + t for tag, t in body)
                delta += len(new) - len(old)
            staged[rel] = result + lines[pos:]
        texts[name] = out
    return texts


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('series_dir')
    parser.add_argument('nova_dir')
    parser.add_argument('--dry-run', action='store_true')
    args = parser.parse_args(argv)
    for name, text in renumber(args.series_dir, args.nova_dir).items():
        path = os.path.join(args.series_dir, name)
        with open(path) as f:
            if f.read() == text:
                continue
        print('renumbered %s' % name)
        if not args.dry_run:
            with open(path, 'w') as f:
                f.write(text)


if __name__ == '__main__':
    main(sys.argv[1:])
