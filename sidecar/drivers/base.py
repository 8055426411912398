"""The small abstract base every discovery driver implements."""

import abc


class DiscoveryDriver(metaclass=abc.ABCMeta):
    """Find devices of one kind on this host.

    A driver is built once per daemon with the daemon's ``conf`` (an
    ``oslo_config.cfg.ConfigOpts``) and a ``source``
    (:class:`sidecar.sources.base.PciSource`), and asked to ``discover()``
    every cycle. It must never raise for one bad device: it logs a clear line
    naming the device and what was wrong, skips it, and goes on.
    """

    #: stevedore entry point name, also the deployable's ``driver_name``
    #: unless the driver sets a vendor-specific one.
    name = None

    def __init__(self, conf, source):
        self.conf = conf
        self.source = source

    @abc.abstractmethod
    def discover(self):
        """Return a list of :class:`sidecar.model.Device`."""

    def claims(self, address):
        """Whether this driver reported the PCI function ``address``.

        The daemon uses it so that two drivers never report one function.
        """
        return False
