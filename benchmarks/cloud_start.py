"""Where the local cloud's start time and memory go (issue 17).

``python -m benchmarks.cloud_start [--runs N] [--no-cache-run]`` (the
``cloud-bench`` tox env) starts the local cloud of ``localcloud/`` N
times, each in a fresh state directory with ``up --keep --no-demo`` and
the layout of ``tools/cloud`` (2 hosts, 1 PF, 4 VFs), and stops it again.
For each run it reads ``<state>/startup.json`` (when ``up`` started each
service and when it was ready) and measures the resident memory of each
service's processes (RSS, and PSS: shared pages counted once) while the
cloud runs idle. It prints a table per service and the medians against
the targets (start <= 60 s, total RSS <= 1536 MiB), and writes them into
the "Local cloud start" section of ``benchmarks/results/latest.md``
(the other sections are kept) and ``results/cloud_start.json``.

The first run is made without the schema cache (a temporary, empty
``NOVA_CYBORG_CLOUD_CACHE``: every schema from the services' own tools,
as on a new machine) unless ``--no-cache-run`` is given; the others use
the cache of this machine (``~/.cache/nova-cyborg/localcloud``), filled
by the first of them if it is empty.

Ports come from ``NOVA_CYBORG_CLOUD_PORT_BASE`` (default 26000), so that
it can run beside another cloud.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

from localcloud import layout as layout_mod
from localcloud import procs

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO_ROOT, 'benchmarks', 'results')
TARGET_SECONDS = 60.0
TARGET_MIB = 1536.0
BEGIN = '<!-- cloud-start: benchmarks/cloud_start.py writes this section -->'
END = '<!-- /cloud-start -->'
TIMEOUT = 900


def _localcloud(state_dir, env, *args):
    return subprocess.run(
        [sys.executable, '-m', 'localcloud', '--dir', state_dir] +
        list(args), cwd=REPO_ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)


def _memory(layout):
    """``({service: (processes, RSS MiB, PSS MiB, shared with)},
    (total RSS MiB, total PSS MiB))``: a process that runs several
    services is counted once, under the first of them."""
    result, owner, total = {}, {}, [0, 0]
    # A process's own service first: the others' logs link to its log.
    for name, pids in sorted(procs.running(layout).items(), key=lambda i: (
            os.path.islink(procs.log_path(layout, i[0])), i[0])):
        key = tuple(sorted(pids))
        if key in owner:
            result[name] = (len(pids), 0, 0, owner[key])
            continue
        owner[key] = name
        rss = pss = 0
        for pid in pids:
            try:
                info = psutil.Process(pid).memory_full_info()
            except psutil.Error:
                continue
            rss += info.rss
            pss += getattr(info, 'pss', info.rss)
        result[name] = (len(pids), rss / 2 ** 20, pss / 2 ** 20, None)
        total[0] += rss / 2 ** 20
        total[1] += pss / 2 ** 20
    return result, tuple(total)


def one_run(cache_dir=None):
    """One start; ``{'seconds', 'services', 'memory', 'load', ...}``."""
    state_dir = tempfile.mkdtemp(prefix='cloud-start-')
    env = dict(os.environ)
    env.setdefault('NOVA_CYBORG_CLOUD_PORT_BASE', '26000')
    if cache_dir:
        env['NOVA_CYBORG_CLOUD_CACHE'] = cache_dir
    load = os.getloadavg()[0]
    started = time.monotonic()
    try:
        proc = _localcloud(state_dir, env, 'up', '--keep', '--no-demo')
        wall = time.monotonic() - started
        try:
            with open(os.path.join(state_dir, 'startup.json')) as f:
                startup = json.load(f)
        except (OSError, ValueError):
            startup = None
        if proc.returncode or not startup:
            raise RuntimeError('"localcloud up" failed:\n%s' % proc.stdout)
        layout = layout_mod.Layout.load(state_dir)
        memory, totals = _memory(layout)
    finally:
        down = _localcloud(state_dir, env, 'down')
        if down.returncode:
            sys.stderr.write(down.stdout)
    return {'seconds': startup['seconds'], 'wall': round(wall, 1),
            'services': startup['services'], 'memory': memory,
            'total_mib': totals,
            'cached': 'schemas restored' in proc.stdout,
            'load': round(load, 2), 'output': proc.stdout}


def _median(values):
    return statistics.median(values) if values else float('nan')


def _rows(runs):
    """Per service: median start->ready seconds, ready at, RSS, PSS."""
    names = []
    for run in runs:
        for name in list(run['services']) + list(run['memory']):
            if name not in names:
                names.append(name)
    rows = []
    for name in names:
        took, at, rss, pss, count = [], [], [], [], []
        for run in runs:
            times = run['services'].get(name, {})
            if 'ready' in times:
                at.append(times['ready'])
                if 'started' in times:
                    took.append(times['ready'] - times['started'])
            shared = None
            if name in run['memory']:
                n, r, p, shared = run['memory'][name]
                count.append(n)
                rss.append(r)
                pss.append(p)
        if shared:
            rss = pss = []
        rows.append((name, _median(took) if took else None,
                     _median(at) if at else None,
                     ('in %s\'s' % shared) if shared else
                     (max(count) if count else 0),
                     _median(rss) if rss else None,
                     _median(pss) if pss else None))
    return rows


def _cell(value, fmt):
    return '-' if value is None else fmt % value


#: A 1-minute load average above this at a start: the machine was busy.
BUSY_LOAD = 2.0


def markdown(runs):
    warm = [r for r in runs if r['cached']]
    cold = [r for r in runs if not r['cached']]
    lines = [BEGIN, '## Local cloud start (issue 17)', '',
             '`python -m benchmarks.cloud_start` (tox env `cloud-bench`) '
             'on %d CPUs, %s UTC: `up --keep --no-demo`, 2 hosts, 1 PF, '
             '4 VFs each, %d runs; the load average (1 min) at each start '
             'was %s%s.' % (
                 os.cpu_count(), time.strftime('%Y-%m-%d %H:%M',
                                               time.gmtime()),
                 len(runs), ', '.join('%.1f' % r['load'] for r in runs),
                 ' (other work ran beside it)' if max(
                     r['load'] for r in runs) > BUSY_LOAD else ''),
             '']
    total_rss = [r['total_mib'][0] for r in runs]
    total_pss = [r['total_mib'][1] for r in runs]
    warm_s = _median([r['seconds'] for r in warm])
    lines += ['| Figure | Measured (median) | Runs | Target | Ratio | Met |',
              '|---|---|---|---|---|---|']
    if warm:
        lines.append('| P7 start, schemas from the cache | %.1f s | %s | '
                     '<= 60 s | %.2f | %s |' % (
                         warm_s, ', '.join('%.1f' % r['seconds']
                                           for r in warm),
                         warm_s / TARGET_SECONDS,
                         'yes' if warm_s <= TARGET_SECONDS else 'NO'))
    if cold:
        lines.append('| P7 start, no cache (new machine) | %.1f s | %s | '
                     '(info) | %.2f | - |' % (
                         _median([r['seconds'] for r in cold]),
                         ', '.join('%.1f' % r['seconds'] for r in cold),
                         _median([r['seconds'] for r in cold]) /
                         TARGET_SECONDS))
    rss = _median(total_rss)
    lines.append('| P7 total memory, RSS of every process | %.0f MiB | %s | '
                 '<= 1536 MiB | %.2f | %s |' % (
                     rss, ', '.join('%.0f' % v for v in total_rss),
                     rss / TARGET_MIB, 'yes' if rss <= TARGET_MIB else 'NO'))
    lines.append('| P7 (info) total memory, PSS (shared pages once) | '
                 '%.0f MiB | %s |  |  | - |' % (
                     _median(total_pss),
                     ', '.join('%.0f' % v for v in total_pss)))
    lines += ['', 'Per service (medians of the runs%s): seconds from its '
              'start to ready, when it was ready since `up` began, its '
              'processes and memory. `*-db` are the schema steps, '
              '`catalog` the service users and endpoints.' % (
                  ' with the cache' if warm else ''), '',
              '| Service | Start to ready | Ready at | Processes | RSS MiB '
              '| PSS MiB |', '|---|---|---|---|---|---|']
    for name, took, at, count, rss_, pss_ in _rows(warm or runs):
        lines.append('| %s | %s | %s | %s | %s | %s |' % (
            name, _cell(took, '%.1f s'), _cell(at, '%.1f s'),
            count or '-', _cell(rss_, '%.0f'), _cell(pss_, '%.0f')))
    return lines


def write(lines, runs):
    path = os.path.join(RESULTS, 'latest.md')
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = ''
    section = '\n'.join(lines + [END]) + '\n'
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1].lstrip('\n')
    else:
        text = text.rstrip('\n') + '\n\n' + section
    with open(path, 'w') as f:
        f.write(text)
    with open(os.path.join(RESULTS, 'cloud_start.json'), 'w') as f:
        json.dump([{k: v for k, v in r.items() if k != 'output'}
                   for r in runs], f, indent=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=3,
                        help='starts with the cache (default %(default)s)')
    parser.add_argument('--no-cache-run', action='store_true',
                        help='skip the first start without the cache')
    parser.add_argument('--no-write', action='store_true',
                        help='print only; leave results/ alone')
    args = parser.parse_args(argv)
    cold, runs = [], []
    if not args.no_cache_run:
        with tempfile.TemporaryDirectory(prefix='cloud-cache-') as empty:
            run = one_run(cache_dir=empty)
        print('no cache: %.1f s (load %.1f)' % (
            run['seconds'], run['load']), flush=True)
        cold.append(run)
    for i in range(args.runs):
        run = one_run()
        print('run %d: %.1f s%s (load %.1f)' % (
            i + 1, run['seconds'], ', cache' if run['cached'] else '',
            run['load']), flush=True)
        runs.append(run)
    lines = markdown(cold + runs)
    print('\n'.join(lines))
    if not args.no_write:
        write(lines, cold + runs)
    return 0


if __name__ == '__main__':
    sys.exit(main())
