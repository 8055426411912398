"""Stand-in for XRT's ``xrt-smi program``, for a simulated Alveo card.

The command line is XRT's (``src/runtime_src/doc/toc/xrt-smi.rst``,
XRT 2025.2)::

    xrt-smi program [--device|-d] <user bdf> [--user|-u] <xclbin>

with one option of the stand-in's own before the command,
``--sysfs-root <dir>`` (default ``/sys``): the simulated tree
(:mod:`sidecar_simulator.xrt`). It checks what XRT checks before it
loads an xclbin: the device is a user PF (``xocl``'s ``user_pf``) whose
mailbox to ``xclmgmt`` is ``ready``; the file is an ``xclbin2`` of its
own length (``xclbin.h``); its ``m_interface_uuid`` is one of the
shell's ``interface_uuids`` (``xocl/userpf/xocl_ioctl.c``: "interface
uuids do not match"). Then the user PF's ``xclbinuuid`` becomes the
xclbin's UUID, as on a card, and a line ``<time> <bdf> <uuid>`` is
appended to ``<sysfs root>/../programmed.log`` for tests.
"""

import argparse
import os
import sys
import time

from sidecar import model
from sidecar.sources import xrt


class Failed(Exception):
    pass


def _parser():
    parser = argparse.ArgumentParser(prog='xrt-smi', add_help=True)
    parser.add_argument('--sysfs-root', default='/sys')
    parser.add_argument('--verbose', action='store_true')
    parser.add_argument('--batch', action='store_true')
    parser.add_argument('--force', action='store_true')
    commands = parser.add_subparsers(dest='command', required=True)
    program = commands.add_parser('program')
    program.add_argument('-d', '--device')
    program.add_argument('-u', '--user', required=True)
    return parser


def _bdf(value, root):
    devices = os.path.join(root, 'bus', 'pci', 'devices')
    if value is None:
        users = [n for n in sorted(os.listdir(devices))
                 if os.path.exists(os.path.join(devices, n, 'user_pf'))]
        if len(users) != 1:
            raise Failed('%d devices found: --device is required'
                         % len(users))
        return users[0]
    value = value.lower()
    if value.count(':') == 1:
        value = '0000:' + value
    try:
        model.parse_bdf(value)
    except ValueError:
        raise Failed('%r is not a BDF' % value)
    return value


def program(root, device, path):
    address = _bdf(device, root)
    card_dir = os.path.join(root, 'bus', 'pci', 'devices', address)
    if not os.path.isdir(card_dir):
        raise Failed('no device %s' % address)
    card = xrt.XrtCard(user=address, mgmt='', path=card_dir,
                       driver=xrt.USER_DRIVER)
    if card.read('user_pf') is None:
        raise Failed('%s is not a user PF (bound to xocl)' % address)
    try:
        ready = int(card.read('ready') or '0', 16)
    except ValueError:
        ready = 0
    if not ready:
        raise Failed('%s is not ready: no mailbox to its management PF'
                     % address)
    try:
        xclbin = xrt.read_xclbin(path)
    except OSError as exc:
        raise Failed('cannot read %s: %s' % (path, exc.strerror))
    except xrt.XclbinError as exc:
        raise Failed('%s is not a valid xclbin: %s' % (path, exc))
    if xclbin.uuid is None:
        raise Failed('%s carries no xclbin UUID' % path)
    shells = card.interface_uuids()
    if xclbin.interface_uuid not in shells:
        raise Failed('interface uuids do not match: the xclbin is built '
                     'for %s (%s), the shell of %s is %s'
                     % (xclbin.interface_uuid, xclbin.platform_vbnv,
                        address, ', '.join(shells) or 'unknown'))
    with open(os.path.join(card_dir, 'xclbinuuid'), 'w') as f:
        f.write(xrt.format_uuid(xclbin.uuid) + '\n')
    log = os.path.join(os.path.dirname(os.path.abspath(root)),
                       'programmed.log')
    with open(log, 'a') as f:
        f.write('%f %s %s\n' % (time.time(), address, xclbin.uuid))
    return address


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        address = program(args.sysfs_root, args.device, args.user)
    except Failed as exc:
        sys.stderr.write('ERROR: %s\n' % exc)
        return 1
    sys.stdout.write('INFO: %s programmed with %s\n' % (address, args.user))
    return 0


if __name__ == '__main__':
    sys.exit(main())
