"""Where discovery drivers read the host's PCI functions from.

:class:`sidecar.sources.sysfs.SysfsSource` reads ``/sys``;
:class:`sidecar.sources.libvirt.LibvirtSource` asks libvirt's node device
API. Both give the same :class:`sidecar.sources.base.PciFunction` values.
"""
