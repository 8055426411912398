"""GPU driver: display and 3D controllers (PCI class 0x03xxxx).

A GPU offering one of ``[gpu] enabled_mdev_types`` (the first, in option
order) is one VGPU Deployable with one MDEV attach handle per instance of
that type; its size is the type's capacity, ``available_instances`` plus
the mdevs of the type that already exist, so creating an mdev for a guest
never shrinks the inventory. Any other GPU is one PGPU Deployable with the
function itself as PCI attach handle; VFs and PFs with VFs are never
offered whole.

Only the GPUs ``[gpu] device_selector`` selects are reported (none without
it), and never the host's own display (a VGA controller with ``boot_vga``
1) or a BMC's display controller (ASPEED, Matrox). A VGPU whose function
loses ``mdev_supported_types`` (its vendor driver unloaded) is still
reported as it was, and its health check finds it unhealthy. A VGPU of
one of ``[gpu] live_migratable_mdev_types`` carries
``HW_PCI_LIVE_MIGRATABLE`` (its vendor driver supports VFIO migration).
"""

import dataclasses
import fnmatch
import re

import os_resource_classes as orc
import os_traits
from oslo_log import log as logging

from sidecar import exception
from sidecar import model
from sidecar.discovery import health as health_mod
from sidecar.drivers import base
from sidecar.drivers import gpu_passthrough
from sidecar.drivers import gpu_sriov_mdev
from sidecar.drivers import gpu_vfio
from sidecar.drivers import gpu_vfio_card
from sidecar.drivers import gpu_vfio_names
from sidecar.sources import base as sources

LOG = logging.getLogger(__name__)

#: PCI vendor id -> name used in traits; other vendors go by their id.
VENDOR_NAMES = {'10de': 'nvidia', '102b': 'matrox', '1002': 'amd',
                '8086': 'intel'}
DISPLAY_CLASS = '03'
VGA_CLASS = '0300'
#: Vendors whose display controllers are BMCs, never accelerators.
BMC_VENDORS = {'1a03': 'ASPEED', '102b': 'Matrox'}
OPTION = '[gpu] device_selector'
_ID = re.compile(r'^(\*|(?:0x)?[0-9a-f]{1,4})$')
_GLOB = re.compile(r'^[0-9a-f*?\[\]!:.-]+$')


def _selector(item):
    """``('id', vendor, product)`` or ``('address', glob)`` of one
    ``[gpu] device_selector`` item; InvalidArgument when it is neither."""
    text = item.strip().lower()
    if '.' in text:
        if not _GLOB.match(text) or text.count(':') > 2:
            raise exception.InvalidArgument(
                name=OPTION, reason='%r is not a PCI address glob' % item)
        return ('address', '*:' * (2 - text.count(':')) + text)
    ids = text.split(':')
    if len(ids) != 2 or not all(_ID.match(i) for i in ids):
        raise exception.InvalidArgument(
            name=OPTION, reason='%r is neither <vendor_id>:<product_id> '
                                '(hex or *) nor a PCI address glob' % item)
    return ('id',) + tuple(i if i == '*' else '%04x' % int(
        i.replace('0x', ''), 16) for i in ids)


def parse_selectors(items):
    return [_selector(item) for item in items if item.strip()]


def parse_max_instances(items):
    """``{mdev type: count}`` of ``[gpu] mdev_max_instances``."""
    result = {}
    for type_id, count in items.items():
        text = (count or '').strip()
        if not text.isdigit() or int(text) < 1:
            raise exception.InvalidArgument(
                name='[gpu] mdev_max_instances',
                reason='%s:%r is not <mdev type>:<count of 1 or more>'
                       % (type_id, count))
        result[type_id.strip()] = int(text)
    return result


def selected(selectors, function):
    for selector in selectors:
        if selector[0] == 'address':
            if fnmatch.fnmatchcase(function.address, selector[1]):
                return True
        elif (selector[1] in ('*', function.vendor_id) and
              selector[2] in ('*', function.product_id)):
            return True
    return False


def vendor_name(vendor_id):
    return VENDOR_NAMES.get(vendor_id, vendor_id)


