"""What a host's kernel does to its FPGAs while fakelibvirt's guests run.

On a real host libvirt binds each ``<hostdev type='pci' managed='yes'>``
to ``vfio-pci`` when the domain starts or the device is attached live,
and gives it back to its own driver when the domain stops or the device
is detached (libvirt src/util/virpci.c ``virPCIDeviceDetach`` /
``virPCIDeviceReattach``). Nova's fakelibvirt keeps only the domain's
definition, so :class:`GuestKernel` watches its domains and applies
:mod:`sidecar_simulator.kernel` to the simulated host whose sidecar asks
that connection: after every start, stop, live attach and detach of a
domain, the functions of a DFL card that running (or paused) domains
hold are on ``vfio-pci`` in the sidecar's sysfs tree, and every other one
its driver took back. Every functional test with a sidecar runs under it.

Only DFL card functions are moved: whether a NIC VF's driver (and with it
its live-migration trait) changes on a real host depends on the VF's
variant driver, which the simulated hosts do not model.
"""

import threading

import fixtures

from sidecar_simulator import kernel

_LOCK = threading.RLock()
#: The watchers in force, and the fakelibvirt methods they wrap.
_WATCHERS = []
_PATCHED = {}


def held_functions(conn):
    """The PCI addresses of the managed PCI hostdevs of ``conn``'s running
    (or paused) domains."""
    held = set()
    for dom in list(getattr(conn, '_running_vms', {}).values()):
        definition = getattr(dom, '_def', None)
        for hostdev in (definition or {}).get('devices', {}).get(
                'hostdevs', ()):
            if hostdev.get('type') != 'pci' or hostdev.get('managed') == 'no':
                continue
            try:
                held.add('%04x:%02x:%02x.%x' % tuple(
                    int(hostdev[key], 16)
                    for key in ('domain', 'bus', 'slot', 'function')))
            except (KeyError, TypeError, ValueError):
                continue
    return held


class GuestKernel(fixtures.Fixture):
    """Keep ``simulated``'s DFL functions bound as ``connect()``'s
    domains hold them."""

    def __init__(self, connect, simulated):
        """``simulated``: a SimulatedHost, or an extension of one
        (a DflHost, an NvidiaHost: its ``host``)."""
        super().__init__()
        self.connect = connect
        self.simulated = getattr(simulated, 'host', simulated)

    def _setUp(self):
        with _LOCK:
            if not _WATCHERS:
                _patch()
            _WATCHERS.append(self)
        self.addCleanup(self._stop)
        sync()

    def _stop(self):
        with _LOCK:
            _WATCHERS.remove(self)
            if not _WATCHERS:
                _unpatch()

    def sync(self):
        host = self.simulated
        held = {a for a in held_functions(self.connect())
                if a in host.functions and host.fpga_card(a) is not None}
        for address in sorted(held):
            kernel.bind_vfio(host, address)
        for address in sorted(set(host.overridden) - held):
            if host.fpga_card(address) is not None:
                kernel.release(host, address)


def sync():
    """Bring every watched host in line with its domains."""
    with _LOCK:
        for watcher in list(_WATCHERS):
            watcher.sync()


def _wrap(cls, name):
    original = getattr(cls, name)

    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        sync()
        return result

    _PATCHED[(cls, name)] = original
    setattr(cls, name, wrapper)


def _patch():
    from nova.tests.fixtures import libvirt as fakelibvirt
    for cls, name in ((fakelibvirt.Connection, '_mark_running'),
                      (fakelibvirt.Connection, '_mark_not_running'),
                      (fakelibvirt.Domain, '__init__'),
                      (fakelibvirt.Domain, 'attachDevice'),
                      (fakelibvirt.Domain, 'detachDevice')):
        _wrap(cls, name)


def _unpatch():
    for (cls, name), original in _PATCHED.items():
        setattr(cls, name, original)
    _PATCHED.clear()
