"""Rows of the table, from the raw results of each benchmark.

Each function takes what one benchmark wrote (or None when it did not
run, with the reason) and returns its rows (:class:`report.Row`).
"""

import collections

from benchmarks import report

P3_TARGET = 4
#: How far the plain boots of the two sides may differ for P2 to be judged.
CONTROL_TOLERANCE = 0.05


def _ms(seconds):
    return '-' if seconds is None else '%.0f ms' % (seconds * 1000)


def _calls(boots):
    """Median calls per boot; the most common breakdown and its share."""
    totals = [sum(calls.values()) for calls in boots]
    shapes = collections.Counter(
        ', '.join('%s x%d' % (name, n) if n > 1 else name
                  for name, n in sorted(calls.items())) for calls in boots)
    shape, count = shapes.most_common(1)[0]
    return report.median(totals), '%s (%d of %d)' % (shape, count,
                                                     len(boots))


def _cpu_added(side):
    """(Nova's process, other processes): median CPU ms of an accel boot
    less that of a plain one; None for results without CPU samples."""
    added = []
    for name in ('cpu.nova', 'cpu.other'):
        values = {kind: [p[name] for p in side.get(kind + '_phases', ())
                         if name in p] for kind in ('accel', 'plain')}
        if not (values['accel'] and values['plain']):
            return None
        added.append(report.median(values['accel']) -
                     report.median(values['plain']))
    return tuple(added)


def boots(ours, upstream, why=None):
    """P1, P2, P3."""
    rows = []
    if ours is None:
        rows.append(report.not_measured('P1 accel/plain boot', why,
                                        '<= 1.05'))
    else:
        acc, plain = ours['accel'], ours['plain']
        rows.append(report.Row(
            'P1 accel/plain boot, median (n=%d each)' % len(acc),
            _ms(report.median(acc)), 'plain %s' % _ms(report.median(plain)),
            report.ratio(report.median(acc), report.median(plain)),
            '<= 1.05', report.ratio(report.median(acc),
                                    report.median(plain)) <= 1.05))
        rows.append(report.Row(
            'P1 accel/plain boot, p95', _ms(report.p95(acc)),
            'plain %s' % _ms(report.p95(plain)),
            report.ratio(report.p95(acc), report.p95(plain)), '<= 1.05',
            report.ratio(report.p95(acc), report.p95(plain)) <= 1.05))
    if upstream is not None:
        up = report.ratio(report.median(upstream['accel']),
                          report.median(upstream['plain']))
        rows.append(report.Row(
            'P1 (info) upstream accel/plain boot, median',
            _ms(report.median(upstream['accel'])),
            'plain %s' % _ms(report.median(upstream['plain'])), up))
    if ours is None or upstream is None:
        rows.append(report.not_measured('P2 accel boot ours/upstream', why,
                                        '<= 0.85'))
        rows.append(report.not_measured('P3 Cyborg calls per boot', why,
                                        '= 4'))
        return rows
    control = report.ratio(report.median(ours['plain']),
                           report.median(upstream['plain']))
    drifted = abs(control - 1) > CONTROL_TOLERANCE
    for label, pick in (('median', report.median), ('p95', report.p95)):
        value = report.ratio(pick(ours['accel']), pick(upstream['accel']))
        rows.append(report.Row(
            'P2 accel boot ours/upstream, %s' % label,
            _ms(pick(ours['accel'])),
            'upstream %s' % _ms(pick(upstream['accel'])), value, '<= 0.85',
            None if drifted else value <= 0.85,
            note='P2: not judged, the plain boots of the two sides differ '
                 'by %.0f%% (the machine was busier for one side); rerun '
                 'on a quiet machine' % (abs(control - 1) * 100)
            if drifted and label == 'median' else ''))
    overhead = [report.median(side['accel']) - report.median(side['plain'])
                for side in (ours, upstream)]
    rows.append(report.Row(
        'P2 (info) accel - plain boot, ours/upstream', _ms(overhead[0]),
        'upstream %s' % _ms(overhead[1]),
        report.ratio(overhead[0], overhead[1]),
        note='P2 (info): what an accelerator adds to a boot on each side '
             '(median accel - median plain), insensitive to a drift of '
             'the machine between the two sides'))
    cpu = [_cpu_added(side) for side in (ours, upstream)]
    if None not in cpu:
        rows.append(report.Row(
            'P2 (info) CPU an accel boot adds, ours/upstream',
            '%.0f ms' % sum(cpu[0]), 'upstream %.0f ms' % sum(cpu[1]),
            report.ratio(sum(cpu[0]), sum(cpu[1])),
            note='P2 (info) CPU: median CPU time of an accel boot less '
                 'that of a plain one, on the whole machine; ours %.0f ms '
                 'in Nova\'s process (every Nova service and Placement, '
                 'one interpreter) and %.0f ms in the others (Cyborg, the '
                 'broker), upstream %.0f and %.0f (benchmarks/'
                 'boot_phases.py)' % (cpu[0] + cpu[1])))
    rows.append(report.Row(
        'P2 (control) plain boot ours/upstream, median',
        _ms(report.median(ours['plain'])),
        'upstream %s' % _ms(report.median(upstream['plain'])), control,
        '1.00 +- %.2f' % CONTROL_TOLERANCE, not drifted))
    ours_calls, ours_shape = _calls(ours['accel_calls'])
    up_calls, up_shape = _calls(upstream['accel_calls'])
    rows.append(report.Row(
        'P3 Cyborg REST calls per accel boot (median)', '%g' % ours_calls,
        'upstream %g' % up_calls, report.ratio(ours_calls, up_calls),
        '= %d' % P3_TARGET, ours_calls == P3_TARGET,
        note='P3 calls per boot, ours: %s; upstream: %s' % (
            ours_shape, up_shape)))
    deletes, shape = _calls(ours['delete_calls'])
    up_deletes, up_shape = _calls(upstream['delete_calls'])
    rows.append(report.Row(
        'P3 (info) Cyborg calls per delete', '%g' % deletes,
        'upstream %g' % up_deletes,
        note='P3 calls per delete, ours: %s; upstream: %s' % (
            shape, up_shape)))
    return rows


