"""P11 and P12: statistics and rows of the server action benchmarks.

No harness here (stdlib and :mod:`benchmarks.report` only), so that the
arithmetic is unit tested alone. :mod:`benchmarks.attach` (P11,
``addAccelerator``/``removeAccelerator``) and
:mod:`benchmarks.live_migration` (P12) write the raw data these
functions read; the figures are issue 42's "P10" and "P11" (P10 was
taken by the dense host).
"""

from benchmarks import report

#: libvirt's VIR_DOMAIN_JOB_COMPLETED.
JOB_COMPLETED = 3


def ms(seconds):
    return '-' if seconds is None else '%.0f ms' % (seconds * 1000)


def summary(values):
    """``(n, median, p95)`` of a list of seconds (nearest-rank p95)."""
    return len(values), report.median(values), report.p95(values)


def job_downtime(stats):
    """The guest's downtime, in seconds, of one migration as libvirt
    reported it to Nova, or None when libvirt did not report one.

    ``stats``: the job statistics Nova's libvirt driver read during the
    migration (``virDomainGetJobStats`` dicts, oldest first). libvirt
    gives ``downtime`` (ms) in the statistics of the completed job; Nova's
    ``JobInfo`` reads a missing field as 0, which would be a made-up
    figure: here a missing field is None.
    """
    for job in reversed(stats):
        if job.get('type') == JOB_COMPLETED and 'downtime' in job:
            return job['downtime'] / 1000.0
    return None


def differences(values, baselines):
    """``median(values) - median(baselines)``, or None."""
    if not values or not baselines:
        return None
    return report.median(values) - report.median(baselines)


def phase_medians(phases):
    """``[(phase, median ms, in how many)]`` of a list of ``{phase:
    ms}`` (one per action), the longest first; a phase absent from an
    action counts 0 there."""
    names = {name for one in phases for name in one}
    medians = [(name, report.median([one.get(name, 0) for one in phases]),
                sum(1 for one in phases if name in one)) for name in names]
    return sorted(medians, key=lambda m: (-m[1], m[0]))


def _pair(figure, values, baseline, baseline_label, note=''):
    """A median row and a p95 row, each as a ratio to ``baseline``."""
    n, med, p95 = summary(values)
    return [
        report.Row('%s, median (n=%d)' % (figure, n), ms(med),
                   '%s %s' % (baseline_label, ms(baseline)),
                   report.ratio(med, baseline), note=note),
        report.Row('%s, p95' % figure, ms(p95),
                   '%s %s' % (baseline_label, ms(baseline)),
                   report.ratio(p95, baseline)),
    ]


ATTACH_KINDS = (
    # (action key, device kind of its boot, label)
    ('add fpga running', 'fpga', 'addAccelerator FPGA VF, running server'),
    ('remove fpga running', 'fpga',
     'removeAccelerator FPGA VF, running server'),
    ('add vgpu stopped', 'vgpu',
     'addAccelerator vGPU (mdev), stopped server'),
    ('remove vgpu stopped', 'vgpu',
     'removeAccelerator vGPU (mdev), stopped server'),
)


def attach_rows(data, why=None):
    """P11: each action against what the same device adds to a boot."""
    if data is None:
        return [report.not_measured('P11 addAccelerator', why)]
    rows = []
    boot = data['boot']
    for key, kind, label in ATTACH_KINDS:
        if not data['actions'].get(key):
            continue
        added = differences(boot[kind], boot['plain'])
        note = ''
        if key == 'add fpga running':
            note = ('P11: from the POST of the server action to the end of '
                    "nova-compute's handler (the task state cleared, the "
                    "instance action's event recorded); baseline: the "
                    'median boot with the same device minus the median '
                    'plain boot of the same run (what the device adds to '
                    'a boot: its bind, the wait for it, the domain '
                    'hostdev). The p95 rows divide by the same median.')
        elif key == 'add vgpu stopped':
            note = ('P11: a mediated device is not plugged into a running '
                    'guest (refused, by design: '
                    'nova_cyborg.flows.attach.compute); the '
                    'figure is the attach to a stopped server, which '
                    'binds the ARQ (the sidecar creates the mdev) and '
                    'records it; the guest gets it at its next start.')
        rows += _pair('P11 %s' % label, data['actions'][key], added,
                      '%s boot - plain' % kind, note)
    for key, _kind, label in ATTACH_KINDS:
        phases = data.get('action_phases', {}).get(key)
        if not phases:
            continue
        rows.append(report.Row(
            'P11 (info) where %s goes' % label, 'see note',
            note='P11 %s, median ms per phase (n=%d): %s. "api and cast": '
                 "POST to nova-compute's handler starting; \"handler\": "
                 'the handler, which holds the others (Cyborg and '
                 'Placement calls, bind_and_wait: the bind and the wait '
                 'for its event, libvirt: the hot plug or the '
                 'definition); phases overlap, they do not add up.' % (
                     label, len(phases), ', '.join(
                         '%s %.0f' % (name, ms_) for name, ms_, _n in
                         phase_medians(phases)))))
    for key, kind, label in ATTACH_KINDS[::2]:
        inside = data['action_bind'].get(key)
        at_boot = data['boot_bind'].get(kind)
        if not inside or not at_boot:
            continue
        rows.append(report.Row(
            'P11 (info) Cyborg bind (PATCH) in %s, median' % label,
            ms(report.median(inside)),
            'in a boot %s' % ms(report.median(at_boot)),
            report.ratio(report.median(inside), report.median(at_boot))))
    return rows


def migration_rows(data, why=None):
    """P12: one device kind's live migrations against a plain server's,
    same hosts, same run."""
    if data is None:
        return [report.not_measured('P12 live migration', why)]
    kind, dev, plain = data['kind'], data['device'], data['plain']
    rows = _pair('P12 live migration, %s server, total' % kind,
                 dev['total'], report.median(plain['total']),
                 'plain server',
                 note='P12 total: from the POST of os-migrateLive to the '
                      'later of the source\'s _post_live_migration and '
                      'the destination\'s post_live_migration_at_'
                      'destination ending (the server ACTIVE on the '
                      'destination, the migration completed).')
    downtimes = [d for d in dev['downtime'] if d is not None]
    if downtimes:
        rows += _pair('P12 guest downtime (libvirt), %s server' % kind,
                      downtimes, report.median(
                          [d for d in plain['downtime'] if d is not None]),
                      'plain server')
    else:
        rows.append(report.not_measured(
            'P12 guest downtime (libvirt), %s server' % kind,
            'P12 guest downtime: not reported. The bench runs on Nova\'s '
            'fakelibvirt, whose jobStats() holds only the job type: no '
            '"downtime" field in any of the %d migrations (Nova\'s '
            'JobInfo would read the missing field as 0, which is not a '
            'measurement). No guest runs, so none is paused.'
            % len(dev['downtime'])))
    rows += _pair('P12 switch-over (Nova\'s view), %s server' % kind,
                  dev['switch'], report.median(plain['switch']),
                  'plain server',
                  note='P12 switch-over: from the return of libvirt\'s '
                       'migrateToURI3 on the source to the end of the '
                       'destination\'s post_live_migration_at_'
                       'destination: Nova\'s monitor seeing the job end '
                       '(it polls every 0.5 s), the source\'s post-'
                       'migration (ports, devices released) and the '
                       'destination recording the server. Not guest '
                       'downtime: on a real host the guest already runs '
                       'on the destination when migrateToURI3 returns.')
    return rows
