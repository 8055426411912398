"""What discovery drivers report: plain, immutable values.

Drivers return these; :mod:`sidecar.report.reporter` turns them into the wire
objects
cyborg-conductor expects. Keeping the two apart lets drivers stay free of
oslo.versionedobjects and lets the reporter compare cycles cheaply (these are
hashable and comparable).
"""

import dataclasses
import re
from typing import Optional

_BDF_RE = re.compile(
    r'^(?P<domain>[0-9a-f]{4}):(?P<bus>[0-9a-f]{2}):'
    r'(?P<slot>[0-9a-f]{2})\.(?P<function>[0-7])$')

# Cyborg 17 device types (cyborg.common.constants.DEVICE_TYPE).
DEVICE_TYPES = ('GPU', 'FPGA', 'AICHIP', 'QAT', 'NIC', 'SSD', 'MDEV', 'PCI',
                'NVME')


def parse_bdf(address):
    """Return (domain, bus, slot, function) hex strings of a PCI address.

    Accepts only the canonical lower-case ``dddd:bb:ss.f`` form sysfs and
    libvirt use; raises ValueError for anything else.
    """
    match = _BDF_RE.fullmatch(address or '')
    if not match:
        raise ValueError('not a PCI address: %r' % (address,))
    return (match.group('domain'), match.group('bus'), match.group('slot'),
            match.group('function'))


#: attach_info of a vendor-VFIO vGPU's MDEV handle (AttachHandle.vendor_vfio)
#: beside ``managed='no'``: nova_cyborg passes its VF through as a PCI
#: function instead of creating an mdev.
VGPU_FRAMEWORK = 'vgpu_framework'
VENDOR_VFIO = 'vendor-vfio'


@dataclasses.dataclass(frozen=True)
class AttachHandle:
    """Something Nova attaches to a guest: a PCI function or an mdev slot.

    ``attach_type`` is ``PCI`` or ``MDEV``. ``address`` is the PCI address
    (of the function itself, or of the parent GPU for MDEV). ``mdev_type``
    is set for MDEV handles only.
    """
    attach_type: str
    address: str
    mdev_type: Optional[str] = None
    #: MDEV only: which of the type's instances this handle is (0..n-1).
    #: cyborg-conductor tells attach handles apart by attach_info alone, so
    #: it goes into attach_info as ``vgpu_mark``, as Cyborg's NVIDIA
    #: driver does.
    instance: int = 0
    #: The ``<hostdev managed=...>`` mode Nova writes, sent as attach_info
    #: ``managed`` when set: ``'no'`` for a function that must stay on its
    #: host driver (an NVIDIA vGPU 17 VF); None for libvirt's default,
    #: ``'yes'``. On an MDEV handle, ``'no'`` makes it a vendor-VFIO vGPU
    #: (:attr:`vendor_vfio`).
    managed: Optional[str] = None
    #: PCI only: the Neutron physical network of a NIC function (``[pci]
    #: device_spec`` ``physical_network``), sent as attach_info
    #: ``physical_network``, which Nova's accelerator-direct ports read.
    physical_network: Optional[str] = None

    @property
    def vendor_vfio(self):
        """An NVIDIA vGPU 17 VF whose type the sidecar sets at bind: an
        MDEV handle, so that cyborg-conductor 17 calls ``create_vgpu_mdev``
        and ``remove_vgpu_mdev`` for it, whose ``address`` is the VF
        itself and ``mdev_type`` the vGPU type name; Nova passes the VF
        through as a PCI function with ``managed='no'``."""
        return self.attach_type == 'MDEV' and self.managed == 'no'

    def attach_info(self):
        """The attach_info dict Cyborg stores and Nova later validates."""
        domain, bus, slot, function = parse_bdf(self.address)
        info = {'domain': domain, 'bus': bus, 'device': slot,
                'function': function}
        if self.attach_type == 'MDEV':
            info['asked_type'] = self.mdev_type
            info['vgpu_mark'] = '%s_%d' % (self.mdev_type, self.instance)
            if self.vendor_vfio:
                info['managed'] = self.managed
                info[VGPU_FRAMEWORK] = VENDOR_VFIO
        else:
            if self.managed is not None:
                info['managed'] = self.managed
            if self.physical_network is not None:
                info['physical_network'] = self.physical_network
        return info


@dataclasses.dataclass(frozen=True)
class Deployable:
    """One resource provider's worth of accelerators.

    ``name`` is the suffix after ``<host>_``: cyborg-conductor uses the full
    deployable name as the Placement provider name.
    """
    name: str
    resource_class: str
    num_accelerators: int
    traits: tuple = ()
    attach_handles: tuple = ()
    driver_name: str = ''


@dataclasses.dataclass(frozen=True)
class Device:
    """A physical device: one control path (PCI PF) and its deployables."""
    type: str
    vendor: str
    model: str
    address: str
    deployables: tuple = ()
    std_board_info: tuple = ()  # sorted (key, value) pairs
    driver_name: str = ''

    def functions(self):
        """Every PCI address the device stands for: its control path and
        its attach handles' functions."""
        return frozenset({self.address} | {
            handle.address for dep in self.deployables
            for handle in dep.attach_handles})
