"""The small abstract base every discovery driver implements."""

import abc


class DiscoveryDriver(metaclass=abc.ABCMeta):
    """Find devices of one kind on this host.

    A driver is built once per daemon with the daemon's ``conf`` (an
    ``oslo_config.cfg.ConfigOpts``) and a ``source``
    (:class:`sidecar.sources.base.PciSource`), and asked to ``discover()``
    every cycle; drivers implement ``_discover()``. It must never raise for
    one bad device: it logs a clear line naming the device and what was
    wrong, skips it, and goes on.
    """

    #: stevedore entry point name, also the deployable's ``driver_name``
    #: unless the driver sets a vendor-specific one.
    name = None

    def __init__(self, conf, source):
        self.conf = conf
        self.source = source
        self._reported = frozenset()

    def discover(self):
        """Return a list of :class:`sidecar.model.Device`."""
        devices = self._discover()
        self._reported = frozenset().union(
            *(device.functions() for device in devices))
        return devices

    @abc.abstractmethod
    def _discover(self):
        """The driver's own discovery: a list of :class:`model.Device`."""

    def claims(self, address):
        """Whether this driver's last discovery reported the PCI function
        ``address`` (a control path or an attach handle's function)."""
        return address in self._reported
