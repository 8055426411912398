"""Generic PCI driver: the functions ``[pci] device_spec`` selects.

Each selected PF, or function without VFs, is one Device with one
Deployable. With ``physical_function: true`` the function itself is the
attach handle; otherwise its VFs are (all of them when the spec matches
the PF, else the VFs the spec matches), or the function itself when it
has no VF. The first spec, in configuration order, that selects something
under a PF wins. With ``live_migratable: true`` the deployable carries
``HW_PCI_LIVE_MIGRATABLE``: its functions' driver supports VFIO migration,
and a server using them may be live migrated. With ``physical_network``
(as in Nova's own ``[pci] device_spec``) each attach handle names that
Neutron physical network in its attach_info, which Nova's
``accelerator-direct`` ports read, and the deployable carries
``CUSTOM_<PHYSNET>`` as Cyborg's NIC driver does (a device profile
requires it to land on that network).

An Intel QAT GEN4 PF (4xxx, 401xx, 402xx, 420xx) serves what its
``qat/cfg_services`` names (Documentation/ABI/testing/sysfs-driver-qat:
``sym;asym``, ``dc``...; its VFs serve the same): the deployable carries
``CUSTOM_QAT_SERVICE_<SERVICES>`` (``CUSTOM_QAT_SERVICE_SYM_ASYM``,
``CUSTOM_QAT_SERVICE_DC``; in a fixed order, as the kernel treats
``asym;sym`` as ``sym;asym``), so that a device profile asks for crypto
or compression. Its health:

- ``qat/state`` other than ``up`` is a fault;
- a rise of ``qat_ras/errors_fatal`` over the count first seen is a
  fault (Documentation/ABI/testing/sysfs-driver-qat_ras, kernel 6.7; the
  baseline is kept in ``health.json``); it lifts when the count falls
  back, as ``echo 1 > qat_ras/reset_error_counters`` makes it; rises of
  ``errors_nonfatal`` and ``errors_correctable`` are logged;
- a heartbeat ``status`` other than 0
  (``<sysfs_root>/kernel/debug/qat_<device>_<address>/heartbeat/status``,
  Documentation/ABI/testing/debugfs-driver-qat: reading it polls the
  device; it exists for the GEN4 PFs and for c62x, c3xxx and dh895xcc) is
  a fault. debugfs is root's only, so it is read through the privileged
  daemon (:func:`sidecar.privileged.qat_heartbeat`); ``discover``, which
  starts no privileged daemon, does not read it.
"""

import dataclasses
import fnmatch
import functools
import os
import re
import typing

import os_resource_classes as orc
import os_traits
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import strutils

from sidecar.discovery import pci_health
from sidecar.drivers import base
from sidecar import exception
from sidecar import model
from sidecar import privileged
from sidecar.sources import base as sources

LOG = logging.getLogger(__name__)

OPTION = '[pci] device_spec'
_KEYS = frozenset(('vendor_id', 'product_id', 'address', 'resource_class',
                   'traits', 'physical_function', 'live_migratable',
                   'physical_network'))
#: A Neutron physical network name, as nova_cyborg's ARQ parser takes it.
_PHYSNET = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
_ID = re.compile(r'^(?:0x)?[0-9a-f]{1,4}$')
_GLOB = re.compile(r'^[0-9a-f*?\[\]!:.-]+$')
_LEGAL = re.compile(r'^[A-Z0-9_]+$')
#: QAT GEN4 PFs and their VFs (drivers/crypto/intel/qat/qat_common/
#: adf_accel_devices.h: ADF_4XXX/401XX/402XX/420XX_PCI_DEVICE_ID and
#: their IOV ids).
QAT_GEN4 = {'4940': '4941', '4942': '4943', '4944': '4945',
            '4946': '4947'}
