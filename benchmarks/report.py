"""The figures of a run: statistics, rows with ratios, the table files.

A row is one figure: what was measured, its baseline (measured in the
same run) or target, the ratio between them, and whether the target is
met. A figure that could not be measured is a row saying why, never a
number.
"""

import dataclasses
import json
import math
import os
import platform
import statistics
import time
from typing import Optional

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'results')
HEADERS = ('Figure', 'Measured', 'Baseline', 'Ratio', 'Target', 'Met')


def median(values):
    return statistics.median(values) if values else None


def p95(values):
    """The nearest-rank 95th percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def ratio(value, baseline):
    if value is None or not baseline:
        return None
    return value / baseline


@dataclasses.dataclass
class Row:
    figure: str
    measured: str
    baseline: str = ''
    ratio: Optional[float] = None
    target: str = ''
    met: Optional[bool] = None
    #: Shown below the table (what was counted, why not measured).
    note: str = ''

    def cells(self, note_mark=''):
        met = {True: 'yes', False: 'NO', None: '-'}[self.met]
        return (self.figure, self.measured + note_mark, self.baseline,
                '' if self.ratio is None else '%.2f' % self.ratio,
                self.target, met)


def not_measured(figure, reason, target=''):
    return Row(figure, 'not measured', target=target, note=reason)


def _cells_and_notes(rows):
    cells, notes = [], []
    for row in rows:
        mark = ''
        if row.note:
            notes.append(row.note)
            mark = ' [%d]' % len(notes)
        cells.append(row.cells(mark))
    return cells, notes


def text_table(rows):
    cells, notes = _cells_and_notes(rows)
    cells = [HEADERS] + cells
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]
    lines = []
    for n, line in enumerate(cells):
        lines.append('  '.join(c.ljust(w) for c, w in zip(line, widths))
                     .rstrip())
        if n == 0:
            lines.append('  '.join('-' * w for w in widths))
    lines += [''] + ['[%d] %s' % (n, note)
                     for n, note in enumerate(notes, 1)]
    return '\n'.join(lines)


def markdown_table(rows):
    def esc(text):
        return text.replace('|', '\\|')
    cells, notes = _cells_and_notes(rows)
    lines = ['| ' + ' | '.join(HEADERS) + ' |',
             '|' + '---|' * len(HEADERS)]
    for line in cells:
        lines.append('| ' + ' | '.join(esc(c) for c in line) + ' |')
    lines += [''] + ['[%d] %s  ' % (n, esc(note))
                     for n, note in enumerate(notes, 1)]
    return '\n'.join(lines)


def machine():
    return {'python': platform.python_version(),
            'platform': platform.platform(), 'cpus': os.cpu_count(),
            'date': time.strftime('%Y-%m-%d %H:%M:%S %Z')}


def write(rows, raw, seconds, results_dir=RESULTS_DIR, name='latest'):
    """Write <name>.json (rows and raw data) and <name>.md."""
    os.makedirs(results_dir, exist_ok=True)
    info = dict(machine(), bench_seconds=round(seconds, 1))
    with open(os.path.join(results_dir, name + '.json'), 'w') as f:
        json.dump({'machine': info,
                   'rows': [dataclasses.asdict(r) for r in rows],
                   'raw': raw}, f, indent=1, sort_keys=True)
        f.write('\n')
    with open(os.path.join(results_dir, name + '.md'), 'w') as f:
        f.write('# Benchmarks: %s run\n\n' % name)
        command = 'tox -e bench' + (
            '' if name == 'latest' else ' -- ' + name.replace('-', ' '))
        f.write('`%(command)s` on %(cpus)s CPUs, Python %(python)s, '
                '%(platform)s, %(date)s; the whole run took '
                '%(bench_seconds).0f s. Ratios are to a baseline measured '
                'in the same run (or to the target). See '
                '[README.rst](../README.rst) for what each figure means '
                'and how it is measured.\n\n' % dict(info, command=command))
        load = raw.get('load_average') if isinstance(raw, dict) else None
        if load and 'end' in load:
            f.write('Load average (1, 5, 15 min) at the start: %s; at the '
                    'end: %s.\n\n' % tuple(
                        ', '.join('%.2f' % v for v in load[k])
                        for k in ('start', 'end')))
        f.write(markdown_table(rows) + '\n')
