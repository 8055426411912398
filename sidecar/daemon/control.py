"""The daemon's control socket, which ``nova-cyborg-sidecar-manage`` talks to.

A unix stream socket ``<state_path>/control.sock``, mode 0600 in the 0700
state directory: only the daemon's user (root) can use it. One request per
connection, one JSON object per line each way. The daemon applies each
change itself, runs a discovery cycle (which writes Placement), and answers
with what it reads back, so the CLI never writes the daemon's state
behind its back and answers only once the change is in effect.

Requests (``op``): ``list``; ``enable`` / ``disable`` (``device``,
``reason``); ``program`` (``device``, ``image``); ``journal``;
``clear-errors`` (``device``: a DFL card's errors cleared,
:func:`sidecar.drivers.dfl_health.clear_errors`, or a GPU's NVML faults
forgotten, :meth:`sidecar.discovery.nvml_health.NvmlHealth.clear`).
Answers:
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}``.
"""

import json
import os
import socket
import socketserver
import threading

from oslo_log import log as logging
from oslo_utils import uuidutils

from sidecar import exception
from sidecar import model
from sidecar.discovery import health as health_mod
from sidecar.drivers import dfl_health
from sidecar.report import reporter as report

LOG = logging.getLogger(__name__)

SOCKET = 'control.sock'
#: The largest request read, in bytes.
MAX_REQUEST = 64 * 1024


def socket_path(state_path):
    return os.path.join(state_path, SOCKET)


