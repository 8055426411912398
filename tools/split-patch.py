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

"""Split a one-file patch of the series into several, by hunk.

Usage:
  tools/split-patch.py SOURCE.patch OUTDIR NAME=HEADER=START[,START...] ...
      [--check NOVA_DIR]

Each NAME=HEADER=STARTS makes OUTDIR/NAME from the hunks of SOURCE whose
old-side start line is in STARTS, with the text of the file HEADER as
its header. The new patches apply in the order given, each on the text the
ones before it left (as nova-cyborg-patch applies a series): their hunk
line numbers are recomputed for that. Every hunk of SOURCE must be in
exactly one new patch. With --check, the new patches are applied in turn
to the file in NOVA_DIR (pristine) and the result compared with SOURCE
applied at once.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nova_cyborg_patch import unidiff as _unidiff  # noqa: E402


def split(fp, groups):
    """[(name, [hunks])] from groups [(name, [old starts])], in order."""
    by_start = dict((h.old_start, h) for h in fp.hunks)
    order = dict((h.old_start, i) for i, h in enumerate(fp.hunks))
    seen = [s for _name, starts in groups for s in starts]
    missing = sorted(set(by_start) - set(seen))
    unknown = sorted(set(seen) - set(by_start))
    if missing or unknown or len(seen) != len(set(seen)):
        raise SystemExit('hunks not used: %s; unknown: %s; each once: %s'
                         % (missing, unknown, len(seen) == len(set(seen))))
    done = []  # hunks of the patches made so far
    result = []
    for name, starts in groups:
        hunks = []
        mine = sorted((by_start[s] for s in starts),
                      key=lambda h: order[h.old_start])
        for hunk in mine:
            before = sum(h.new_len - h.old_len for h in done
                         if order[h.old_start] < order[hunk.old_start])
            inside = sum(h.new_len - h.old_len for h in mine
                         if order[h.old_start] < order[hunk.old_start])
            new = _unidiff.Hunk(hunk.old_start + before, hunk.old_len,
                                hunk.old_start + before + inside,
                                hunk.new_len)
            new.lines = list(hunk.lines)
            hunks.append(new)
        done.extend(mine)
        result.append((name, hunks))
    return result


def _header(hunk):
    def span(start, length):
        return '%d' % start if length == 1 else '%d,%d' % (start, length)
    return '@@ -%s +%s @@\n' % (span(hunk.old_start, hunk.old_len),
                                span(hunk.new_start, hunk.new_len))


def render(header, fp, hunks):
    text = header.rstrip('\n') + '\n\n'
    text += '--- %s\n+++ %s\n' % (fp.old_path, fp.new_path)
    for hunk in hunks:
        text += _header(hunk)
        for tag, body in hunk.lines:
            text += tag + body
            if not body.endswith('\n'):
                text += '\n\\ No newline at end of file\n'
    return text


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('source')
    parser.add_argument('outdir')
    parser.add_argument('parts', nargs='+')
    parser.add_argument('--check', metavar='NOVA_DIR')
    args = parser.parse_args(argv)
    with open(args.source) as f:
        files = _unidiff.parse(f.read(), args.source)
    if len(files) != 1:
        raise SystemExit('%s changes %d files; split one-file patches'
                         % (args.source, len(files)))
    fp = files[0]
    groups, headers = [], {}
    for part in args.parts:
        name, header, starts = part.split('=')
        groups.append((name, [int(s) for s in starts.split(',')]))
        with open(header) as f:
            headers[name] = f.read()
    texts = []
    for name, hunks in split(fp, groups):
        text = render(headers[name], fp, hunks)
        with open(os.path.join(args.outdir, name), 'w') as f:
            f.write(text)
        texts.append(text)
        print('%s: %d hunks, %d lines' % (name, len(hunks),
                                          len(text.splitlines())))
    if args.check:
        with open(os.path.join(args.check, fp.target())) as f:
            pristine = _unidiff.split_lines(f.read())
        lines = pristine
        for text in texts:
            (part,) = _unidiff.parse(text)
            lines = _unidiff.apply_hunks(lines, part)
        if lines != _unidiff.apply_hunks(pristine, fp):
            raise SystemExit('the parts do not add up to %s' % args.source)
        print('checked: the parts applied in turn equal %s' % args.source)


if __name__ == '__main__':
    main(sys.argv[1:])
