"""nova-cyborg-sweep-arqs: delete the ARQs of servers that are gone.

Run in one place (an operator, or a cron job on one controller) with
Nova's configuration: it reads every cell's database through Nova's API
database and calls Cyborg as the ``[cyborg]`` service user. See
:mod:`nova_cyborg.flows.cleanup.sweep` for what it touches.

    nova-cyborg-sweep-arqs [--since SECONDS] [--batch N] \\
        [--config-file /etc/nova/nova.conf ...]

Prints a JSON summary; exits 1 if Cyborg could not answer for some server
(a later run tries again), else 0.
"""

import argparse
import json
import sys

from nova import config
from nova import objects
from nova import rpc
from oslo_log import log as logging

from nova_cyborg import conf as nc_conf
from nova_cyborg.flows.cleanup import sweep

#: One week of deleted servers by default.
DEFAULT_SINCE = 7 * 24 * 3600


def _positive(value):
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError('must be at least 1')
    return number


def main(argv=None):
    argv = sys.argv if argv is None else argv
    parser = argparse.ArgumentParser(
        prog='nova-cyborg-sweep-arqs',
        description='Delete the accelerator requests of servers of this '
                    'Nova that were deleted in the last SECONDS but whose '
                    'accelerator requests are still in Cyborg.')
    parser.add_argument('--since', type=_positive, default=DEFAULT_SINCE,
                        metavar='SECONDS',
                        help='look at servers deleted in the last SECONDS '
                             '(default: %(default)s)')
    parser.add_argument('--batch', type=_positive, default=sweep.BATCH,
                        help='deleted servers read from a cell database '
                             'at a time (default: %(default)s)')
    args, rest = parser.parse_known_args(argv[1:])
    # With RPC, as nova-manage: reading the cell mappings formats their
    # transport URL with [DEFAULT] transport_url, an option that only
    # oslo.messaging registers (rpc.init). No message is sent: the
    # transport connects on first use.
    config.parse_args([argv[0]] + rest)
    logging.setup(nc_conf.CONF, 'nova')
    objects.register_all()
    try:
        result = sweep.sweep(args.since, args.batch)
    finally:
        rpc.cleanup()
    print(json.dumps(result, sort_keys=True))
    return 1 if result['failed'] else 0
