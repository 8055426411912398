"""PCI functions as discovery drivers see them, whatever they are read from.

A source turns what it reads (sysfs files or libvirt node device XML) into
:class:`PciFunction` values through :func:`make_function`, so that every
source validates and normalizes the same way: addresses ``dddd:bb:ss.f``,
ids as lower-case hex without ``0x``, no NUMA affinity as ``None``.
"""

import abc
import contextlib
import dataclasses
import os
import re
from typing import Optional

from oslo_log import log as logging

from sidecar import model

LOG = logging.getLogger(__name__)

_HEX = re.compile(r'^(?:0x)?([0-9a-f]+)$')
_INT = re.compile(r'^-?[0-9]+$')
_UUID = re.compile(r'^[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}$')


class MalformedDevice(ValueError):
    """A device whose attributes cannot be trusted; it is skipped."""


@dataclasses.dataclass(frozen=True)
class MdevType:
    """One mediated device type a PCI function offers.

    ``mdevs`` are the UUIDs (sorted) of the mdevs of this type that already
    exist on the function: ``available_instances + len(mdevs)`` is the
    type's capacity, which creating an mdev does not change.
    """
    name: Optional[str]
    type_id: str
    available_instances: int
    device_api: str
    mdevs: tuple = ()

    @property
    def capacity(self):
        return self.available_instances + len(self.mdevs)


@dataclasses.dataclass(frozen=True)
class VendorVgpu:
    """A function's vGPU state in NVIDIA's vendor-specific VFIO framework
    (vGPU 17+): ``nvidia/current_vgpu_type`` (0: none) and the ``(id,
    name)`` pairs of ``nvidia/creatable_vgpu_types``, ids as strings.
    ``current`` is None where the function has no ``current_vgpu_type``
    (a PF)."""
    current: Optional[int]
    creatable: tuple = ()


@dataclasses.dataclass(frozen=True)
class PciFunction:
    """One PCI function: a PF, a VF, or a function without SR-IOV."""
    address: str
    vendor_id: str
    product_id: str
    class_id: str
    physfn: Optional[str] = None
    virtfns: tuple = ()
    numa_node: Optional[int] = None
    mdev_types: tuple = ()
    #: The bound driver's name, None when unbound (or unknown).
    driver: Optional[str] = None
    #: The IOMMU group number, None without one (or unknown).
    iommu_group: Optional[int] = None
    #: :class:`VendorVgpu` of a function with an ``nvidia/`` directory.
    vendor_vgpu: Optional[VendorVgpu] = None

    @property
    def is_vf(self):
        return self.physfn is not None

    def mdev_type(self, type_id):
        """The :class:`MdevType` ``type_id`` of this function, or None."""
        for mdev_type in self.mdev_types:
            if mdev_type.type_id == type_id:
                return mdev_type
        return None


def normalize_hex(value, digits, what):
    """``'0x8086'``, ``'8086'`` or ``'0X8086'`` -> ``'8086'``.

    Raises MalformedDevice naming ``what`` unless ``value`` is a hex number
    of exactly ``digits`` digits.
    """
    match = _HEX.match((value or '').strip().lower())
    if not match or len(match.group(1)) != digits:
        raise MalformedDevice('%s is %r, not %d hex digits'
                              % (what, value, digits))
    return match.group(1)


def _address(value, what):
    try:
        model.parse_bdf(value)
    except ValueError:
        raise MalformedDevice('%s is %r, not a PCI address' % (what, value))
    return value


def _int(value, what, minimum=0):
    text = '' if value is None else str(value).strip()
    number = int(text) if _INT.match(text) else None
    if number is None or number < minimum:
        raise MalformedDevice('%s is %r, not an integer >= %d'
                              % (what, value, minimum))
    return number


def make_mdev_type(type_id, name, available_instances, device_api,
                   mdevs=()):
    """Validate raw strings into an :class:`MdevType`."""
    if not type_id or '/' in type_id or type_id != type_id.strip():
        raise MalformedDevice('mdev type id %r is not a name' % (type_id,))
    what = 'mdev type %s' % type_id
    instances = _int(available_instances, what + ' available_instances')
    device_api = (device_api or '').strip()
    if not device_api:
        raise MalformedDevice('%s has no device_api' % what)
    uuids = sorted(uuid.lower() for uuid in mdevs)
    for uuid in uuids:
        if not _UUID.match(uuid):
            raise MalformedDevice('%s has an mdev named %r, not a UUID'
                                  % (what, uuid))
    return MdevType(name=(name or '').strip() or None, type_id=type_id,
                    available_instances=instances, device_api=device_api,
                    mdevs=tuple(uuids))


#: A vGPU type line of ``creatable_vgpu_types``: ``1054 : NVIDIA H100-4C``
#: (NVIDIA vgpu-device-manager's parseCreatableVGPUTypes; the ``ID : vGPU
#: Name`` header and blank lines are skipped).
_VGPU_TYPE_LINE = re.compile(r'^\s*([0-9]{1,9})\s*:\s*(\S.*?)\s*$')
_VGPU_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9 ._()+/-]{0,63}$')
_DRIVER = re.compile(r'^[A-Za-z0-9_-]{1,64}$')


