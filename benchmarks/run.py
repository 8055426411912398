"""Run every benchmark once, print the table, write the results.

``tox -e bench`` runs ``python -m benchmarks``. Order: the boots against
patched Nova (P1, P3), then against unpatched Nova (P2, P3; this
environment's Nova is reverted with ``nova-cyborg-patch revert`` and
patched again afterwards, whatever happens), the sidecar's steady state
(P5), the local cloud's cold start (P7) and a storm against it (P4),
discovery (P6), one cycle on a dense host (P10), addAccelerator and
removeAccelerator (P11) and live migrations (P12). Each
harness benchmark runs in its own process (``python -m testtools.run
benchmarks.<module>``) and writes JSON; its log goes to
``benchmarks/results/logs/``. A benchmark that fails becomes a "not
measured" row that points at its log; the others still run. Then the
herd (P8, P9): one run per size of ``--herd-hosts``.

Benchmarks named on the command line (``herd``, ``boots``, ``steady``,
``cloud``, ``discovery``, ``dense``, ``attach``, ``migration``, or figures
such as ``P5``) run alone;
their table goes to ``benchmarks/results/<names>.{json,md}`` instead of
``latest``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import action_figures
from benchmarks import cloud
from benchmarks import dense_host
from benchmarks import discovery
from benchmarks import figures
from benchmarks import report

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG_DIR = os.path.join(report.RESULTS_DIR, 'logs')
PATCH_TOOL = os.path.join(os.path.dirname(sys.executable),
                          'nova-cyborg-patch')
#: Rounds of boots per side (P1-P3).
ROUNDS = 2
#: The figures of each benchmark, for selecting them by name.
GROUPS = {'boots': ('P1', 'P2', 'P3'), 'cloud': ('P4', 'P7'),
          'steady': ('P5',), 'discovery': ('P6',), 'herd': ('P8', 'P9'),
          'dense': ('P10',), 'attach': ('P11',), 'migration': ('P12',)}
FIGURES = frozenset(f for figures_ in GROUPS.values() for f in figures_)


def _out(text=''):
    sys.stdout.write(text + '\n')
    sys.stdout.flush()


def nova_patched():
    out = subprocess.run([PATCH_TOOL, 'status'], capture_output=True,
                         text=True, check=True).stdout
    return 'Series state: applied' in out


def set_patched(patched):
    """Apply or revert the patch series in this environment's Nova."""
    if nova_patched() != patched:
        subprocess.run([PATCH_TOOL, 'apply' if patched else 'revert'],
                       check=True, stdout=subprocess.DEVNULL)