QAT_PFS = frozenset(QAT_GEN4)
QAT_VFS = frozenset(QAT_GEN4.values())
#: Older QAT PFs with a debugfs heartbeat (include/linux/pci_ids.h
#: PCI_DEVICE_ID_INTEL_QAT_DH895XCC 0435, C62X 37c8, C3XXX 19e2;
#: debugfs-driver-qat).
QAT_HEARTBEAT_PFS = QAT_PFS | frozenset(('0435', '37c8', '19e2'))
#: qat_ras counters logged when they rise (sysfs-driver-qat_ras).
QAT_RAS_LOGGED = ('errors_nonfatal', 'errors_correctable')
#: cfg_services in the order of the ABI document; others follow, sorted.
QAT_SERVICES = ('sym', 'asym', 'dc', 'dcc', 'decomp')
_SERVICE = re.compile(r'^[a-z0-9]{1,16}$')
QAT_TRAIT = 'CUSTOM_QAT_SERVICE_'


@functools.lru_cache(maxsize=1)
def _standard_traits():
    return frozenset(os_traits.get_traits())


def trait_name(name):
    """A standard trait as is, any other name as a legal ``CUSTOM_`` one."""
    if name in _standard_traits() or (
            os_traits.is_custom(name) and _LEGAL.match(name)):
        return name
    return os_traits.normalize_name(name)


def resource_class_name(name):
    """A standard resource class as is, any other as ``CUSTOM_<NAME>``."""
    if name in orc.STANDARDS or (orc.is_custom(name) and _LEGAL.match(name)):
        return name
    return orc.normalize_name(name)


def pci_traits(function):
    """Upstream's generic PCI traits of one function."""
    return {'CUSTOM_PCI_' + function.vendor_id.upper(),
            'CUSTOM_PCI_PRODUCT_ID_' + function.product_id.upper()}


def qat_trait(text):
    """The service trait of a ``qat/cfg_services`` value; ValueError when
    it names no service or one that is not a plain word."""
    services = set((text or '').strip().split(';'))
    if not services or not all(_SERVICE.match(s) for s in services):
        raise ValueError('qat/cfg_services %r names no services' %
                         (text or '')[:64])
    ordered = [s for s in QAT_SERVICES if s in services] + sorted(
        services - set(QAT_SERVICES))
    return QAT_TRAIT + '_'.join(ordered).upper()


def _invalid(entry, reason):
    return exception.InvalidArgument(name=OPTION,
                                     reason='entry %s: %s' % (entry, reason))


def _hex_id(entry, spec, key):
    value = spec.get(key, '*')
    if value == '*':
        return value
    if not isinstance(value, str) or not _ID.match(value.strip().lower()):
        raise _invalid(entry, '%s %r is neither "*" nor a hex id of up to '
                              '4 digits' % (key, value))
    return '%04x' % int(value.strip().lower().replace('0x', ''), 16)


def _name(entry, key, value, normalize):
    if not isinstance(value, str) or not value.strip():
        raise _invalid(entry, '%s %r is not a name' % (key, value))
    name = normalize(value.strip())
    if name in ('CUSTOM_', 'CUSTOM__') or len(name) > 255:
        raise _invalid(entry, '%s %r gives no usable name' % (key, value))
    return name