def make_vendor_vgpu(current, creatable):
    """Validate ``current_vgpu_type`` and ``creatable_vgpu_types`` (raw
    file contents) into a :class:`VendorVgpu`; a type line whose name is
    not plain text makes the function malformed."""
    number = (None if current is None else
              _int(current, 'nvidia/current_vgpu_type'))
    types = []
    for line in (creatable or '').splitlines():
        match = _VGPU_TYPE_LINE.match(line)
        if match is None:
            continue  # the header, a blank line
        if not _VGPU_NAME.match(match.group(2)):
            raise MalformedDevice('nvidia/creatable_vgpu_types names type '
                                  '%s %r, not a vGPU type name'
                                  % (match.group(1), match.group(2)[:70]))
        types.append((str(int(match.group(1))), match.group(2)))
    return VendorVgpu(current=number, creatable=tuple(types))


def make_function(address, vendor_id, product_id, class_id, physfn=None,
                  virtfns=(), numa_node=None, mdev_types=(), driver=None,
                  iommu_group=None, vendor_vgpu=None):
    """Validate raw values into a :class:`PciFunction`.

    ``numa_node`` is a string as sysfs gives it (``'-1'`` or None: no
    affinity); ``iommu_group`` too (None: no group). Raises
    MalformedDevice with a message naming the bad value.
    """
    _address(address, 'address')
    numa = None
    if numa_node is not None and str(numa_node).strip() != '-1':
        numa = _int(numa_node, 'numa_node')
    if driver is not None and not _DRIVER.match(driver):
        raise MalformedDevice('driver is %r, not a driver name' % (driver,))
    group = None
    if iommu_group is not None:
        group = _int(iommu_group, 'iommu_group')
    return PciFunction(
        address=address,
        vendor_id=normalize_hex(vendor_id, 4, 'vendor id'),
        product_id=normalize_hex(product_id, 4, 'product id'),
        class_id=normalize_hex(class_id, 6, 'class'),
        physfn=None if physfn is None else _address(physfn, 'physfn'),
        virtfns=tuple(sorted(_address(vf, 'virtfn') for vf in virtfns)),
        numa_node=numa,
        mdev_types=tuple(sorted(mdev_types, key=lambda t: t.type_id)),
        driver=driver, iommu_group=group, vendor_vgpu=vendor_vgpu)


def read_file(path):
    """The stripped content of a small text file, or None if unreadable."""
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def sysfs_attr_path(sysfs_root, address, relpath):
    """``<sysfs_root>/bus/pci/devices/<address>/<relpath>``, checked."""
    model.parse_bdf(address)
    norm = os.path.normpath(relpath)
    if os.path.isabs(norm) or norm == '..' or norm.startswith('../'):
        raise ValueError('attribute path %r leaves the device' % relpath)
    return os.path.join(sysfs_root, 'bus', 'pci', 'devices', address, norm)


class ProblemLog:
    """Log each distinct problem as a warning once while it lasts.

    Discovery runs every cycle and several drivers read one source, so the
    same bad device would otherwise be logged over and over. Within
    :meth:`cycle`, a message seen in the previous cycle is logged at debug
    level; one that disappears and comes back is a warning again.
    """

    def __init__(self, log):
        self._log = log
        self._previous = frozenset()
        self._current = None

    @contextlib.contextmanager
    def cycle(self):
        self._current = set()
        try:
            yield self
        finally:
            self._previous = frozenset(self._current)
            self._current = None

    def warning(self, msg, *args):
        self._once(self._log.warning, msg, args)

    def info(self, msg, *args):
        """As :meth:`warning`, at INFO level."""
        self._once(self._log.info, msg, args)

    def _once(self, log, msg, args):
        text = msg % args if args else msg
        if self._current is not None:
            self._current.add(text)
        if text in self._previous:
            self._log.debug(text)
        else:
            log(text)


class PciSource(metaclass=abc.ABCMeta):
    """The host's PCI functions, read afresh at every :meth:`functions`."""

    def __init__(self):
        self.problems = ProblemLog(LOG)

    def functions(self):
        """All well-formed PCI functions, sorted by address.

        A malformed device is left out with one warning naming it and the
        bad value; this never raises because of one device.
        """
        result = []
        with self.problems.cycle():
            for label, handle in self._devices():
                try:
                    result.append(self._read(handle))
                except MalformedDevice as exc:
                    self.problems.warning(
                        'Skipping PCI device %s: %s', label, exc)
        result.sort(key=lambda function: function.address)
        return result

    @abc.abstractmethod
    def _devices(self):
        """Iterate ``(label for logs, handle for _read)`` per device."""

    @abc.abstractmethod
    def _read(self, handle):
        """Return a PciFunction or raise MalformedDevice."""

    @abc.abstractmethod
    def read_attr(self, address, relpath):
        """Driver-specific sysfs attribute of a function, or None.

        ``relpath`` is relative to the function's sysfs directory, for
        example ``'sriov_totalvfs'``.
        """
