"""GPU driver: display and 3D controllers (PCI class 0x03xxxx).

A GPU offering one of ``[gpu] enabled_mdev_types`` (the first, in option
order) is one VGPU Deployable with one MDEV attach handle per instance of
that type; its size is the type's capacity, ``available_instances`` plus
the mdevs of the type that already exist, so creating an mdev for a guest
never shrinks the inventory. Any other GPU is one PGPU Deployable with the
function itself as PCI attach handle; VFs and PFs with VFs are never
offered whole.
"""

import os_resource_classes as orc
import os_traits
from oslo_log import log as logging

from sidecar.drivers import base
from sidecar import model
from sidecar.sources import base as sources

LOG = logging.getLogger(__name__)

#: PCI vendor id -> name used in traits; other vendors go by their id.
VENDOR_NAMES = {'10de': 'nvidia', '102b': 'matrox', '1002': 'amd',
                '8086': 'intel'}
DISPLAY_CLASS = '03'


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


class GpuDriver(base.DiscoveryDriver):
    """Report GPUs as PGPU, or as VGPU for an enabled mdev type."""

    name = 'gpu'

    def __init__(self, conf, source):
        super().__init__(conf, source)
        self.enabled_types = list(conf.gpu.enabled_mdev_types)
        self.problems = sources.ProblemLog(LOG)

    def _discover(self):
        functions = self.source.functions()
        with_vfs = {f.physfn for f in functions if f.physfn is not None}
        offered = set()
        devices = []
        with self.problems.cycle():
            for function in functions:
                if not function.class_id.startswith(DISPLAY_CLASS):
                    continue
                offered.update(t.type_id for t in function.mdev_types)
                device = self._device(function, with_vfs)
                if device is not None:
                    devices.append(device)
            for type_id in self.enabled_types:
                if type_id not in offered:
                    self.problems.warning(
                        '[gpu] enabled_mdev_types names %s, which no GPU of '
                        'this host offers; check the name', type_id)
        return devices

    def _enabled_type(self, function):
        for type_id in self.enabled_types:
            mdev_type = function.mdev_type(type_id)
            if mdev_type is not None:
                return mdev_type
        return None

    def _device(self, function, with_vfs):
        mdev_type = self._enabled_type(function)
        if mdev_type is not None:
            if not mdev_type.capacity:
                self.problems.warning(
                    'Skipping GPU %s: mdev type %s has no instance available '
                    'and none created (is another type in use?)',
                    function.address, mdev_type.type_id)
                return None
            deployable = model.Deployable(
                name=function.address,
                resource_class=orc.VGPU,
                num_accelerators=mdev_type.capacity,
                traits=tuple(sorted((os_traits.OWNER_CYBORG,
                                     gpu_trait(function, mdev_type)))),
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
            deployable = model.Deployable(
                name=function.address,
                resource_class=orc.PGPU,
                num_accelerators=1,
                traits=tuple(sorted((os_traits.OWNER_CYBORG,
                                     gpu_trait(function)))),
                attach_handles=(model.AttachHandle('PCI', function.address),),
                driver_name=vendor_name(function.vendor_id))
        return model.Device(
            type='GPU', vendor=function.vendor_id, model=function.product_id,
            address=function.address, deployables=(deployable,),
            std_board_info=(('class', function.class_id),
                            ('product_id', function.product_id)),
            driver_name=vendor_name(function.vendor_id))
