"""The health monitor's place in the daemon: the inventory that passes
each cycle's devices through a :class:`sidecar.discovery.health.Monitor`,
and who uses a device (named when it turns unhealthy)."""

import os

from sidecar.discovery import health
from sidecar.discovery import inventory
from sidecar.program import manager as program
from sidecar.report import reporter as report


class MonitoredInventory(inventory.Inventory):
    """An :class:`sidecar.discovery.inventory.Inventory` whose ``discover()``
    passes
    the devices through a :class:`Monitor` (set ``monitor`` after
    building): unhealthy devices are held and carry the health trait, gone
    ones (and vanished functions) are reported as last seen, and
    ``devices()`` returns them so. With ``nvml`` (a
    :class:`sidecar.discovery.nvml_health.NvmlHealth`), NVML's XID and ECC
    verdicts on the GPUs are read each cycle and join each driver's."""

    monitor = None
    nvml = None

    def discover(self):
        devices = super().discover()
        if self.monitor is None:
            return devices
        owner = {}
        for driver in self._drivers:
            for device in getattr(driver, 'last', ()):
                owner[id(device)] = driver
        if self.nvml is not None:
            self.nvml.poll()
            owner = {key: _NvmlChecked(driver, self.nvml)
                     for key, driver in owner.items()}
        devices = self.monitor.apply([(owner[id(d)], d) for d in devices
                                      if id(d) in owner])
        # What is reported (a vanished VF included) is what the device
        # list, the programming checks and the guest watch see.
        with self._lock:
            self._devices = {d.address: d for d in devices}
        return devices


class _NvmlChecked:
    """A discovery driver whose health check adds NVML's."""

    def __init__(self, driver, nvml):
        self._driver = driver
        self._nvml = nvml

    def health(self, device):
        return self._nvml.observe(device, self._driver.health(device))


def users_from(placement, domains, sysfs_root):
    """``users(host, device)`` for :class:`Monitor`: the Placement
    consumers (server UUIDs) of the device's providers and the libvirt
    domains using one of its functions or mdevs."""
    def users(host, device):
        found = set()
        for dep in device.deployables:
            name = report.deployable_name(host, dep)
            found.update(placement.allocations(program.provider_uuid(name)))
        functions = device.functions()
        for used, domain in domains.devices_in_use().items():
            if used in functions or any(
                    os.path.isdir(os.path.join(
                        health.device_dir(sysfs_root, f), used))
                    for f in functions):
                found.add('domain %s' % domain)
        return found
    return users
