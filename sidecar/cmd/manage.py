"""``nova-cyborg-sidecar-manage``: the host CLI of the sidecar.

It talks to the running daemon through its control socket
(:mod:`sidecar.daemon.control`, under ``[sidecar] state_path``), so it never races
the daemon: the daemon applies a change, writes Placement, and the CLI
prints what the daemon read back. Run it as the daemon's user (root), with
the daemon's configuration::

    nova-cyborg-sidecar-manage --config-file /etc/nova-cyborg/nova-cyborg-sidecar.conf \\
        device list -f json
    nova-cyborg-sidecar-manage device disable 0000:81:00.0 --reason 'fan'
    nova-cyborg-sidecar-manage device enable 0000:81:00.0
    nova-cyborg-sidecar-manage device program 0000:81:00.0 <image uuid>
    nova-cyborg-sidecar-manage device clear-errors 0000:81:00.0
    nova-cyborg-sidecar-manage journal show

Two commands need no daemon and change nothing on the host:
``discover`` (:mod:`sidecar.cmd.discover`) prints what this host would
report and why each other PCI function is left out; ``capture``
(:mod:`sidecar.cmd.capture`) writes the sysfs the sidecar reads into an
archive to attach to a bug report::

    nova-cyborg-sidecar-manage --config-file ... discover [-f json]
    nova-cyborg-sidecar-manage --config-file ... capture --output host.tar.gz

Exit status: 0 done, 1 refused by the daemon (the message says why), 2 the
daemon cannot be reached (or, for ``discover`` and ``capture``, the
configuration or the host cannot be read).
"""  # noqa: E501

import json
import sys

from oslo_config import cfg

from sidecar import conf as sidecar_conf
from sidecar import exception
from sidecar.cmd import capture
from sidecar.cmd import discover
from sidecar.daemon import control

FORMATS = ('table', 'json')


def _add_format(parser):
    parser.add_argument('-f', '--format', choices=FORMATS, default='table',
                        help='Output format.')


def _add_commands(subparsers):
    device = subparsers.add_parser('device', help='Devices of this host.')
    dsub = device.add_subparsers(dest='action')
    dsub.required = True
    p = dsub.add_parser('list', help='Devices and their state.')
    _add_format(p)
    for action, text in (('enable', 'Offer the device for scheduling.'),
                         ('disable', 'Hold the device out of scheduling '
                                     '(its providers fully reserved).')):
        p = dsub.add_parser(action, help=text)
        p.add_argument('device', help='PCI address or deployable name.')
        if action == 'disable':
            p.add_argument('--reason', default=None,
                           help='Why; shown by device list.')
        _add_format(p)
    p = dsub.add_parser('program', help='Program an FPGA region with a '
                        'Glance bitstream image (refused while a server '
                        'holds it).')
    p.add_argument('device', help='PCI address or deployable name.')
    p.add_argument('image', help='Glance image UUID.')
    _add_format(p)
    p = dsub.add_parser(
        'clear-errors', help='Clear the error registers of a DFL FPGA '
        'card and of its ports (each value read is written back, as the '
        'kernel\'s ABI asks); its health hold lifts once it reads '
        'healthy.')
    p.add_argument('device', help='PCI address or deployable name.')
    _add_format(p)
    journal = subparsers.add_parser('journal', help='Programming journal.')
    jsub = journal.add_subparsers(dest='action')
    jsub.required = True
    p = jsub.add_parser('show', help='Jobs started and not finished.')
    _add_format(p)
    p = subparsers.add_parser(
        'discover', help='Run discovery once without the daemon, '
        'read-only: what this host would report, and why each other PCI '
        'function is left out.')
    _add_format(p)
    p = subparsers.add_parser(
        'capture', help='Write the sysfs files the sidecar reads (serial '
        'numbers and MAC addresses scrubbed) into a tar.gz archive for a '
        'bug report.')
    p.add_argument('-o', '--output', default=capture.DEFAULT_OUTPUT,
                   help='Archive to write (default: %(default)s); refused '
                        'if it exists.')


CATEGORY = cfg.SubCommandOpt('category', title='Commands',
                             handler=_add_commands)


def _request(conf):
    cat = conf.category
    if cat.name == 'journal':
        return {'op': 'journal'}
    if cat.action == 'list':
        return {'op': 'list'}
    request = {'op': cat.action, 'device': cat.device}
    if cat.action == 'disable':
        request['reason'] = cat.reason
    if cat.action == 'program':
        request['image'] = cat.image
    return request


def _cell(value):
    if isinstance(value, dict):
        return ', '.join('%s=%s' % (k, _cell(v)) if v not in ('', None)
                         else str(k) for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple)):
        return ', '.join(_cell(v) for v in value)
    return '' if value is None else str(value)


def _reservation(value):
    parts = []
    for name, inv in sorted((value or {}).items()):
        if 'error' in inv:
            parts.append('%s: %s' % (name, inv['error']))
        else:
            parts.append('%s/%s' % (inv.get('reserved'), inv.get('total')))
    return ', '.join(parts)