def type_name(mdev_type):
    """Short name of an mdev type for traits, as cyborg's nvidia driver
    makes it: ``'GRID T4-1B'`` -> ``'T4-1B'``; the type id without name.
    """
    words = (mdev_type.name or '').split()
    if not words:
        return mdev_type.type_id
    return words[1] if len(words) > 1 else words[0]


def gpu_trait(function, mdev_type=None):
    """``CUSTOM_<VENDOR>_<PRODUCT_ID>[_<TYPE NAME>]``, normalized."""
    parts = [vendor_name(function.vendor_id), function.product_id]
    if mdev_type is not None:
        parts.append(type_name(mdev_type))
    return os_traits.normalize_name('_'.join(parts))


def _name_trait(function, name, type_id):
    """:func:`gpu_trait` of a vGPU type named ``name``
    (``'NVIDIA H100-4C'`` -> ``CUSTOM_NVIDIA_2331_H100_4C``)."""
    return gpu_trait(function, sources.MdevType(
        name=name, type_id=str(type_id), available_instances=0,
        device_api=''))


class GpuDriver(base.DiscoveryDriver):
    """Report GPUs as PGPU, or as VGPU for an enabled mdev type."""

    name = 'gpu'

    def __init__(self, conf, source):
        super().__init__(conf, source)
        self.enabled_types = list(conf.gpu.enabled_mdev_types)
        self.migratable_types = frozenset(
            conf.gpu.live_migratable_mdev_types)
        self.selectors = parse_selectors(conf.gpu.device_selector)
        self.max_instances = parse_max_instances(conf.gpu.mdev_max_instances)
        self.passthrough_drivers = tuple(conf.gpu.passthrough_drivers)
        self.vfio_offers = gpu_vfio.parse_offers(conf.gpu.vfio_vgpu_types)
        self.state_path = conf.sidecar.state_path
        self.problems = sources.ProblemLog(LOG)
        #: vGPU 17 type names, in memory until :meth:`keep_names`.
        self._known_names = gpu_vfio_names.KnownNames(None, self.problems)
        self._vgpus = {}  # address: the VGPU Device last reported

    def keep_names(self):
        """Keep vGPU 17 type names under ``[sidecar] state_path``
        (:mod:`gpu_vfio_names`): the daemon's driver does; ``manage
        discover``'s, which writes nothing, does not."""
        self._known_names = gpu_vfio_names.KnownNames(self.state_path,
                                                      self.problems)

    def _host_display(self, function):
        """Why ``function`` is the host's own display, or None."""
        if function.vendor_id in BMC_VENDORS:
            return 'the %s BMC display controller' % (
                BMC_VENDORS[function.vendor_id])
        if (function.class_id.startswith(VGA_CLASS) and
                self.source.read_attr(function.address, 'boot_vga') == '1'):
            return 'the host\'s boot display (boot_vga is 1)'
        return None

    def _discover(self):
        functions = self.source.functions()
        with_vfs = {f.physfn for f in functions if f.physfn is not None}
        offered = set()
        devices = []
        vgpus = {}
        vfio_vfs = {}  # PF address: its vendor-VFIO VFs, selected
        mdev_vfs = {}  # PF address: its VFs that are mdev parents
        groups = gpu_passthrough.groups_of(functions)
        with self.problems.cycle():
            if not self.selectors:
                self.problems.warning(
                    'The gpu driver reports no GPU: %s is empty', OPTION)
                return devices
            for function in functions:
                if not function.class_id.startswith(DISPLAY_CLASS):
                    continue
                if not selected(self.selectors, function):
                    LOG.debug('GPU %s is not selected by %s', function.address,
                              OPTION)
                    continue
                display = self._host_display(function)
                if display:
                    self.problems.warning(
                        'Not reporting GPU %s: it is %s, never an '
                        'accelerator, even though %s selects it',
                        function.address, display, OPTION)
                    continue
                if (function.is_vf and function.vendor_vgpu is not None and
                        function.vendor_vgpu.current is not None):
                    vfio_vfs.setdefault(function.physfn, []).append(function)
                    continue
                offered.update(t.type_id for t in function.mdev_types)
                if function.is_vf and function.mdev_types:
                    mdev_vfs.setdefault(function.physfn, []).append(function)
                    continue
                device = self._device(function, with_vfs, groups)
                last = self._vgpus.get(function.address)
                if last is not None and not function.mdev_types:
                    # Its mdev support went away: keep it as it was, the
                    # health check holds it.
                    device = last
                if device is not None:
                    devices.append(device)
                    if any(dep.resource_class == orc.VGPU
                           for dep in device.deployables):
                        vgpus[function.address] = device
            self._vgpus = vgpus
            catalog = gpu_vfio.type_catalog(functions, self.problems)
            set_at_bind = (gpu_vfio.read_set_at_bind(self.state_path,
                                                     self.problems)
                           if vfio_vfs else {})
            for pf in sorted(vfio_vfs):
                device = self._vfio_device(pf, vfio_vfs[pf],
                                           catalog.get(pf, {}), set_at_bind)
                if device is not None:
                    devices.append(device)
            for pf in sorted(mdev_vfs):
                device = self._sriov_mdev_device(pf, mdev_vfs[pf])
                if device is not None:
                    devices.append(device)
            for type_id in self.enabled_types:
                if type_id not in offered:
                    self.problems.warning(
                        '[gpu] enabled_mdev_types names %s, which no GPU of '
                        'this host offers; check the name', type_id)
            for type_id in sorted(self.migratable_types -
                                  set(self.enabled_types)):
                self.problems.warning(
                    '[gpu] live_migratable_mdev_types names %s, which is not '
                    'in [gpu] enabled_mdev_types: ignored', type_id)
        return devices

    def health(self, device):
        """Besides the PCI checks: a VGPU's parent still offers mdevs, a
        vGPU 17 VF still has its vGPU."""
        observation = super().health(device)
        set_at_bind = (gpu_vfio.read_set_at_bind(self.state_path)
                       if any(h.vendor_vfio for dep in device.deployables
                              for h in dep.attach_handles) else {})
        problems = (health_mod.mdev_problems(self.sysfs_root, device) +
                    gpu_vfio.problems(self.sysfs_root, device, set_at_bind))
        if observation.gone or not problems:
            return observation
        return dataclasses.replace(
            observation, problems=observation.problems + problems)

    def _vfio_device(self, pf, vfs, names, set_at_bind):
        """One GPU Device for the card at ``pf`` whose VFs ``vfs`` are in
        NVIDIA's vendor-specific VFIO framework (vGPU 17+), passed through
        by Nova with ``managed='no'`` (so that libvirt leaves them on
        ``nvidia``, which holds the vGPU): a VGPU deployable per VF an
        operator typed (PCI handle), and one per type ``[gpu]
        vfio_vgpu_types`` offers on the card, of the type's capacity, with
        a vendor-VFIO MDEV handle (:func:`gpu_vfio.set_at_bind_handle`)
        per VF it may be set on at bind (:mod:`gpu_vfio_card`)."""
        first = vfs[0]
        names = self._known_names.merge(pf, first.product_id, names)
        deployables, free = gpu_vfio_card.card_deployables(
            pf, vfs, names, set_at_bind,
            self.vfio_offers.get(first.product_id, ()), self.max_instances,
            _name_trait, self.problems)
        if free:
            self.problems.info(
                'GPU %s: VFs %s have no vGPU type (nvidia/current_vgpu_type '
                'is 0) and are not offered: write a type id from their '
                'nvidia/creatable_vgpu_types, or name a type the card can '
                'host in %s', pf, ', '.join(free), gpu_vfio.OFFER_OPTION)
        if not deployables:
            return None
        return model.Device(
            type='GPU', vendor=first.vendor_id, model=first.product_id,
            address=pf, deployables=tuple(deployables),
            std_board_info=(('class', first.class_id),
                            ('product_id', first.product_id)),
            driver_name=vendor_name(first.vendor_id))

    def _sriov_mdev_device(self, pf, vfs):
        """One GPU Device for the SR-IOV GPU at ``pf`` whose VFs ``vfs``
        are mdev parents (vGPU 16 and earlier): one VGPU deployable for
        the first enabled type its VFs offer, of what the GPU can host
        (:func:`gpu_sriov_mdev.capacity`), with an MDEV attach handle per
        VF offering it (each VF hosts at most one vGPU). Its size stays
        as the GPU fills (its free VFs then say 0)."""
        mdev_type = None
        for type_id in self.enabled_types:
            parents = [(vf, vf.mdev_type(type_id)) for vf in vfs
                       if vf.mdev_type(type_id) is not None]
            if parents:
                mdev_type = parents[0][1]
                break
        if mdev_type is None:
            LOG.debug('GPU %s: its VFs offer no enabled mdev type: not '
                      'reported', pf)
            return None
        type_id = mdev_type.type_id
        size = gpu_sriov_mdev.capacity(pf, parents, self.max_instances,
                                       self.source, self.problems)
        if not size:
            self.problems.warning(
                'Skipping GPU %s: mdev type %s has no instance available '
                'and none created (is another type in use?)', pf, type_id)
            return None
        first = parents[0][0]
        traits = {os_traits.OWNER_CYBORG, gpu_trait(first, mdev_type)}
        if type_id in self.migratable_types:
            traits.add(os_traits.HW_PCI_LIVE_MIGRATABLE)
        deployable = model.Deployable(
            name=pf, resource_class=orc.VGPU, num_accelerators=size,
            traits=tuple(sorted(traits)),
            attach_handles=tuple(model.AttachHandle('MDEV', vf.address,
                                                    type_id)
                                 for vf, _t in parents),
            driver_name=vendor_name(first.vendor_id))
        return model.Device(
            type='GPU', vendor=first.vendor_id, model=first.product_id,
            address=pf, deployables=(deployable,),
            std_board_info=(('class', first.class_id),
                            ('product_id', first.product_id)),
            driver_name=vendor_name(first.vendor_id))

    def _enabled_type(self, function):
        for type_id in self.enabled_types:
            mdev_type = function.mdev_type(type_id)
            if mdev_type is not None:
                return mdev_type
        return None

    def _device(self, function, with_vfs, groups):
        mdev_type = self._enabled_type(function)
        if mdev_type is not None:
            if not mdev_type.capacity:
                self.problems.warning(
                    'Skipping GPU %s: mdev type %s has no instance available '
                    'and none created (is another type in use?)',
                    function.address, mdev_type.type_id)
                return None
            traits = {os_traits.OWNER_CYBORG, gpu_trait(function, mdev_type)}
            if mdev_type.type_id in self.migratable_types:
                traits.add(os_traits.HW_PCI_LIVE_MIGRATABLE)
            deployable = model.Deployable(
                name=function.address,
                resource_class=orc.VGPU,
                num_accelerators=mdev_type.capacity,
                traits=tuple(sorted(traits)),
                attach_handles=tuple(
                    model.AttachHandle('MDEV', function.address,
                                       mdev_type.type_id, instance=index)
                    for index in range(mdev_type.capacity)),
                driver_name=vendor_name(function.vendor_id))
        elif function.physfn is not None or function.address in with_vfs:
            LOG.debug('GPU %s is a VF or has VFs and offers no enabled mdev '
                      'type: not reported', function.address)
            return None
        else:
            why = gpu_passthrough.refusal(function, groups,
                                          self.passthrough_drivers)
            if why:
                self.problems.warning('Not offering GPU %s whole: %s',
                                      function.address, why)
                return None
            traits = {os_traits.OWNER_CYBORG, gpu_trait(function),
                      gpu_passthrough.numa_trait(function)} - {None}
            deployable = model.Deployable(
                name=function.address,
                resource_class=orc.PGPU,
                num_accelerators=1,
                traits=tuple(sorted(traits)),
                attach_handles=(model.AttachHandle('PCI', function.address),),
                driver_name=vendor_name(function.vendor_id))
        return model.Device(
            type='GPU', vendor=function.vendor_id, model=function.product_id,
            address=function.address, deployables=(deployable,),
            std_board_info=(('class', function.class_id),
                            ('product_id', function.product_id)),
            driver_name=vendor_name(function.vendor_id))
