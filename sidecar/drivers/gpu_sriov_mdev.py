"""How many vGPUs of an mdev type an SR-IOV GPU hosts whose VFs are mdev
parents (vGPU 16 and earlier on A100, A30, A40, A16).

Each VF hosts at most one vGPU and says ``available_instances`` 1 while
the GPU can host one more, so the VFs alone do not say the GPU's size.
NVIDIA's driver publishes it in each type's ``description``: ``num_heads=1,
frl_config=60, framebuffer=20480M, max_resolution=4096x2400,
max_instance=2`` (NVIDIA Virtual GPU Software User Guide, "Getting the BDF
and Domain of a GPU on a Linux with KVM Hypervisor" and the ``mdevctl
types`` output it shows; KubeVirt reads it the same way: "NVIDIA driver
implements the max_instance attribute via description"). The size is, in
order: ``[gpu] mdev_max_instances`` (an operator's override), the type's
``max_instance``, or, with a warning, what the VFs say, summed; never more
than the VFs offering the type, never less than the vGPUs that exist.
"""

import re

_MAX_INSTANCE = re.compile(r'(?:^|[,\s])max_instance=([0-9]{1,4})(?:$|[,\s])')


def described_max(description):
    """``max_instance`` of an NVIDIA mdev type's ``description``, or
    None when it names none (another vendor's type) or 0."""
    match = _MAX_INSTANCE.search(description or '')
    return int(match.group(1)) or None if match else None


def capacity(pf, parents, overrides, source, problems):
    """The VGPU inventory of GPU ``pf`` for the type its VFs ``parents``
    (``[(vf, MdevType)]``, one type) offer: see the module's doc."""
    type_id = parents[0][1].type_id
    held = sum(len(t.mdevs) for _vf, t in parents)
    limit = overrides.get(type_id)
    if limit is None:
        limit = described_max(source.read_attr(
            parents[0][0].address,
            'mdev_supported_types/%s/description' % type_id))
    if limit is None:
        size = sum(t.capacity for _vf, t in parents)
        problems.warning(
            'GPU %s: mdev type %s says no max_instance in its description '
            'and [gpu] mdev_max_instances has no entry for it, so the VGPU '
            'inventory is what its %d VFs say (%d), which may be more than '
            'the GPU hosts: set [gpu] mdev_max_instances to the count of '
            '%s one GPU fits', pf, type_id, len(parents), size, type_id)
        return size
    return max(min(limit, len(parents)), held)