DEVICE_COLUMNS = ('device', 'type', 'enabled', 'health', 'held',
                  'functions', 'in_use_by', 'conflicts', 'reservation')
JOURNAL_COLUMNS = ('device', 'image', 'trait', 'started', 'reserved')


def table(rows, columns):
    cells = [[_reservation(r.get(c)) if c == 'reservation' else
              _cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells])
              for i, c in enumerate(columns)]
    line = '+' + '+'.join('-' * (w + 2) for w in widths) + '+'
    out = [line, '| ' + ' | '.join(c.ljust(w) for c, w in
                                   zip(columns, widths)) + ' |', line]
    for row in cells:
        out.append('| ' + ' | '.join(v.ljust(w) for v, w in
                                     zip(row, widths)) + ' |')
    out.append(line)
    return '\n'.join(out)


DISCOVER_COLUMNS = ('device', 'type', 'driver', 'provider',
                    'resource_class', 'amount', 'traits', 'attach_handles',
                    'health')
SKIPPED_COLUMNS = ('device', 'vendor:product', 'class', 'bound_driver',
                   'why not reported')


def _handle_text(handle):
    text = '%s %s' % (handle['type'], handle['address'])
    if handle.get('mdev_type'):
        text += ' %s' % handle['mdev_type']
    if handle.get('managed'):
        text += ' managed=%s' % handle['managed']
    if handle.get('physical_network'):
        text += ' physnet=%s' % handle['physical_network']
    if handle['count'] > 1:
        text += ' x%d' % handle['count']
    return text


def _health_text(health):
    text = '; '.join([health['state']] + health['problems'])
    if health.get('aer_fatal'):
        text += ' (AER fatal counts: %s)' % _cell(health['aer_fatal'])
    return text


def render_discover(result, fmt):
    if fmt == 'json':
        return json.dumps(result, indent=2, sort_keys=True)
    rows = []
    for device in result['devices']:
        for dep in device['deployables']:
            rows.append({
                'device': device['address'], 'type': device['type'],
                'driver': device['driver'], 'provider': dep['provider'],
                'resource_class': dep['resource_class'],
                'amount': dep['amount'], 'traits': dep['traits'],
                'attach_handles': [_handle_text(h)
                                   for h in dep['attach_handles']],
                'health': _health_text(device['health'])})
    skipped = [{'device': s['address'],
                'vendor:product': '%s:%s' % (s['vendor_id'],
                                             s['product_id']),
                'class': s['class_id'], 'bound_driver': s['bound_driver'],
                'why not reported': ' | '.join(s['reasons'])}
               for s in result['not_reported']]
    out = ['Host %s, drivers %s, sysfs %s' % (
        result['host'], ', '.join(result['drivers']) or '(none)',
        result['sysfs_root']),
        'Would report %d device(s):' % len(result['devices']),
        table(rows, DISCOVER_COLUMNS),
        'Not reported: %d PCI function(s):' % len(skipped),
        table(skipped, SKIPPED_COLUMNS)]
    if result['notes']:
        out.append('Notes:')
        out.extend('- ' + note for note in result['notes'])
    return '\n'.join(out)


def _local(conf, stdout, stderr):
    """``discover`` and ``capture``: no daemon, nothing changed."""
    try:
        if conf.category.name == 'discover':
            text = render_discover(discover.discover(conf),
                                   conf.category.format)
        else:
            text = capture.capture(conf, conf.category.output)
    except (OSError, ValueError, exception.SidecarError) as exc:
        stderr.write('%s failed: %s\n' % (conf.category.name, exc))
        return 2
    stdout.write(text + '\n')
    return 0


def render(result, fmt, journal=False):
    if fmt == 'json':
        return json.dumps(result, indent=2, sort_keys=True)
    rows = result if isinstance(result, list) else [result]
    columns = JOURNAL_COLUMNS if journal else DEVICE_COLUMNS
    if 'cleared' in rows[0] if rows else False:
        columns += ('cleared',)
    return table(rows, columns)


def main(argv=None, stdout=None, stderr=None):
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    conf = cfg.ConfigOpts()
    sidecar_conf.register_opts(conf)
    conf.register_cli_opt(CATEGORY)
    conf(sys.argv[1:] if argv is None else argv, project='nova-cyborg',
         prog='nova-cyborg-sidecar-manage')
    if conf.category.name in ('discover', 'capture'):
        return _local(conf, stdout, stderr)
    path = control.socket_path(conf.sidecar.state_path)
    request = _request(conf)
    try:
        answer = control.call(path, request)
    except (OSError, ValueError) as exc:
        stderr.write('Cannot reach nova-cyborg-sidecar at %s: %s (is the '
                     'daemon running, and this command run as its user '
                     'with its --config-file?)\n' % (path, exc))
        return 2
    if not answer.get('ok'):
        stderr.write('Refused: %s\n' % answer.get('error'))
        return 1
    stdout.write(render(answer['result'], conf.category.format,
                        journal=request['op'] == 'journal') + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
