"""PCI functions, mdev types and FPGA regions read from sysfs.

One ``scandir`` per device and a few small reads: no subprocess, no glob,
so a host with a thousand VFs is read in a few tens of milliseconds.
"""

import dataclasses
import os
import re
from typing import Optional

from oslo_log import log as logging

from sidecar import model
from sidecar.sources import base
from sidecar.sources import dfl

LOG = logging.getLogger(__name__)

_VIRTFN = re.compile(r'^virtfn([0-9]+)$')
_DIGITS = re.compile(r'([0-9]+)')


def _natural(name):
    return [int(part) if part.isdigit() else part
            for part in _DIGITS.split(name)]


def link_target(path):
    """Base name of a symlink's target (``../0000:81:00.0`` -> address)."""
    try:
        return os.path.basename(os.readlink(path).rstrip('/'))
    except OSError as exc:
        raise base.MalformedDevice('cannot read link %s: %s'
                                   % (os.path.basename(path), exc))


def _required(path, what):
    value = base.read_file(path)
    if value is None:
        raise base.MalformedDevice('%s (%s) is missing or unreadable'
                                   % (what, os.path.basename(path)))
    return value


def _list_dir(path):
    try:
        with os.scandir(path) as entries:
            return sorted(entry.name for entry in entries)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise base.MalformedDevice('cannot list %s: %s' % (path, exc))


def read_mdev_types(device_path):
    """The :class:`base.MdevType` list under ``mdev_supported_types``."""
    types_dir = os.path.join(device_path, 'mdev_supported_types')
    result = []
    for type_id in _list_dir(types_dir):
        type_dir = os.path.join(types_dir, type_id)
        result.append(base.make_mdev_type(
            type_id=type_id,
            name=base.read_file(os.path.join(type_dir, 'name')),
            available_instances=_required(
                os.path.join(type_dir, 'available_instances'),
                'mdev type %s available_instances' % type_id),
            device_api=base.read_file(os.path.join(type_dir, 'device_api')),
            mdevs=_list_dir(os.path.join(type_dir, 'devices'))))
    return result


def read_vendor_vgpu(device_path):
    """The :class:`base.VendorVgpu` of ``<device>/nvidia/`` (NVIDIA
    vgpu-device-manager ``pkg/vgpu/vfio/sysfs.go``)."""
    vgpu_dir = os.path.join(device_path, 'nvidia')
    return base.make_vendor_vgpu(
        base.read_file(os.path.join(vgpu_dir, 'current_vgpu_type')),
        base.read_file(os.path.join(vgpu_dir, 'creatable_vgpu_types')))


class SysfsSource(base.PciSource):
    """Read ``<root>/bus/pci/devices/*``.

    :param root: the sysfs mount point, ``/sys`` on a real host.
    """

    def __init__(self, root='/sys'):
        super().__init__()
        self.root = root
        self.devices_dir = os.path.join(root, 'bus', 'pci', 'devices')

    def _devices(self):
        try:
            with os.scandir(self.devices_dir) as entries:
                names = [entry.name for entry in entries]
        except OSError as exc:
            self.problems.warning('Cannot list PCI devices in %s: %s',
                                  self.devices_dir, exc)
            return []
        return [(name, name) for name in names]

    def _read(self, name):
        path = os.path.join(self.devices_dir, name)
        try:
            model.parse_bdf(name)
        except ValueError:
            raise base.MalformedDevice('%r is not a PCI address' % name)
        try:
            with os.scandir(path) as entries:
                names = {entry.name for entry in entries}
        except OSError as exc:
            raise base.MalformedDevice('cannot list %s: %s' % (path, exc))
        physfn = None
        if 'physfn' in names:
            physfn = link_target(os.path.join(path, 'physfn'))
        virtfns = [link_target(os.path.join(path, entry))
                   for entry in names if _VIRTFN.match(entry)]
        mdev_types = ()
        if 'mdev_supported_types' in names:
            mdev_types = read_mdev_types(path)
        vendor_vgpu = None
        if 'nvidia' in names:
            vendor_vgpu = read_vendor_vgpu(path)
        return base.make_function(
            address=name,
            vendor_id=_required(os.path.join(path, 'vendor'), 'vendor id'),
            product_id=_required(os.path.join(path, 'device'), 'product id'),
            class_id=_required(os.path.join(path, 'class'), 'class'),
            physfn=physfn,
            virtfns=virtfns,
            numa_node=base.read_file(os.path.join(path, 'numa_node')),
            mdev_types=mdev_types,
            driver=(link_target(os.path.join(path, 'driver'))
                    if 'driver' in names else None),
            iommu_group=(link_target(os.path.join(path, 'iommu_group'))
                         if 'iommu_group' in names else None),
            vendor_vgpu=vendor_vgpu)

    def read_attr(self, address, relpath):
        return base.read_file(
            base.sysfs_attr_path(self.root, address, relpath))


@dataclasses.dataclass(frozen=True)
class FpgaRegion:
    """An FPGA region and the FPGA manager of the same PCI function.

    ``path`` and ``manager`` are ``<root>/class/fpga_region/<name>`` and
    ``<root>/class/fpga_manager/<mgr>`` (None when the function has no
    manager); ``address`` is the PCI function the region's ``device`` link
    leads to, or None when it leads to none.
    """
    name: str
    path: str
    address: Optional[str]
    manager: Optional[str] = None


def pci_address_of(class_dir):
    """The PCI function a class device belongs to, or None.

    Follows ``<class_dir>/device`` and walks up the resolved path to the
    nearest PCI function, so that both a region whose ``device`` is the
    PCI function and one whose ``device`` is a platform device under it
    are found. (DFL cards' regions are read by
    :mod:`sidecar.sources.dfl`, not here: their PR region's ``device`` is
    ``dfl-fme-region.P`` under ``dfl-fme.N``, under the base region.)
    """
    link = os.path.join(class_dir, 'device')
    if not os.path.lexists(link):
        return None
    path = os.path.realpath(link)
    while path and path != os.path.dirname(path):
        name = os.path.basename(path)
        try:
            model.parse_bdf(name)
            return name
        except ValueError:
            path = os.path.dirname(path)
    return None


def _class_entries(sysfs_root, class_name):
    class_dir = os.path.join(sysfs_root, 'class', class_name)
    try:
        with os.scandir(class_dir) as entries:
            names = [entry.name for entry in entries]
    except OSError:
        return []
    names.sort(key=_natural)
    return [(name, os.path.join(class_dir, name)) for name in names]


def fpga_regions(sysfs_root):
    """All ``class/fpga_region`` entries, in natural order of their names,
    but those of DFL cards (:func:`sidecar.sources.dfl.cards`).

    Each region is paired with the first (natural order) FPGA manager whose
    ``device`` leads to the same PCI function.
    """
    managers = {}
    for _name, path in _class_entries(sysfs_root, 'fpga_manager'):
        address = pci_address_of(path)
        if address is not None and not dfl.is_dfl_manager(path):
            managers.setdefault(address, path)
    regions = []
    for name, path in _class_entries(sysfs_root, 'fpga_region'):
        if dfl.is_dfl(path):
            continue  # a DFL card's: sidecar.sources.dfl reads them
        address = pci_address_of(path)
        regions.append(FpgaRegion(name=name, path=path, address=address,
                                  manager=managers.get(address)))
    return regions
