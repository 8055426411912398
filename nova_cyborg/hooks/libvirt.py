"""Hooks of ``nova.virt.libvirt.driver`` (patch 0004).

The guest's accelerators are plain data here: ``accel_info`` is the list
of ARQ dicts the compute manager passes to the driver, or, on the paths
where upstream rebuilds the guest without it (rescue, suspend and resume,
host reboot, the end of a resize and of its revert), what
:func:`accel_info` reads through the project's Cyborg service
(nova_cyborg.flows.move.resize). nova_cyborg.virt.libvirt, which builds the
devices, validates that data and never calls Cyborg.
"""

from nova_cyborg.flows.live_migration import compute as live_migration_compute
from nova_cyborg.model import bookkeeping
from nova_cyborg.steps import arqs as arq_steps
from nova_cyborg.virt import guard
from nova_cyborg.virt import hotplug
from nova_cyborg.virt import libvirt as nc_libvirt


def accel_info(context, instance):
    """Called by ``LibvirtDriver.suspend()``, ``resume()``,
    ``resume_state_on_host_boot()`` and ``rescue()``, which upstream run
    without the accelerators (or refuse them).

    :param context: a RequestContext; a service's admin context calls
        Cyborg as the service user.
    :param instance: the nova.objects.Instance.
    :returns: the ARQ dicts bound to the instance on the host it is on
        now, or [] for a server without accelerators.
    """
    return arq_steps.instance_arqs(context, instance)


def guest_xml(driver, context, instance, xml):
    """Called by ``LibvirtDriver._create_guest()`` before the guest is
    defined: every path that defines and starts a guest crosses it.

    :returns: ``xml`` with exactly the devices the guest is given (its
        Bound ARQs here, Nova's own claims); ``xml`` itself when nothing
        changes, as for every server without a ``<hostdev>`` and without
        accelerators.
    :raises: GuestDevicesUnchecked (the start is refused with a fault).
    """
    return guard.checked_xml(driver, context, instance, xml)


def guest_to_relaunch(driver, instance, guest):
    """Called by ``LibvirtDriver._soft_reboot()`` once the guest has shut
    down, before it starts it again from its definition.

    :returns: the Guest to launch: ``guest``, or the guest redefined with
        exactly the devices it is given.
    :raises: GuestDevicesUnchecked
    """
    return guard.checked_guest(driver, None, instance, guest)


def pci_arqs(instance, accel_info):
    """Called by ``LibvirtDriver._get_guest_config()`` instead of its own
    filtering of ``accel_info`` by attach handle type.

    :returns: the PCI ARQs of ``accel_info``.
    :raises: InvalidAttachHandle for an ARQ of another or a hostile type.
    """
    return nc_libvirt.pci_arqs(instance, accel_info)


def add_pci_hostdevs(guest, accel_info):
    """Called by ``LibvirtDriver._guest_add_accel_pci_devices()``.

    :param guest: the LibvirtConfigGuest being built.
    :raises: InvalidAttachHandle, before any device is added.
    """
    nc_libvirt.add_pci_hostdevs(guest, accel_info)


def allocate_mdevs(driver, accel_info):
    """Called by ``LibvirtDriver._allocate_cyborg_mdevs()`` (Nova 34).

    :param driver: the LibvirtDriver.
    :returns: the mdev UUIDs of the MDEV ARQs, created if needed.
    :raises: InvalidAttachHandle, before any mdev is created.
    """
    return nc_libvirt.allocate_mdevs(driver, accel_info)


def detach_pci_hostdevs(guest, accel_info):
    """Called by ``LibvirtDriver.suspend()`` before the memory is saved
    (libvirt refuses to save a guest with a PCI device passed through).

    :param guest: the running nova.virt.libvirt.guest.Guest.
    :param accel_info: what :func:`accel_info` returned, read before any
        device was unplugged.
    :raises: InvalidAttachHandle, PciDeviceDetachFailed
    """
    nc_libvirt.detach_pci_hostdevs(guest, accel_info)


def attach_pci_hostdevs(guest, accel_info):
    """Called by ``LibvirtDriver.resume()``: the accelerators unplugged by
    suspend are plugged back in.

    :raises: InvalidAttachHandle, before anything is plugged.
    """
    nc_libvirt.attach_pci_hostdevs(guest, accel_info)


