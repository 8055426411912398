"""One NVIDIA vGPU 17 card (vendor-specific VFIO) as the gpu driver
reports it: how many vGPUs of a type the card hosts, and its deployables.

Type names come from :mod:`gpu_vfio_names`.

Capacity. A VF hosts one vGPU; how many a GPU hosts is the type's
"Maximum vGPUs per GPU" of NVIDIA's vGPU user guide ("Virtual GPU Types
for Supported GPUs"), for a time-sliced type the GPU's framebuffer over
the type's (H100 80 GB: ``NVIDIA H100-20C``, 20 GB, 4 per GPU). The driver
publishes no count in sysfs for vGPU 17, but it names every type of the
card on an empty card, the largest (``H100-80C``, 1 per GPU) being the
whole framebuffer; :func:`max_instances` uses ``[gpu]
mdev_max_instances`` (keyed by the type name) where it names the type,
else the framebuffer over the type's, the framebuffer being the larger
of the card's largest known type and :data:`FRAMEBUFFER_GB` (the guide's
board sizes; a board it lacks, first seen with vGPUs on it, is under-,
never over-offered until the option says more), and last, for a type
without a size in its name (MIG-backed), the VFs listing it now, with a
warning. Never more than the VFs that may take it: one vGPU per VF.

Deployables. Every type of ``[gpu] vfio_vgpu_types`` the card names is one
VGPU deployable of the card (``<PF>_<type>``) of that capacity, with a
vendor-VFIO MDEV handle per VF it may go to: the idle VFs and those given
the type at bind. Its size stays as the card fills (a VF given the type
keeps its handle), so its provider never comes and goes. NVIDIA runs one
type per GPU at a time (the user guide's homogeneous, equal-size mode:
once a vGPU exists, only its type is creatable): an empty card offers
every configured type it names, so each is reachable; once one VF holds a
type, only that type's deployable is reported, and the others come back
when the card is empty again. Two binds of two types racing on an empty
card are serialised under the card's lock, the second refused cleanly
(Nova reschedules). A VF an operator typed keeps its own deployable with a
PCI handle, and counts against its type's capacity.
"""

import re

import os_resource_classes as orc
import os_traits

from sidecar import model
from sidecar.drivers import gpu_passthrough
from sidecar.drivers import gpu_vfio
from sidecar.drivers import gpu_vfio_names

#: ``NVIDIA H100-20C`` -> 20 (GB): a time-sliced type's framebuffer.
#: MIG-backed types (``NVIDIA H100-1-10C``) never match.
_SIZE = re.compile(r'^\S+ [A-Za-z0-9]+-([0-9]{1,3})[A-Z]{1,2}$')
#: Framebuffer (GB) of boards whose vGPU 17 types NVIDIA's vGPU user guide
#: lists ("Virtual GPU Types for Supported GPUs"), by PCI product id
#: (pci.ids): used when the card's own type names do not say it.
FRAMEBUFFER_GB = {
    '2330': 80,  # GH100 [H100 SXM5 80GB]
    '2331': 80,  # GH100 [H100 PCIe]
    '2321': 94,  # GH100 [H100 NVL]
    '2335': 141,  # GH100 [H200 SXM 141GB]
    '26b5': 48,  # AD102GL [L40]
    '26b9': 48,  # AD102GL [L40S]
    '27b8': 24,  # AD104GL [L4]
}


def type_size(name):
    """Framebuffer (GB) of time-sliced type ``name``, or None."""
    match = _SIZE.match(name or '')
    return int(match.group(1)) if match else None


def max_instances(name, product, names, listing, overrides, problems, pf):
    """How many vGPUs of type ``name`` card ``pf`` hosts (before counting
    its VFs): see the module's doc. ``names`` are the card's known type
    names, ``listing`` how many of its VFs list the type now."""
    if name in overrides:
        return overrides[name]
    size = type_size(name)
    # The largest type a card named is at most its framebuffer (all of it
    # when the card was seen empty); the guide's board size, where known,
    # is all of it.
    sizes = [s for s in map(type_size, names) if s]
    sizes.append(FRAMEBUFFER_GB.get(product, 0))
    framebuffer = max(sizes)
    if size and framebuffer and framebuffer >= size:
        return framebuffer // size
    problems.warning(
        'GPU %s: how many %s it hosts is unknown (not a time-sliced type '
        'name, no larger type known): offering the %d VFs listing it; set '
        '[gpu] mdev_max_instances to %s:<count>', pf, name, listing, name)
    return listing