def storm(data, why=None):
    """P4."""
    target = 'all ACTIVE, 0 double'
    if data is None:
        return [report.not_measured('P4 storm of 50 accel boots', why,
                                    target)]
    accel, plain, double = data['accel'], data['plain'], data['double']
    where = data.get('where', 'local cloud')
    n_double = double['arq_vfs'] + double['hostdev_vfs'] + double[
        'over_allocated']
    total = data.get('servers', 50)
    rows = [
        report.Row('P4 storm (%s): ACTIVE of %d accel boots' % (
            where, total),
                   '%d ACTIVE, %d ERROR' % (accel['active'], accel['error']),
                   'plain: %d ACTIVE' % plain['active'],
                   report.ratio(accel['active'], total), target,
                   accel['active'] == total and n_double == 0),
        report.Row('P4 storm: double assignments',
                   '%d (ARQ VFs %d, hostdev VFs %d, over-allocated %d)' % (
                       n_double, double['arq_vfs'], double['hostdev_vfs'],
                       double['over_allocated']), '', None, '0',
                   n_double == 0),
        report.Row('P4 storm: wall time, accel/plain',
                   '%.1f s' % accel['wall_s'],
                   'plain %.1f s' % plain['wall_s'],
                   report.ratio(accel['wall_s'], plain['wall_s'])),
    ]
    if accel['faults']:
        rows[0].note = 'P4 faults: %s' % '; '.join(accel['faults'][:3])
    return rows