def attach_accelerators(driver, context, instance, accel_info):
    """Called by ``LibvirtDriver.attach_accelerators()`` (patch 0024, the
    driver method ``addAccelerator`` uses): the devices of ``accel_info``
    go into the running guest and its definition, or a stopped guest's
    definition is made to hold what the server is given now.

    :raises: InvalidAttachHandle, GuestDevicesUnchecked, libvirt's errors.
    """
    hotplug.attach(driver, context, instance, accel_info)


def detach_accelerators(driver, context, instance, accel_info):
    """Called by ``LibvirtDriver.detach_accelerators()`` (patch 0024, the
    driver method ``removeAccelerator`` uses): the devices of
    ``accel_info`` leave the running guest and its definition, or a
    stopped guest's definition loses what the server no longer holds.

    :raises: InvalidAttachHandle, PciDeviceDetachFailed,
        GuestDevicesUnchecked.
    """
    hotplug.detach(driver, context, instance, accel_info)


def accelerators_after_move(driver, context, instance, mdevs):
    """Called by ``LibvirtDriver.finish_migration()`` and
    ``finish_revert_migration()`` before the guest's XML is built:
    upstream refuses to move a server with accelerators.

    :param driver: the LibvirtDriver (its ``_allocate_cyborg_mdevs``).
    :param mdevs: the mdev UUIDs Nova gives the guest.
    :returns: ``(accel_info, mdevs)``: the ARQs bound on this host for the
        guest, and ``mdevs`` with their mdevs added (each once).
    """
    arqs = accel_info(context, instance)
    return arqs, add_accelerator_mdevs(driver, arqs, mdevs)


def add_accelerator_mdevs(driver, accel_info, mdevs):
    """Called by ``LibvirtDriver.spawn()`` and ``_hard_reboot()`` of Nova
    33 (patch 0004a of its series), whose driver makes no mediated devices
    for Cyborg's MDEV attach handles; Nova 34's does it there itself,
    through :func:`allocate_mdevs` (patch 0004a), which this calls too.

    :param accel_info: the ARQ dicts of the guest, or None.
    :param mdevs: the mdev UUIDs Nova gives the guest.
    :returns: ``mdevs`` with the accelerators' mdevs added (each once),
        created if needed.
    :raises: InvalidAttachHandle, before any mdev is created.
    """
    mdevs = list(mdevs)
    if not accel_info:
        return mdevs
    mdevs.extend(mdev for mdev in allocate_mdevs(driver, accel_info)
                 if mdev not in mdevs)
    return mdevs


def live_migration_source_mdevs(driver, context, instance, dest_check_data,
                                instance_mdevs):
    """Called by ``LibvirtDriver.check_can_live_migrate_source()`` (patch
    0020c) with the guest's mdevs, before Nova's own vGPU checks.

    :param dest_check_data: the destination's LibvirtLiveMigrateData.
    :param instance_mdevs: {mdev uuid: instance uuid} of the guest.
    :returns: ``instance_mdevs`` without Cyborg's mdevs; unchanged for a
        server without accelerators.
    :raises: MigrationPreCheckError (post-copy permitted, libvirt or QEMU
        too old for the accelerators, accelerators not Bound here).
    """
    if not bookkeeping.has_accelerators(instance):
        return instance_mdevs
    return live_migration_compute.source_check(
        driver, context, instance, dest_check_data, instance_mdevs)


def pre_live_migration(driver, context, instance, migrate_data):
    """Called by ``LibvirtDriver.pre_live_migration()`` on the destination
    before it returns (patch 0020c).

    :returns: ``migrate_data`` with the accelerators' PCI addresses and
        mdev UUIDs remapped (``pci_dev_map_src_dst``, ``target_mdevs``) and
        the destination's mdevs created; unchanged for a server without
        accelerators.
    :raises: MigrationError saying why the accelerators cannot move here.
    """
    if not bookkeeping.has_accelerators(instance):
        return migrate_data
    return live_migration_compute.pre_live_migration(
        driver, context, instance, migrate_data)
