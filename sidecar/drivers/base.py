"""The small abstract base every discovery driver implements."""

import abc

from oslo_log import log as logging

from sidecar.discovery import health as health_mod
from sidecar.discovery import nova_overlap
from sidecar.sources import base as sources

LOG = logging.getLogger(__name__)


class DiscoveryDriver(metaclass=abc.ABCMeta):
    """Find devices of one kind on this host.

    A driver is built once per daemon with the daemon's ``conf`` (an
    ``oslo_config.cfg.ConfigOpts``) and a ``source``
    (:class:`sidecar.sources.base.PciSource`), and asked to ``discover()``
    every cycle; drivers implement ``_discover()``. It must never raise for
    one bad device: it logs a clear line naming the device and what was
    wrong, skips it, and goes on. A device one of whose functions Nova
    manages (``[sidecar] nova_config_file``) is never reported.
    """

    #: stevedore entry point name, also the deployable's ``driver_name``
    #: unless the driver sets a vendor-specific one.
    name = None

    def __init__(self, conf, source):
        self.conf = conf
        self.source = source
        self._reported = frozenset()
        self.sysfs_root = conf.sidecar.sysfs_root
        self.nova = nova_overlap.NovaConfig(conf.sidecar.nova_config_file)
        self._refusals = sources.ProblemLog(LOG)

    def discover(self):
        """Return a list of :class:`sidecar.model.Device`."""
        devices = self._without_nova(self._discover())
        #: What the last discovery reported (for the health monitor).
        self.last = tuple(devices)
        self._reported = frozenset().union(
            *(device.functions() for device in devices))
        return devices

    def _without_nova(self, devices):
        """``devices`` less those Nova manages, each refused with a
        WARNING (once while it lasts)."""
        nova = self.nova.devices()
        with self._refusals.cycle():
            if not devices or nova is None or not (nova.specs or
                                                   nova.mdev_types):
                return devices
            functions = {f.address: f for f in self.source.functions()}
            kept = []
            for device in devices:
                why = None
                for address in sorted(device.functions()):
                    function = functions.get(address)
                    why = function and nova.managed(function,
                                                    self.sysfs_root)
                    if why:
                        break
                if not why:
                    kept.append(device)
                    continue
                self._refusals.warning(
                    'Not reporting %s device %s (driver %s): Nova manages '
                    '%s through %s in %s. A device is managed by Nova or by '
                    'Cyborg, never both: remove it from one of them',
                    device.type, device.address, self.name, address, why,
                    nova.path)
            return kept

    def health(self, device):
        """What the host shows of ``device`` (a
        :class:`sidecar.discovery.health.Observation`): present, and its
        functions'
        PCIe AER counters. Drivers add their own checks."""
        return health_mod.pci_observation(self.sysfs_root, device,
                                          self.conf)

    @abc.abstractmethod
    def _discover(self):
        """The driver's own discovery: a list of :class:`model.Device`."""

    def claims(self, address):
        """Whether this driver's last discovery reported the PCI function
        ``address`` (a control path or an attach handle's function)."""
        return address in self._reported