def _boolean(entry, spec, key, strings=False):
    value = spec.get(key, False)
    if strings and isinstance(value, str):
        # As Nova's own [pci] device_spec reads it: "yes", "no", "true"...
        try:
            return strutils.bool_from_string(value, strict=True)
        except ValueError:
            pass
    if not isinstance(value, bool):
        raise _invalid(entry, '%s %r is not true or false%s' % (
            key, value, ' (nor "yes" or "no")' if strings else ''))
    return value


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """One validated ``[pci] device_spec`` entry."""
    vendor_id: str = '*'
    product_id: str = '*'
    address: str = '*'
    resource_class: str = 'CUSTOM_PCI'
    traits: tuple = ()
    physical_function: bool = False
    live_migratable: bool = False
    physical_network: typing.Optional[str] = None

    @classmethod
    def parse(cls, text):
        """The specs of one option value (a JSON object or list of them).

        Raises InvalidArgument saying what is wrong with it.
        """
        try:
            loaded = jsonutils.loads(text)
        except ValueError as exc:
            raise _invalid(repr(text), 'not JSON (%s)' % exc)
        entries = loaded if isinstance(loaded, list) else [loaded]
        return [cls._parse_one(text, spec) for spec in entries]

    @classmethod
    def _parse_one(cls, entry, spec):
        if not isinstance(spec, dict):
            raise _invalid(entry, 'not a JSON object')
        unknown = sorted(set(spec) - _KEYS)
        if unknown:
            raise _invalid(entry, 'unknown keys %s (known: %s)' % (
                ', '.join(unknown), ', '.join(sorted(_KEYS))))
        address = spec.get('address', '*')
        if not isinstance(address, str) or not _GLOB.match(address.lower()):
            raise _invalid(entry, 'address %r is not a PCI address glob'
                                  % (address,))
        address = address.lower()
        # Like Nova, a glob may leave out the domain (and bus): '81:00.*'.
        address = '*:' * (2 - min(address.count(':'), 2)) + address
        traits = spec.get('traits', [])
        if not isinstance(traits, list):
            raise _invalid(entry, 'traits %r is not a list' % (traits,))
        physical_function = _boolean(entry, spec, 'physical_function')
        live_migratable = _boolean(entry, spec, 'live_migratable',
                                   strings=True)
        physnet = spec.get('physical_network')
        if physnet is not None and (not isinstance(physnet, str) or
                                    not _PHYSNET.match(physnet) or
                                    '..' in physnet):
            raise _invalid(entry, 'physical_network %r is not a physical '
                                  'network name (letters, digits, "_", '
                                  '".", "-"; up to 64)' % (physnet,))
        return cls(
            vendor_id=_hex_id(entry, spec, 'vendor_id'),
            product_id=_hex_id(entry, spec, 'product_id'),
            address=address,
            resource_class=_name(entry, 'resource_class',
                                 spec.get('resource_class', 'PCI'),
                                 resource_class_name),
            traits=tuple(sorted({_name(entry, 'trait', t, trait_name)
                                 for t in traits})),
            physical_function=physical_function,
            live_migratable=live_migratable,
            physical_network=physnet)

    def matches(self, function):
        return (self.vendor_id in ('*', function.vendor_id) and
                self.product_id in ('*', function.product_id) and
                fnmatch.fnmatchcase(function.address, self.address))

    def select(self, root, vfs):
        """The attach handle functions this spec selects under ``root``."""
        if self.physical_function or not vfs:
            return [root] if self.matches(root) else []
        if self.matches(root):
            return list(vfs)
        return [vf for vf in vfs if self.matches(vf)]


def parse_device_specs(values):
    """All specs of the ``[pci] device_spec`` values, in order."""
    specs = []
    for text in values:
        specs.extend(DeviceSpec.parse(text))
    return specs