class Control:
    """What each request does, on a running
    :class:`sidecar.daemon.service.Sidecar`.
    """

    def __init__(self, sidecar):
        self._sidecar = sidecar

    # -- helpers ---------------------------------------------------------

    def _device(self, key):
        if not isinstance(key, str):
            raise exception.InvalidArgument(name='device',
                                            reason='not a string')
        inventory = self._sidecar.inventory
        for device in inventory.devices():
            names = {report.deployable_name(self._sidecar.conf.host, d)
                     for d in device.deployables}
            names |= {d.name for d in device.deployables}
            if key == device.address or key in names:
                return device
        try:
            model.parse_bdf(key)
        except ValueError:
            raise exception.InvalidArgument(
                name='device', reason='%r is neither a PCI address '
                '(dddd:bb:ss.f) nor a deployable name of this host' % key)
        raise exception.UnknownDevice(kind='such', address=key)

    def _reservations(self, device):
        """``{deployable name: {total, reserved}}`` from Placement, or
        the error when it cannot be read."""
        placement = self._sidecar.placement
        result = {}
        for dep in device.deployables:
            name = report.deployable_name(self._sidecar.conf.host, dep)
            try:
                rp = placement.find_provider(name)
                if rp is None:
                    result[name] = {'error': 'no provider in Placement'}
                    continue
                inventories, _traits = placement.read_provider(rp)
            except exception.SidecarError as exc:
                result[name] = {'error': str(exc)}
                continue
            inv = inventories.get(dep.resource_class) or {}
            result[name] = {'total': inv.get('total'),
                            'reserved': inv.get('reserved', 0)}
        return result

    def _describe(self, device, in_use):
        holds = self._sidecar.holds
        reasons = holds.reasons(device.address) if holds else {}
        # A deployable's own hold (a DFL port's error): its provider only.
        own = {dep.name: holds.reasons(health_mod.deployable_key(
            device.address, dep.name)) for dep in device.deployables
            if holds and health_mod.deployable_key(
                device.address, dep.name) != device.address}
        functions = device.functions()
        watch = self._sidecar.watch
        conflicts = sorted(f.text() for f in (watch.findings() if watch
                                              else ())
                           if f.card == device.address)
        return {
            'device': device.address,
            'type': device.type,
            'vendor': device.vendor,
            'model': device.model,
            'enabled': not any(r in reasons for r in ('disabled', 'new')),
            'health': ('ok' if 'unhealthy' not in reasons else 'unknown'
                       if health_mod.is_unknown(reasons['unhealthy'])
                       else 'unhealthy'),
            'held': dict(reasons, **{
                '%s %s' % (name, reason): detail
                for name, held in sorted(own.items())
                for reason, detail in held.items()}),
            'functions': sorted(
                t for dep in device.deployables for t in dep.traits
                if t.startswith('CUSTOM_FPGA_FUNCTION_ID')),
            'in_use_by': sorted({dom for key, dom, card in in_use
                                 if key in functions or
                                 card == device.address}),
            'conflicts': conflicts,
            'programming': bool(self._sidecar.programs.busy_with(
                device.address)),
            'reservation': self._reservations(device),
        }

    def _in_use(self):
        """``[(pci address or mdev uuid, domain, device it belongs to or
        None)]``; with the guest watch, each domain is named with its
        server."""
        watch = self._sidecar.watch
        try:
            if watch is None:
                return [(key, name, None) for key, name in
                        self._sidecar.programs.domains_in_use().items()]
            users = watch.users()
        except Exception as exc:
            LOG.warning('Cannot list the domains using devices: %s', exc)
            return []
        cards = watch.cards(self._sidecar.inventory.devices(), users)
        return [(key, str(g), cards.get(key)) for key, guests in
                users.items() for g in guests]

    def _apply(self, device):
        """Run a cycle (it writes Placement) and describe the device."""
        self._sidecar.run_cycle()
        return self._describe(device, self._in_use())

    # -- requests --------------------------------------------------------

    def list(self, request):
        in_use = self._in_use()
        return [self._describe(d, in_use) for d in
                sorted(self._sidecar.inventory.devices(),
                       key=lambda d: d.address)]

    def enable(self, request):
        device = self._device(request.get('device'))
        self._sidecar.holds.enable(device.address)
        LOG.info('Device %s enabled by an operator', device.address)
        return self._apply(device)

    def disable(self, request):
        device = self._device(request.get('device'))
        reason = request.get('reason') or 'disabled by an operator'
        if not isinstance(reason, str) or len(reason) > 255:
            raise exception.InvalidArgument(
                name='reason', reason='not a string of 255 characters '
                'at most')
        self._sidecar.holds.disable(device.address, reason)
        return self._apply(device)

    def program(self, request):
        device = self._device(request.get('device'))
        image = request.get('image')
        if not isinstance(image, str) or not uuidutils.is_uuid_like(image):
            raise exception.InvalidArgument(name='image',
                                            reason='not a Glance image UUID')
        if device.type != 'FPGA':
            raise exception.InvalidArgument(
                name='device', reason='%s is a %s, not an FPGA' % (
                    device.address, device.type))
        # A region of a card with several is programmed alone.
        key = request.get('device')
        target = next((d.name for d in device.deployables
                       if len(device.deployables) > 1 and key in (
                           d.name, report.deployable_name(
                               self._sidecar.conf.host, d))),
                      device.address)
        domain, bus, slot, function = model.parse_bdf(target)
        drivers = sorted({d.driver_name for d in device.deployables
                          if d.driver_name})
        if len(drivers) != 1:
            raise exception.InvalidArgument(
                name='device', reason='it has no single driver name')
        LOG.info('Programming %(dev)s with image %(image)s for an operator',
                 {'dev': target, 'image': image})
        self._sidecar.programs.fpga_program(
            {'cpid_type': 'PCI', 'cpid_info': {
                'domain': domain, 'bus': bus, 'device': slot,
                'function': function}}, image, drivers[0])
        self._sidecar.report_now()
        return self._apply(self._sidecar.inventory.device(device.address) or
                           device)

    def clear_errors(self, request):
        device = self._device(request.get('device'))
        nvml = getattr(self._sidecar.inventory, 'nvml', None)
        if device.type == 'GPU' and nvml is not None:
            # NVML's XID and ECC faults, after the GPU was reset.
            cleared = nvml.clear(device.functions())
        elif device.type != 'FPGA':
            raise exception.InvalidArgument(
                name='device', reason='%s is a %s: only a DFL FPGA card\'s '
                'or an NVML-watched GPU\'s errors are cleared' % (
                    device.address, device.type))
        else:
            try:
                cleared = dfl_health.clear_errors(
                    self._sidecar.conf.sidecar.sysfs_root, device)
            except OSError as exc:
                raise exception.InvalidArgument(
                    name='device', reason='the kernel refused to clear the '
                    'errors of %s: %s' % (device.address, exc))
        LOG.info('Errors of %s cleared by an operator: %s', device.address,
                 ', '.join(cleared) or 'none were set')
        return dict(self._apply(device), cleared=cleared)

    def journal(self, request):
        jobs = self._sidecar.programs.jobs()
        return [dict(job, device=address) for address, job in jobs]

    OPS = ('list', 'enable', 'disable', 'program', 'journal', 'clear-errors')

    def handle(self, request):
        if not isinstance(request, dict) or request.get('op') not in self.OPS:
            return {'ok': False, 'error': 'unknown request; one of: %s' %
                    ', '.join(self.OPS)}
        try:
            return {'ok': True, 'result': getattr(
                self, request['op'].replace('-', '_'))(request)}
        except exception.SidecarError as exc:
            return {'ok': False, 'error': str(exc)}
        except Exception as exc:
            LOG.exception('Control request %s failed', request.get('op'))
            return {'ok': False, 'error': 'internal error: %s' % exc}


class _Handler(socketserver.StreamRequestHandler):

    def handle(self):
        line = self.rfile.readline(MAX_REQUEST + 1)
        try:
            if len(line) > MAX_REQUEST:
                raise ValueError('request too large')
            request = json.loads(line)
        except ValueError as exc:
            answer = {'ok': False, 'error': 'bad request: %s' % exc}
        else:
            answer = self.server.control.handle(request)
        self.wfile.write(json.dumps(answer, sort_keys=True).encode() +
                         b'\n')


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class ControlServer:
    """Serve :class:`Control` on ``<state_path>/control.sock``."""

    def __init__(self, state_path, sidecar):
        self.path = socket_path(state_path)
        self._control = Control(sidecar)
        self._server = None
        self._thread = None

    def start(self):
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        old = os.umask(0o177)
        try:
            self._server = _Server(self.path, _Handler)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._server.control = self._control
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name='sidecar-control', daemon=True)
        self._thread.start()
        LOG.info('Control socket %s ready', self.path)

    def stop(self):
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._server = None


def call(path, request, timeout=None):
    """Send ``request`` to the daemon's socket; return its answer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        sock.sendall(json.dumps(request).encode() + b'\n')
        with sock.makefile('rb') as f:
            line = f.readline()
    finally:
        sock.close()
    if not line:
        raise exception.SidecarError(
            'the daemon closed the connection without answering')
    return json.loads(line)
