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
    nova-cyborg-sidecar-manage journal show

Exit status: 0 done, 1 refused by the daemon (the message says why), 2 the
daemon cannot be reached.
"""  # noqa: E501

import json
import sys

from oslo_config import cfg

from sidecar import conf as sidecar_conf
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
    journal = subparsers.add_parser('journal', help='Programming journal.')
    jsub = journal.add_subparsers(dest='action')
    jsub.required = True
    p = jsub.add_parser('show', help='Jobs started and not finished.')
    _add_format(p)


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


def render(result, fmt, journal=False):
    if fmt == 'json':
        return json.dumps(result, indent=2, sort_keys=True)
    rows = result if isinstance(result, list) else [result]
    return table(rows, JOURNAL_COLUMNS if journal else DEVICE_COLUMNS)


def main(argv=None, stdout=None, stderr=None):
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    conf = cfg.ConfigOpts()
    sidecar_conf.register_opts(conf)
    conf.register_cli_opt(CATEGORY)
    conf(sys.argv[1:] if argv is None else argv, project='nova-cyborg',
         prog='nova-cyborg-sidecar-manage')
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