class PciDriver(base.DiscoveryDriver):
    """Report the PCI functions ``[pci] device_spec`` selects."""

    name = 'pci'

    def __init__(self, conf, source):
        super().__init__(conf, source)
        self.specs = parse_device_specs(conf.pci.device_spec)
        self.problems = sources.ProblemLog(LOG)

    def _discover(self):
        functions = self.source.functions()
        by_address = {f.address: f for f in functions}
        vfs = {}
        devices = []
        with self.problems.cycle():
            for f in functions:
                if f.physfn is None:
                    continue
                pf = by_address.get(f.physfn)
                if pf is None or pf.physfn is not None:
                    if any(spec.matches(f) for spec in self.specs):
                        self.problems.warning(
                            'Skipping VF %s: its physical function %s is '
                            'not a PCI function of this host', f.address,
                            f.physfn)
                    continue
                vfs.setdefault(f.physfn, []).append(f)
            for root in functions:
                if root.physfn is not None:
                    continue
                for spec in self.specs:
                    handles = spec.select(root, vfs.get(root.address, ()))
                    if handles:
                        devices.append(self._device(root, spec, handles))
                        break
        return devices

    def _is_qat(self, function):
        return (function.vendor_id == '8086' and
                function.product_id in QAT_PFS)

    def _qat_dir(self, address):
        return sources.sysfs_attr_path(self.sysfs_root, address, 'qat')

    def _qat_traits(self, root):
        """The service trait of a QAT PF (none when not shown)."""
        if not self._is_qat(root):
            return set()
        text = sources.read_file(os.path.join(self._qat_dir(root.address),
                                              'cfg_services'))
        if text is None:
            return set()
        try:
            return {qat_trait(text)}
        except ValueError as exc:
            self.problems.warning('QAT device %s: %s; it is reported '
                                  'without a service trait', root.address,
                                  exc)
            return set()

    def health(self, device):
        """The PCI checks, and a QAT PF's ``qat/state``, ``qat_ras``
        counters and heartbeat."""
        observation = super().health(device)
        if observation.gone or device.vendor != '8086' or \
                device.model not in QAT_HEARTBEAT_PFS:
            return observation
        problems, unreadable, fatal = [], [], []
        try:
            if device.model in QAT_PFS:
                state = pci_health.read(os.path.join(
                    self._qat_dir(device.address), 'state'))
                if state is not None and state != 'up':
                    problems.append('QAT device state is %r, not up'
                                    % state[:32])
                fatal = self._qat_ras(device.address)
            # ``discover`` (read_only) starts no privileged daemon.
            beats = () if getattr(self, 'read_only', False) else \
                privileged.qat_heartbeat(self.sysfs_root, device.address)
            for name, status in beats:
                if status != '0':
                    problems.append('QAT heartbeat status is %r: the device '
                                    'is unresponsive (%s)' % (status[:16],
                                                              name))
        except pci_health.Unreadable as exc:
            unreadable.append(str(exc))
        except (OSError, exception.InvalidArgument) as exc:
            unreadable.append('QAT heartbeat of %s: %s' % (device.address,
                                                           exc))
        return dataclasses.replace(
            observation,
            problems=observation.problems + tuple(problems),
            fatal=tuple(sorted(observation.fatal + tuple(fatal))),
            unreadable=observation.unreadable + tuple(unreadable))

    def _qat_ras(self, address):
        """``[(key, errors_fatal)]`` for the monitor's baseline; rises of
        the other counters are logged."""
        ras = sources.sysfs_attr_path(self.sysfs_root, address, 'qat_ras')
        counts = {}
        for name in ('errors_fatal',) + QAT_RAS_LOGGED:
            text = pci_health.read(os.path.join(ras, name))
            if text is not None and text.isdigit():
                counts[name] = int(text)
        seen = getattr(self, '_ras_seen', None)
        if seen is None:
            seen = self._ras_seen = {}
        for name in QAT_RAS_LOGGED:
            before = seen.get((address, name))
            now = counts.get(name)
            if now is not None and before is not None and now > before:
                LOG.warning('QAT device %s: %d new %s (qat_ras/%s)',
                            address, now - before,
                            name.replace('errors_', '').replace('_', '-')
                            + ' error(s)', name)
            if now is not None:
                seen[(address, name)] = now
        if 'errors_fatal' not in counts:
            return []
        return [('%s %s' % (address, pci_health.QAT_FATAL),
                 counts['errors_fatal'])]

    def _device(self, root, spec, handles):
        traits = {os_traits.OWNER_CYBORG}
        traits.update(spec.traits)
        traits.update(self._qat_traits(root))
        if spec.physical_network:
            # As Cyborg's own NIC driver: "CUSTOM_" + the name, upper case.
            traits.add(os_traits.normalize_name(spec.physical_network))
        if spec.live_migratable:
            traits.add(os_traits.HW_PCI_LIVE_MIGRATABLE)
        for function in handles:
            traits.update(pci_traits(function))
        deployable = model.Deployable(
            name=root.address,
            resource_class=spec.resource_class,
            num_accelerators=len(handles),
            traits=tuple(sorted(traits)),
            attach_handles=tuple(model.AttachHandle(
                'PCI', f.address, physical_network=spec.physical_network)
                for f in handles),
            driver_name=self.name)
        return model.Device(
            type='PCI', vendor=root.vendor_id, model=root.product_id,
            address=root.address, deployables=(deployable,),
            std_board_info=(('class', root.class_id),
                            ('product_id', root.product_id)),
            driver_name=self.name)
