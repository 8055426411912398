"""When a whole GPU may go to a guest, and its NUMA trait.

VFIO hands a guest a whole IOMMU group: QEMU opens the group, which the
kernel allows only while every member is bound to a VFIO driver, to no
driver, or is a bridge (Documentation/driver-api/vfio.rst, "Groups,
Devices, and IOMMUs"). So a GPU is offered whole only when the other
members of its group are bridges or functions of the same card (its audio
or USB controller, same bus and slot) that no host driver holds; two GPUs
sharing a group (behind a PCIe switch without ACS) are never offered, as
they could go to two guests. A GPU a host driver other than
``[gpu] passthrough_drivers`` holds (``nvidia``, for its own use or
before ``sriov-manage`` made its VFs) is never offered either.
"""

import os_traits

#: PCI base class 0x06: bridges (host, PCI-to-PCI, PCIe ports).
BRIDGE_CLASS = '06'


def numa_trait(function):
    """``CUSTOM_PCI_NUMA_NODE_<n>`` of a function with NUMA affinity, or
    None: what a device profile requires to keep a guest's GPU on the
    NUMA node of its CPUs."""
    if function.numa_node is None:
        return None
    return os_traits.normalize_name('pci_numa_node_%d' % function.numa_node)


def _slot(address):
    return address.rsplit('.', 1)[0]


def groups_of(functions):
    """``{IOMMU group: [functions]}`` of the functions with a group."""
    groups = {}
    for function in functions:
        if function.iommu_group is not None:
            groups.setdefault(function.iommu_group, []).append(function)
    return groups


def refusal(function, groups, drivers):
    """Why the whole ``function`` must not go to a guest, or None.

    :param groups: :func:`groups_of` all the host's functions.
    :param drivers: the drivers a passed-through function may be bound to
        (``[gpu] passthrough_drivers``); no driver is always fine.
    """
    if function.driver is not None and function.driver not in drivers:
        return ('the host driver %s holds it (not one of [gpu] '
                'passthrough_drivers: %s)' % (function.driver,
                                              ', '.join(drivers)))
    if function.iommu_group is None:
        return None
    blockers = []
    for other in groups.get(function.iommu_group, ()):
        if (other.address == function.address or
                other.class_id.startswith(BRIDGE_CLASS)):
            continue
        if _slot(other.address) != _slot(function.address):
            blockers.append('%s (another device)' % other.address)
        elif other.driver is not None and other.driver not in drivers:
            blockers.append('%s (held by %s)' % (other.address,
                                                 other.driver))
    if blockers:
        return ('its IOMMU group %d cannot go to a guest with it: %s' % (
            function.iommu_group, ', '.join(blockers)))
    return None
