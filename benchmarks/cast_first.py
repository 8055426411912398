"""What casting a build before its bind answers wins: joined against cast
first, in one run.

``python -m benchmarks.cast_first [--boots N]`` (in the bench environment)
runs the boots benchmark (benchmarks.boots) on the patched side only, in
rounds that alternate the boot path where the conductor joins Cyborg's
bind before it casts the build (``NOVA_CYBORG_BENCH_CAST_FIRST=0``, as for
a compute without capability 1.2) with the path where it casts first and
the compute waits for the conductor's word on the bind
(nova_cyborg.flows.boot.early_arqs), so that a drift of the machine weighs
on both alike. It writes ``results/cast_first.md`` and ``.json``: per
setting, the boots' medians, what an accelerator adds to a boot, where
the time goes (benchmarks.boot_phases) and the CPU the accelerator adds.
"""

import argparse
import json
import os
import sys

from benchmarks import report
from benchmarks import run

SETTINGS = (('joined', '0'), ('cast first', '1'))
PHASES = ('conductor.arqs', 'conductor.build', 'cyborg.bind',
          'compute.arq_wait', 'compute.build', 'api.events')


def _median_phase(phases, name):
    return report.median([p.get(name, 0.0) for p in phases])


def rows(results):
    """Markdown table lines for ``{setting: merged boots data}``."""
    head = ['accel', 'plain', 'accel - plain', 'accel p95']
    head += PHASES
    head += ['CPU added: Nova process', 'CPU added: other processes']
    lines = ['| | %s |' % ' | '.join(head),
             '|---|%s' % ('---|' * len(head))]
    for label, _flag in SETTINGS:
        data = results[label]
        acc = report.median(data['accel']) * 1000
        plain = report.median(data['plain']) * 1000
        cells = ['%.0f' % acc, '%.0f' % plain, '%.0f' % (acc - plain),
                 '%.0f' % (report.p95(data['accel']) * 1000)]
        cells += ['%.0f' % _median_phase(data['accel_phases'], name)
                  for name in PHASES]
        for cpu in ('cpu.nova', 'cpu.other'):
            cells.append('%.0f' % (
                _median_phase(data['accel_phases'], cpu) -
                _median_phase(data['plain_phases'], cpu)))
        lines.append('| %s | %s |' % (label, ' | '.join(cells)))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m benchmarks.cast_first')
    parser.add_argument('--boots', type=int, default=24,
                        help='boots of each kind per setting (default 24)')
    parser.add_argument('--rounds', type=int, default=2)
    args = parser.parse_args(argv)
    os.makedirs(run.LOG_DIR, exist_ok=True)
    run.set_patched(True)
    per_round = str(-(-args.boots // args.rounds))
    results = {label: [] for label, _flag in SETTINGS}
    load = {'start': os.getloadavg()}
    for n in range(args.rounds):
        for label, flag in SETTINGS:
            data, why = run.harness_bench(
                'boots', True, {'NOVA_CYBORG_BENCH_BOOTS': per_round,
                                'NOVA_CYBORG_BENCH_CAST_FIRST': flag},
                suffix='-cast%s-%d' % (flag, n + 1))
            if data is None:
                sys.exit(why)
            results[label].append(data)
    load['end'] = os.getloadavg()
    merged = {label: run.merge(datas) for label, datas in results.items()}
    base = os.path.join(report.RESULTS_DIR, 'cast_first')
    with open(base + '.json', 'w') as f:
        json.dump({'load_average': load, 'raw': merged}, f, indent=1,
                  sort_keys=True)
    text = ['# Joined or cast first: the build and Cyborg\'s bind',
            '',
            '`python -m benchmarks.cast_first --boots %d` (patched side, '
            '%d rounds alternating the settings); load average at the '
            'start %s, at the end %s. Medians in ms; phases and CPU are '
            'those of the accel boots (benchmarks/boot_phases.py); "CPU '
            'added" is the median CPU of an accel boot less that of a '
            'plain one.' % (args.boots, args.rounds,
                            ', '.join('%.2f' % v for v in load['start']),
                            ', '.join('%.2f' % v for v in load['end'])),
            '']
    text += rows(merged)
    with open(base + '.md', 'w') as f:
        f.write('\n'.join(text) + '\n')
    print('\n'.join(text))


if __name__ == '__main__':
    main()