def slug(name):
    """``NVIDIA H100-20C`` -> ``H100_20C``: a deployable name's tail."""
    words = name.split()
    return os_traits.normalize_name(
        words[1] if len(words) > 1 else name)[len('CUSTOM_'):]


def _deployable(name, vf, trait, handles, count):
    return model.Deployable(
        name=name, resource_class=orc.VGPU, num_accelerators=count,
        traits=tuple(sorted({os_traits.OWNER_CYBORG, trait,
                             gpu_passthrough.numa_trait(vf)} - {None})),
        attach_handles=tuple(handles), driver_name='nvidia'
        if vf.vendor_id == '10de' else vf.vendor_id)


def card_deployables(pf, vfs, names, set_at_bind, offered, overrides,
                     trait_of, problems):
    """The deployables of vGPU 17 card ``pf`` (module doc).

    :param vfs: its selected VFs on the vendor-VFIO framework.
    :param names: its ``{type id: name}`` (:class:`KnownNames`).
    :param set_at_bind: ``{VF: (type id, name)}`` given at bind.
    :param offered: the type names ``[gpu] vfio_vgpu_types`` names for its
        product, in option order.
    :param trait_of: ``(vf, name, type id) -> trait``.
    :returns: ``(deployables, idle VFs not offered)``.
    """
    deployables = []
    at_bind = {}   # name: VFs holding it (or to hold it again) from a bind
    operator = {}  # name: VFs an operator typed
    idle = []
    for vf in vfs:
        current = vf.vendor_vgpu.current
        recorded = set_at_bind.get(vf.address)
        if recorded and str(current) in ('0', recorded[0]):
            # Given at bind; 0 after a host reboot until it is written
            # back (sidecar.program.vgpu_types restore): never idle.
            at_bind.setdefault(recorded[1], []).append(vf)
        elif not current:
            idle.append(vf)
        else:
            name = names.get(str(current))
            if name is None:
                # Never dropped: Cyborg would destroy the handle of the
                # server using it.
                name = gpu_vfio_names.placeholder_name(current)
                problems.warning(
                    'vGPU %s: its type %s was never named by an nvidia/'
                    'creatable_vgpu_types of GPU %s (a full card lists '
                    'none); reported as %r so that its handle stays',
                    vf.address, current, pf, name)
            operator.setdefault(name, []).append((vf, current))
    for name, typed in sorted(operator.items()):
        for vf, current in typed:
            deployables.append(_deployable(
                vf.address, vf, trait_of(vf, name, current),
                (model.AttachHandle('PCI', vf.address, managed='no'),), 1))
    held = set(at_bind) | set(operator)
    by_name = {n: i for i, n in names.items()}
    choices = [n for n in offered if n in by_name and
               (not held or n in held)]
    choices += [n for n in sorted(at_bind) if n not in choices]
    for name in choices:
        bound = at_bind.get(name, [])
        handles = sorted(bound + idle, key=lambda f: f.address)
        listing = sum(1 for f in vfs if (by_name[name], name) in
                      f.vendor_vgpu.creatable) if name in by_name else 0
        limit = max_instances(name, vfs[0].product_id, names.values(),
                              listing, overrides, problems, pf)
        count = max(min(limit - len(operator.get(name, ())), len(handles)),
                    len(bound))
        if count < 1:
            problems.warning('GPU %s: no %s fits beside the vGPUs an '
                             'operator set: not offered', pf, name)
            continue
        deployables.append(_deployable(
            '%s_%s' % (pf, slug(name)), handles[0],
            trait_of(handles[0], name, by_name.get(name, '')),
            [gpu_vfio.set_at_bind_handle(f.address, name) for f in handles],
            count))
    offered_vfs = {h.address for d in deployables for h in d.attach_handles}
    return deployables, [f.address for f in idle
                         if f.address not in offered_vfs]