def harness_bench(module, patched=True, env=None, suffix=''):
    """Run one harness benchmark; ``(data, None)`` or ``(None, why)``."""
    name = '%s-%s%s' % (module, 'patched' if patched else 'upstream',
                        suffix)
    log_path = os.path.join(LOG_DIR, name + '.log')
    fd, out_path = tempfile.mkstemp(suffix='.json')
    os.close(fd)
    full_env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
                    OS_TEST_TIMEOUT='1800',
                    PYTHONWARNINGS='ignore::DeprecationWarning',
                    NOVA_CYBORG_BENCH_OUT=out_path,
                    NOVA_CYBORG_BENCH_PATCHED='1' if patched else '0',
                    **(env or {}))
    start = time.monotonic()
    try:
        with open(log_path, 'w') as log:
            proc = subprocess.run(
                [sys.executable, '-m', 'testtools.run',
                 'benchmarks.' + module], cwd=REPO_ROOT, env=full_env,
                stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        with open(out_path) as f:
            text = f.read()
        if proc.returncode or not text:
            return None, '%s failed (exit %s), see %s' % (
                name, proc.returncode, os.path.relpath(log_path, REPO_ROOT))
        return json.loads(text), None
    finally:
        os.unlink(out_path)
        _out('  %s: %.0f s' % (name, time.monotonic() - start))


def merge(results):
    """Boot results of several rounds as one: their lists joined."""
    merged = {}
    for data in results:
        for key, value in data.items():
            if isinstance(value, list):
                merged.setdefault(key, []).extend(value)
    return merged


def boots(count, rounds=ROUNDS):
    """P1-P3: ``count`` boots of each kind, ours and upstream's, in
    alternating rounds (ours, upstream, ours, ...) so that a drift of the
    machine weighs on both alike. Returns two ``(data, why)``."""
    per_round = {'NOVA_CYBORG_BENCH_BOOTS': str(-(-count // rounds))}
    results = {True: [], False: []}
    try:
        for n in range(rounds):
            for patched in (True, False):
                set_patched(patched)
                data, why = harness_bench('boots', patched, per_round,
                                          suffix='-%d' % (n + 1))
                if data is None:
                    return (None, why), (None, why)
                results[patched].append(data)
    finally:
        set_patched(True)
    return (merge(results[True]), None), (merge(results[False]), None)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='python -m benchmarks',
                                     description=__doc__.splitlines()[0])
    parser.add_argument('--boots', type=int, default=30,
                        help='boots of each kind and side for P1-P3 '
                             '(default 30)')
    parser.add_argument('--skip', default='',
                        help='comma-separated figures not to run, e.g. '
                             'P4,P7')
    parser.add_argument('--herd-hosts', default='8,32',
                        help='comma-separated herd sizes for P8 and P9 '
                             '(default 8,32)')
    parser.add_argument('--attach-rounds', type=int, default=20,
                        help='measured rounds of P11 (each: 3 boots, 4 '
                             'actions; default 20)')
    parser.add_argument('--migration-rounds', type=int, default=15,
                        help='measured live migrations of each server of '
                             'P12, per device kind (default 15)')
    parser.add_argument('only', nargs='*', metavar='BENCHMARK',
                        help='run only these: %s, or figures (P1-P12)' % (
                            ', '.join(sorted(GROUPS))))
    return parser.parse_args(argv)


def selected_skip(args):
    """The figures not to run: ``--skip``, and all but those named."""
    skip = {s.strip().upper() for s in args.skip.split(',') if s.strip()}
    if args.only:
        chosen = set()
        for name in args.only:
            if name.lower() in GROUPS:
                chosen.update(GROUPS[name.lower()])
            elif name.upper() in FIGURES:
                chosen.add(name.upper())
            else:
                raise SystemExit('unknown benchmark %r (known: %s, P1-P12)'
                                 % (name, ', '.join(sorted(GROUPS))))
        skip |= FIGURES - chosen
    return skip


def herd(sizes):
    """P8, P9: one herd run per size; ``[(hosts, data, why)]``."""
    runs = []
    for hosts in sizes:
        data, why = harness_bench(
            'herd', env={'NOVA_CYBORG_BENCH_HOSTS': str(hosts)},
            suffix='-%d' % hosts)
        runs.append((hosts, data, why))
    return runs


def actions(skip, attach_rounds, migration_rounds):
    """P11 and P12, each benchmark in its own process; their rows."""
    rows, raw = [], {}
    if 'P11' in skip:
        rows += action_figures.attach_rows(None, 'skipped (--skip)')
    else:
        data, why = harness_bench('attach', env={
            'NOVA_CYBORG_BENCH_ROUNDS': str(attach_rounds)})
        raw['attach'] = data
        rows += action_figures.attach_rows(data, why)
    for kind in ('VF', 'VGPU'):
        if 'P12' in skip:
            rows += action_figures.migration_rows(None, 'skipped (--skip)')
            break
        data, why = harness_bench(
            'live_migration.%sMigrationBench' % kind, env={
                'NOVA_CYBORG_BENCH_ROUNDS': str(migration_rounds)})
        raw['migration_' + kind.lower()] = data
        rows += action_figures.migration_rows(data, why)
    return rows, raw


def main(argv=None):
    args = parse_args(argv)
    skip = selected_skip(args)
    herd_sizes = [int(n) for n in args.herd_hosts.split(',') if n.strip()]
    skipped = (None, 'skipped (--skip)')
    started = time.monotonic()
    os.makedirs(LOG_DIR, exist_ok=True)
    raw = {'load_average': {'start': os.getloadavg()}}
    set_patched(True)  # the local cloud and the sidecar runs want it too
    _out('Benchmarks (logs in %s):' % os.path.relpath(LOG_DIR, REPO_ROOT))
    ours = upstream = skipped
    if not {'P1', 'P2', 'P3'} <= skip:
        ours, upstream = boots(args.boots)
    raw['boots'], raw['boots_upstream'] = ours[0], upstream[0]
    steady = skipped if 'P5' in skip else harness_bench('steady')
    raw['steady'] = steady[0]
    storm = cold = skipped
    if not {'P4', 'P7'} <= skip:
        start = time.monotonic()
        cold, storm = cloud.run(LOG_DIR, storm='P4' not in skip)
        if 'P7' in skip:
            cold = skipped
        _out('  local cloud: %.0f s' % (time.monotonic() - start))
    raw['storm'], raw['cold_start'] = storm[0], cold[0]
    disc = skipped
    if 'P6' not in skip:
        start = time.monotonic()
        disc = (discovery.run_all(log_path=os.path.join(
            LOG_DIR, 'discovery.log')), None)
        _out('  discovery: %.0f s' % (time.monotonic() - start))
    raw['discovery'] = disc[0]
    dense = skipped
    if 'P10' not in skip:
        start = time.monotonic()
        log_path = os.path.join(LOG_DIR, 'dense.log')
        try:
            dense = (dense_host.run_child(log_path), None)
        except (subprocess.CalledProcessError, ValueError) as exc:
            dense = (None, 'failed (%s), see %s' % (
                exc, os.path.relpath(log_path, REPO_ROOT)))
        _out('  dense host: %.0f s' % (time.monotonic() - start))
    raw['dense'] = dense[0]
    herds = [(n, None, 'skipped (--skip)') for n in herd_sizes]
    if not {'P8', 'P9'} <= skip:
        start = time.monotonic()
        herds = herd(herd_sizes)
        _out('  herd: %.0f s' % (time.monotonic() - start))
    raw['herd'] = {str(n): data for n, data, _why in herds}
    action_rows, action_raw = actions(skip, args.attach_rounds,
                                      args.migration_rounds)
    raw.update(action_raw)

    rows = figures.boots(ours[0], upstream[0], ours[1] or upstream[1])
    rows += figures.storm(*storm)
    rows += figures.steady(*steady)
    rows += figures.discovery(*disc)
    rows += dense_host.rows(*dense)
    rows += figures.cold_start(*cold)
    rows += figures.herd(herds)
    rows += action_rows
    if args.only:
        # Only what was asked for, in a table of its own.
        rows = [r for r in rows if r.figure.split()[0] not in skip]
    name = '-'.join(n.lower() for n in args.only) or 'latest'
    seconds = time.monotonic() - started
    raw['load_average']['end'] = os.getloadavg()
    report.write(rows, raw, seconds, name=name)
    _out()
    _out(report.text_table(rows))
    _out()
    targets = [r for r in rows
               if r.met is not None and '(control)' not in r.figure]
    _out('Targets met: %d of %d. Whole bench: %.0f s. Written: %s, %s' % (
        sum(1 for r in targets if r.met), len(targets),
        seconds, os.path.relpath(os.path.join(report.RESULTS_DIR,
                                              name + '.json'), REPO_ROOT),
        os.path.relpath(os.path.join(report.RESULTS_DIR, name + '.md'),
                        REPO_ROOT)))
    return 0
