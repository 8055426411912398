"""``openstack server accelerator add|remove|list``.

Attach and detach the accelerators of a Cyborg device profile with
nova-cyborg's ``addAccelerator`` / ``removeAccelerator`` server actions,
and list a server's accelerator requests (ARQs); see
doc/source/attach.rst.
"""

import logging
import re

from cliff import columns
from openstack import exceptions as sdk_exc
from osc_lib.command import command
from osc_lib import exceptions

from nova_cyborg_client import sdk

LOG = logging.getLogger(__name__)

COLUMNS = (
    ('uuid', 'UUID'),
    ('state', 'State'),
    ('device_profile_name', 'Device Profile'),
    ('device_profile_group_id', 'Group'),
    ('hostname', 'Host'),
    ('device_rp_uuid', 'Device Provider'),
    ('attach_handle_type', 'Attach Handle Type'),
    ('attach_handle_info', 'Attach Handle'),
)
_PCI_KEYS = ('domain', 'bus', 'device', 'function')
_PCI_WIDTHS = (4, 2, 2, 1)
_DEFAULT_MESSAGE = re.compile(r'^(Error|\w+: (\d+|Unknown error))$')


def pci_address(info):
    """``dddd:bb:ss.f`` of a PCI attach handle, None if it is not one.

    Every part must be hexadecimal and fit its field.
    """
    if not isinstance(info, dict):
        return None
    try:
        parts = [int(str(info[key]), 16) for key in _PCI_KEYS]
    except (KeyError, TypeError, ValueError):
        return None
    if any(part < 0 or part >= 16 ** width
           for part, width in zip(parts, _PCI_WIDTHS)):
        return None
    return '%04x:%02x:%02x.%x' % tuple(parts)


class AttachHandleColumn(columns.FormattableColumn):
    """A PCI address in tables; Cyborg's attach handle info as is in
    JSON or YAML."""

    def human_readable(self):
        value = self._value
        if not value:
            return ''
        address = pci_address(value)
        if address:
            return address
        if isinstance(value, dict):
            return ', '.join('%s=%s' % item for item in sorted(value.items()))
        return str(value)

    def machine_readable(self):
        return self._value


def _row(arq):
    return tuple(AttachHandleColumn(arq.attach_handle_info)
                 if attr == 'attach_handle_info' else getattr(arq, attr)
                 for attr, _ in COLUMNS)


def _fail(what, error):
    """A CommandError naming what failed and why (Nova's message)."""
    if isinstance(error, sdk_exc.HttpException):
        parts = []
        # openstacksdk's own message is "<Class>: <status>" unless the
        # caller gave a better one.
        if error.message and not _DEFAULT_MESSAGE.match(error.message):
            parts.append(error.message)
        if error.details and error.details not in parts:
            parts.append(error.details)
        reason = ': '.join(parts) or str(error)
        if error.status_code:
            reason += ' (HTTP %s)' % error.status_code
        return exceptions.CommandError('%s: %s' % (what, reason))
    return exceptions.CommandError('%s: %s' % (what, error))


def _wait_arguments(parser, done):
    parser.add_argument(
        '--wait', action='store_true',
        help='Wait until the server\'s nova-compute is done and %s; fail '
             'if the action ends in error' % done)
    parser.add_argument(
        '--wait-timeout', metavar='<seconds>', type=int,
        default=sdk.DEFAULT_TIMEOUT,
        help='Seconds --wait lasts at most (default: %d)'
             % sdk.DEFAULT_TIMEOUT)


def _server(conn, name_or_id):
    try:
        return sdk.find_server(conn, name_or_id)
    except sdk_exc.SDKException as e:
        raise _fail('Cannot find server %s' % name_or_id, e)


class _AcceleratorAction(command.Command):
    """``openstack server accelerator add|remove``: run a server action
    on the accelerators named by the positional argument ``target``."""

    #: The positional argument: name, metavar, help.
    target = None
    #: What --wait waits for, after nova-compute is done.
    done = None
    #: The function of nova_cyborg_client.sdk that runs the action.
    action = None
    #: The error's start, with the target and the server.
    failure = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help='Server (name or ID)')
        name, metavar, help_text = self.target
        parser.add_argument(name, metavar=metavar, help=help_text)
        _wait_arguments(parser, self.done)
        return parser

    def take_action(self, parsed_args):
        conn = self.app.client_manager.nova_cyborg
        target = getattr(parsed_args, self.target[0])
        what = self.failure % (target, parsed_args.server)
        server = _server(conn, parsed_args.server)
        try:
            getattr(sdk, self.action)(conn, server, target,
                                      wait=parsed_args.wait,
                                      timeout=parsed_args.wait_timeout)
        except sdk_exc.SDKException as e:
            raise _fail(what, e)


class AddServerAccelerator(_AcceleratorAction):
    _description = ('Attach the accelerators of a Cyborg device profile to '
                    'a server (ACTIVE without accelerators, or SHUTOFF)')
    target = ('device_profile', '<device-profile>',
              'Cyborg device profile (name)')
    done = 'its accelerator requests are Bound'
    action = 'add_accelerator'
    failure = 'Cannot add the accelerators of device profile %s to server %s'


class RemoveServerAccelerator(_AcceleratorAction):
    _description = ('Detach the accelerators of a device profile from a '
                    'server. Nova detaches by device profile: given the '
                    'UUID of one of its accelerator requests, every '
                    'accelerator of that profile is detached')
    target = ('accelerator', '<device-profile|arq-uuid>',
              'Device profile attached to the server, or the UUID of one of '
              'its accelerator requests (see "openstack server accelerator '
              'list")')
    done = 'its accelerator requests are gone'
    action = 'remove_accelerator'
    failure = 'Cannot remove accelerator %s from server %s'


class ListServerAccelerator(command.Lister):
    _description = ('List the accelerator requests of a server (those of '
                    'its flavor and those attached): state, device '
                    'profile, host, device provider and attach handle')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help='Server (name or ID)')
        return parser

    def take_action(self, parsed_args):
        conn = self.app.client_manager.nova_cyborg
        server = _server(conn, parsed_args.server)
        try:
            arqs = sdk.list_accelerators(conn, server)
        except sdk_exc.SDKException as e:
            raise _fail('Cannot list the accelerators of server %s'
                        % parsed_args.server, e)
        return ([header for _, header in COLUMNS],
                [_row(arq) for arq in arqs])
