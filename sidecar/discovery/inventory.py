"""The devices this host has: every enabled driver's discovery, merged."""

import threading

from oslo_log import log as logging
from stevedore import named

from sidecar import exception

LOG = logging.getLogger(__name__)

DRIVER_NAMESPACE = 'nova_cyborg.sidecar.drivers'


def load_drivers(conf, source, read_only=False):
    """The drivers of ``[sidecar] enabled_drivers``; with ``read_only``
    (``nova-cyborg-sidecar-manage discover``) each is told to write
    nothing under ``state_path`` (its ``read_only``)."""
    names = conf.sidecar.enabled_drivers
    missing = []
    manager = named.NamedExtensionManager(
        DRIVER_NAMESPACE, names, invoke_on_load=True,
        invoke_args=(conf, source), name_order=True,
        on_missing_entrypoints_callback=missing.extend,
        propagate_map_exceptions=True)
    if missing:
        raise exception.InvalidArgument(
            name='[sidecar] enabled_drivers',
            reason='unknown driver(s) %s' % ', '.join(sorted(missing)))
    drivers = [ext.obj for ext in manager]
    for driver in drivers:
        driver.read_only = read_only
    return drivers


class Inventory:
    """Discover with every driver; a PCI function belongs to one driver.

    Drivers run in ``enabled_drivers`` order; a device whose functions an
    earlier driver already reported is skipped with a warning, so a broad
    ``[pci] device_spec`` cannot report an FPGA's VFs twice.
    """

    def __init__(self, drivers):
        self._drivers = drivers
        self._devices = {}
        self._lock = threading.Lock()

    def discover(self):
        devices = {}
        taken = {}
        for driver in self._drivers:
            try:
                found = driver.discover()
            except Exception:
                LOG.exception('Discovery driver %s failed; its devices are '
                              'left out of this cycle', driver.name)
                continue
            for device in found:
                functions = device.functions()
                clash = sorted(f for f in functions if f in taken)
                if clash:
                    LOG.warning('Driver %(drv)s reports %(addr)s, but '
                                '%(fn)s is already reported by %(other)s; '
                                'skipping it', {
                                    'drv': driver.name,
                                    'addr': device.address,
                                    'fn': clash[0],
                                    'other': taken[clash[0]]})
                    continue
                for f in functions:
                    taken[f] = driver.name
                devices[device.address] = device
        with self._lock:
            self._devices = devices
        return list(devices.values())

    def devices(self):
        with self._lock:
            return list(self._devices.values())

    def device(self, address):
        with self._lock:
            return self._devices.get(address)

    def refresh_device(self, address):
        self.discover()
        return self.device(address)
