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

"""Print the size of a Nova patch series: per patch and in total.

Usage: tools/series-size.py [patches/nova-34.0.0]

Columns: lines of the patch file, hunks, added and removed lines, and
function-level imports of nova_cyborg (an added "from nova_cyborg" or
"import nova_cyborg" line that is indented).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nova_cyborg_patch import series as _series  # noqa: E402


def measure(series_dir):
    rows = []
    for patch in _series.load_series(series_dir):
        with open(os.path.join(series_dir, patch.name)) as f:
            size = len(f.read().splitlines())
        hunks = added = removed = nested = 0
        for fp in patch.files:
            for hunk in fp.hunks:
                hunks += 1
                for tag, text in hunk.lines:
                    added += tag == '+'
                    removed += tag == '-'
                    body = text.lstrip()
                    nested += (tag == '+' and text != body and (
                        body.startswith('from nova_cyborg') or
                        body.startswith('import nova_cyborg')))
        rows.append((patch.name, size, hunks, added, removed, nested))
    return rows


def main(argv):
    series_dir = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(HERE), 'patches', 'nova-34.0.0')
    rows = measure(series_dir)
    fmt = '%-50s %6s %6s %6s %6s %8s'
    print(fmt % ('patch', 'lines', 'hunks', 'added', 'remov', 'fn-imp'))
    for row in rows:
        print(fmt % row)
    totals = [sum(r[i] for r in rows) for i in range(1, 6)]
    print(fmt % tuple(['TOTAL: %d patches' % len(rows)] + totals))
    print('largest patch: %d lines' % max(r[1] for r in rows))


if __name__ == '__main__':
    main(sys.argv)