def steady(data, why=None):
    """P5."""
    if data is None:
        return [report.not_measured('P5 sidecar steady state', why, '0')]
    rows = []
    for what, key in (('report_data RPCs', 'report_data'),
                      ('Placement writes', 'placement_writes')):
        ours = report.median([c[key] for c in data['ours']])
        upstream = report.median([c[key] for c in data['upstream']])
        rows.append(report.Row(
            'P5 %s per idle cycle (n=%d)' % (what, len(data['ours'])),
            '%g' % ours, 'cyborg-agent %g' % upstream,
            report.ratio(ours, upstream) if upstream else None, '= 0',
            ours == 0))
    reads = [sum(c['placement_calls'].values()) - c['placement_writes']
             for c in data['upstream']]
    rows.append(report.Row(
        'P5 (info) Placement reads per idle cycle',
        '%g' % report.median([sum(c['placement_calls'].values()) -
                              c['placement_writes'] for c in data['ours']]),
        'cyborg-agent %g' % report.median(reads)))
    rows.append(report.Row(
        'P5 (info) seconds per idle cycle',
        _ms(report.median([c['seconds'] for c in data['ours']])),
        'cyborg-agent %s' % _ms(report.median(
            [c['seconds'] for c in data['upstream']]))))
    return rows


def discovery(results, why=None):
    """P6."""
    if results is None:
        return [report.not_measured('P6 sidecar discovery', why, '< 1 s')]
    rows = []
    for r in results:
        target = '< 1 s' if r['vfs'] == 1000 else ''
        rows.append(report.Row(
            'P6 discovery cycle, %d VFs (%d devices)' % (
                r['vfs'], r['devices']),
            _ms(r['cycle_s']), 'first %s, build %s' % (
                _ms(r['first_s']), _ms(r['build_s'])),
            report.ratio(r['cycle_s'], 1.0) if target else None, target,
            r['cycle_s'] < 1.0 if target else None))
        rows.append(report.Row(
            'P6 memory, %d VFs' % r['vfs'],
            'peak %d KiB (tracemalloc)' % r['peak_kib'],
            'RSS %d MiB (+%d MiB)' % (r['rss_kib'] // 1024,
                                      r['rss_delta_kib'] // 1024)))
    return rows


def cold_start(data, why=None):
    """P7."""
    if data is None:
        return [report.not_measured('P7 local cloud cold start', why)]
    note = ('P7 baselines are the runbook\'s measurement of a loopback '
            'cloud on SQLite (30-42 s, ~1.8 GB), not of this run')
    note = '%s; layout %s' % (note, data['layout'])
    return [report.Row('P7 local cloud cold start', '%.1f s' % data[
        'seconds'], 'runbook 36 s', report.ratio(data['seconds'], 36.0),
        note=note),
        report.Row('P7 local cloud total memory (RSS)', '%.0f MiB' % data[
            'rss_mib'], 'runbook 1800 MiB',
            report.ratio(data['rss_mib'], 1800.0))]


#: P8: every device of a herd of this many hosts schedulable within
#: HERD_TARGET_S (issue 20's herd test).
HERD_TARGET_HOSTS = 8
HERD_TARGET_S = 30.0
#: What cyborg-agent 17 costs an idle host: its periodic task sends the
#: full device list every 60 s (P5 measures 1 report_data per cycle).
AGENT_RPCS_PER_HOUR = 60


def idle_rpcs_per_hour(data):
    """P9 from a herd run: ``(per hour, how it was derived)``."""
    per_cycle = data['idle_rpcs'] / data['hosts'] / data['idle_cycles']
    cycles = 3600 / data['default_report_interval']
    resync = data['default_resync_interval']
    resyncs = 3600 / resync if resync else 0
    how = ('%d report_data RPCs from %d idle hosts over %d cycles of %d s '
           '(%.0f s watched, after %d RPCs in the %.0f s that followed '
           'convergence until a cycle without any) = %g per host per '
           'cycle; x %g cycles per hour '
           '(default report_interval %d s) + %g periodic re-reports per '
           'hour (default resync_interval %d s%s) = %g' % (
               data['idle_rpcs'], data['hosts'], data['idle_cycles'],
               data['cycle_s'], data['idle_window_s'],
               data['settle_rpcs'], data['settle_s'],
               per_cycle, cycles,
               data['default_report_interval'], resyncs, resync,
               ', off' if not resync else '', per_cycle * cycles + resyncs))
    return per_cycle * cycles + resyncs, how


def herd(runs):
    """P8, P9: ``runs`` is a list of ``(hosts, data, why)``."""
    rows = []
    for hosts, data, why in runs:
        target = ('<= %.0f s' % HERD_TARGET_S
                  if hosts == HERD_TARGET_HOSTS else '')
        if data is None:
            rows.append(report.not_measured(
                'P8 herd of %d hosts: start to all schedulable' % hosts,
                why, target))
            rows.append(report.not_measured(
                'P9 conductor RPCs per host per idle hour (%d hosts)'
                % hosts, why, '= 0'))
            continue
        rows.append(report.Row(
            'P8 herd of %d hosts (%d devices): start to all schedulable' % (
                hosts, data['devices']),
            '%.1f s' % data['all_s'], '1 host alone %.1f s' % data['solo_s'],
            report.ratio(data['all_s'], data['solo_s']), target,
            data['all_s'] <= HERD_TARGET_S if target else None,
            note='P8 (%d hosts): first host %.1f s, median %.1f s, last '
                 '%.1f s after the spawn of the sidecars (their %d '
                 'computes started before, in %.0f s); report_data RPCs '
                 'per host until converged: %s; devices cyborg-conductor '
                 'dropped meanwhile ("Failed to add device"): %s' % (
                     hosts, data['first_s'], data['median_s'],
                     data['all_s'], hosts, data['computes_s'],
                     _spread(data['reports_to_converge']),
                     _reasons(data['conductor_failures']))))
        unbindable = data.get('cyborg_unbindable', [])
        rows.append(report.Row(
            'P8 herd of %d hosts: devices Cyborg can bind, once converged'
            % hosts, '%d of %d' % (data['devices'] - len(unbindable),
                                   data['devices']),
            '', None, 'all', not unbindable,
            note='P8 (%d hosts): devices Placement offers but Cyborg '
                 'cannot bind (a boot scheduled there fails): %s' % (
                     hosts, '; '.join(unbindable[:4]) +
                     (' ...' if len(unbindable) > 4 else ''))
            if unbindable else ''))
        per_hour, how = idle_rpcs_per_hour(data)
        rows.append(report.Row(
            'P9 conductor RPCs per host per idle hour (%d hosts)' % hosts,
            '%g' % per_hour, 'cyborg-agent %d' % AGENT_RPCS_PER_HOUR,
            report.ratio(per_hour, AGENT_RPCS_PER_HOUR), '= 0',
            per_hour == 0,
            note='P9 (%d hosts): %s. cyborg-agent 17: one full report '
                 'per 60 s periodic task. Placement requests in the idle '
                 'window (all clients; %d sidecars with the lone host\'s): '
                 '%d (%d writes), %.2f per sidecar per cycle' % (
                     hosts, how, data['sidecars'],
                     data['idle_placement_calls'],
                     data['idle_placement_writes'],
                     data['idle_placement_calls'] / data['sidecars'] /
                     data['idle_cycles']) + _idle_detail(data)))
    return rows


def _spread(values):
    """'min-max (median m)' of a list of counts."""
    if not values:
        return '-'
    return '%d-%d (median %g)' % (min(values), max(values),
                                  report.median(values))


def _reasons(reasons):
    """'9 (database is locked x7, ...)' of ``{reason: count}``."""
    if not isinstance(reasons, dict):
        return '%s' % reasons
    if not reasons:
        return '0'
    return '%d (%s)' % (sum(reasons.values()), ', '.join(
        '%s x%d' % (reason or 'no reason given', n) for reason, n in
        sorted(reasons.items(), key=lambda item: -item[1])))


def _idle_detail(data):
    """Who reported or wrote while idle (their logs are in the raw
    results)."""
    text = ''
    if data.get('idle_reporters'):
        text += '; hosts that reported while idle: %s (their log tails: ' \
                'raw results, "idle_reporters")' % ', '.join(
                    sorted(data['idle_reporters']))
    if data.get('idle_placement_writes_by_call'):
        text += '; writes: %s' % ', '.join(
            '%s x%d' % item for item in sorted(
                data['idle_placement_writes_by_call'].items()))
    return text
