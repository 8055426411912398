"""Accelerators in the libvirt driver.

Nova's ``LibvirtDriver`` is patched to call these functions, through
nova_cyborg.hooks.libvirt, where upstream reads ``accel_info`` itself:

* ``_get_guest_config``: :func:`pci_arqs` replaces the filtering of
  ``accel_info`` by ``attach_handle_type``;
* ``_guest_add_accel_pci_devices``: :func:`add_pci_hostdevs`;
* ``_allocate_cyborg_mdevs`` (Nova 34; on Nova 33, where the driver
  makes no Cyborg mdevs, ``spawn`` and ``_hard_reboot``):
  :func:`allocate_mdevs`;
* ``suspend`` and ``resume``: :func:`detach_pci_hostdevs` and
  :func:`attach_pci_hostdevs`.

This module only takes data: the ARQs are read from Cyborg by the hook
(nova_cyborg.hooks.libvirt.accel_info, through nova_cyborg.flows.move.resize),
never here.

Each function validates the whole of ``accel_info`` before it acts, so an ARQ
with a hostile or unsupported attach handle fails the operation with
InvalidAttachHandle and leaves the guest config and the host untouched.
Only parsed, bounded values reach the domain XML and libvirt.
"""

from oslo_log import log as logging

from nova import exception as nova_exception
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import guest as libvirt_guest
from nova.virt.libvirt import utils as libvirt_utils

from nova_cyborg import compat
from nova_cyborg import exception
from nova_cyborg.model import attach_handle
from nova_cyborg.model.objects import accelerator_request as arq_obj
from nova_cyborg.virt import domain_devices

LOG = logging.getLogger(__name__)


def _validate(accel_info, instance=None):
    try:
        return attach_handle.validate_for_attach(accel_info)
    except exception.InvalidAttachHandle:
        # oslo.log appends the exception being handled to an ERROR record.
        if instance is not None:
            LOG.error('Refusing the accelerators of instance %s',
                      instance.uuid)
        raise


def validated(accel_info):
    """The AcceleratorRequests of ``accel_info``, strictly validated.

    :raises: InvalidAttachHandle
    """
    return _validate(accel_info)


def pci_arqs(instance, accel_info):
    """Return the ARQs of ``accel_info`` to pass through as PCI hostdevs.

    MDEV ARQs are left to :func:`allocate_mdevs`. Any other attach handle
    type (``TEST_PCI`` from Cyborg's fake driver, an unknown one, or one not
    in ``[nova_cyborg] allowed_attach_types``) is refused, never ignored.

    :param instance: the instance the guest config is built for.
    :param accel_info: list of ARQ dicts from Cyborg, or None.
    :returns: the PCI entries of ``accel_info``, as given.
    :raises: InvalidAttachHandle
    """
    arqs = _validate(accel_info, instance)
    return [raw for raw, arq in zip(accel_info or (), arqs)
            if arq.attach_type == arq_obj.ATTACH_TYPE_PCI]


def _hostdev(handle):
    """The ``<hostdev type='pci'>`` of a validated PCI attach handle.

    ``managed`` is the handle's (validated: 'yes' or 'no'): 'no' for a
    function that must stay on its host driver, as an NVIDIA vGPU 17 VF
    on ``nvidia``, which libvirt would otherwise detach (losing its vGPU).
    """
    dev = vconfig.LibvirtConfigGuestHostdevPCI()
    dev.domain, dev.bus, dev.slot, dev.function = handle.address.hex_parts
    dev.managed = handle.managed
    return dev


def hostdev_config(arq):
    """The ``<hostdev>`` config of a validated AcceleratorRequest: its PCI
    function, or its mediated device (which must exist when the guest
    starts: :func:`allocate_mdevs`)."""
    if arq.attach_type == arq_obj.ATTACH_TYPE_MDEV:
        dev = vconfig.LibvirtConfigGuestHostdevMDEV()
        dev.uuid = arq.attach_handle.uuid
        return dev
    return _hostdev(arq.attach_handle)


def add_pci_hostdevs(guest, accel_info):
    """Add a PCI ``<hostdev>`` to ``guest`` per PCI ARQ, managed as its
    attach handle says.

    :param guest: a LibvirtConfigGuest.
    :param accel_info: ARQ dicts (or AcceleratorRequests); MDEV ones are
        skipped, as :func:`allocate_mdevs` handles them.
    :raises: InvalidAttachHandle, before any device is added.
    """
    for arq in _validate(accel_info):
        if arq.attach_type == arq_obj.ATTACH_TYPE_PCI:
            guest.add_device(_hostdev(arq.attach_handle))


def _libvirt():
    # Nova's driver imports the libvirt binding lazily into its module
    # global (and nova's LibvirtFixture replaces that global with
    # fakelibvirt), so the error class and codes are looked up there, at
    # call time: importing the driver module at import time would be
    # circular, as the driver imports this module.
    from nova.virt.libvirt import driver as libvirt_driver
    return libvirt_driver.libvirt


def allocate_mdevs(driver, accel_info):
    """Create the mediated devices of the MDEV ARQs that do not exist yet.

    Same behaviour as upstream ``LibvirtDriver._allocate_cyborg_mdevs``
    (look the mdev node device up by name, create it on its parent with the
    ARQ's attach handle UUID if libvirt does not know it), from validated
    data only.

    :param driver: the LibvirtDriver.
    :param accel_info: list of ARQ dicts from Cyborg, or None.
    :returns: list of the mdev UUIDs, in ARQ order.
    :raises: InvalidAttachHandle, before any mdev is created.
    """
    arqs = _validate(accel_info)
    libvirt = _libvirt()
    mdevs = []
    for arq in arqs:
        if arq.attach_type != arq_obj.ATTACH_TYPE_MDEV:
            continue
        handle = arq.attach_handle
        parent = handle.address.libvirt_name
        domain, bus, slot, function = handle.address.hex_parts
        compat.warn_if_nova_managed(driver, {
            'domain': domain, 'bus': bus, 'device': slot,
            'function': function, 'asked_type': handle.mdev_type})
        # mdev_<uuid>_<parent address>, as upstream builds it (nova's
        # mdev_uuid2name(uuid, parent) would drop the underscore).
        name = '%s_%s_%s_%s_%s' % (libvirt_utils.mdev_uuid2name(handle.uuid),
                                   domain, bus, slot, function)
        try:
            driver._host.device_lookup_by_name(name)
        except libvirt.libvirtError as ex:
            if ex.get_error_code() != libvirt.VIR_ERR_NO_NODE_DEVICE:
                raise
            LOG.info('Creating mdev %s of type %s on %s for ARQ %s',
                     handle.uuid, handle.mdev_type, parent, arq.uuid)
            driver._create_mdev(parent, handle.mdev_type, uuid=handle.uuid)
        mdevs.append(handle.uuid)
    return mdevs


def _pci_addresses(guest):
    return {(dev.domain, dev.bus, dev.slot, dev.function)
            for dev in guest.get_all_devices(
                devtype=vconfig.LibvirtConfigGuestHostdevPCI)}


def _hex_key(parts):
    return domain_devices.pci_key(*parts)[1]


def define(driver, xml):
    """Define (or redefine) a guest from ``xml``; return its Guest."""
    return libvirt_guest.Guest.create(xml, driver._host)


def detach_pci_hostdevs(guest, accel_info, persistent=False):
    """Unplug the guest's PCI accelerators from the running domain.

    Suspend saves the guest's memory, which libvirt refuses while a PCI
    device is passed through (upstream detaches Nova's own PCI devices
    there, not the accelerators). Only the live domain changes: its
    definition keeps the devices, and :func:`attach_pci_hostdevs` plugs
    them back after resume.

    With ``persistent`` the definition loses them too, or a later start
    from it (soft reboot, unrescue) would give the guest a device another
    server may hold by then (removeAccelerator uses
    :func:`remove_pci_hostdevs`, which waits for the guest).

    :param guest: a nova.virt.libvirt.guest.Guest.
    :raises: InvalidAttachHandle before anything is unplugged;
        PciDeviceDetachFailed if a device is still there afterwards.
    """
    devices = [_hostdev(arq.attach_handle)
               for arq in _validate(accel_info)
               if arq.attach_type == arq_obj.ATTACH_TYPE_PCI]
    for dev in devices:
        guest.detach_device(dev, persistent=persistent, live=True)
    _check_detached(guest, devices, persistent)


def _device_conf(guest, key):
    """What Nova's ``_detach_with_retry`` wants: the function that finds
    the hostdev of ``key`` in the live domain or, with
    ``from_persistent_config``, in the definition (None: not there)."""
    def find(from_persistent_config=False):
        for dev in guest.get_all_devices(
                devtype=vconfig.LibvirtConfigGuestHostdevPCI,
                from_persistent_config=from_persistent_config):
            if _hex_key((dev.domain, dev.bus, dev.slot, dev.function)) == key:
                return dev
        return None
    return find


def remove_pci_hostdevs(driver, guest, instance, accel_info):
    """removeAccelerator on a running guest: unplug its PCI accelerators
    from the definition and the live domain as Nova detaches its own
    devices (``LibvirtDriver._detach_with_retry``): the definition at
    once, the live domain waiting for libvirt's device-removed event up to
    ``[libvirt] device_detach_timeout`` seconds and trying again up to
    ``[libvirt] device_detach_attempts`` times, for a guest slow to let
    go. A device already gone from one of the two is detached from the
    other only, so a retry after such a guest finishes the job. A live
    device libvirt gave no alias (Nova's fakelibvirt; libvirt names every
    live device) has no event to wait for: it is detached from both at
    once, as :func:`detach_pci_hostdevs` does.

    :raises: InvalidAttachHandle before anything is unplugged;
        PciDeviceDetachFailed if a device is still in either afterwards.
    """
    devices = [_hostdev(arq.attach_handle)
               for arq in _validate(accel_info)
               if arq.attach_type == arq_obj.ATTACH_TYPE_PCI]
    for dev in devices:
        parts = (dev.domain, dev.bus, dev.slot, dev.function)
        remove_device(driver, guest, instance, dev,
                      _device_conf(guest, _hex_key(parts)),
                      '%s:%s:%s.%s' % parts)
    _check_detached(guest, devices, persistent=True)


def remove_device(driver, guest, instance, dev, find, name):
    """Remove one device from a running guest's definition and live
    domain (:func:`remove_pci_hostdevs`, per device).

    :param dev: the device's config, detached as it is where the live
        device has no alias.
    :param find: ``find(from_persistent_config=False)`` returns the
        device's config in the live domain or the definition, or None.
    :param name: the device as an operator reads it.
    :raises: PciDeviceDetachFailed if the guest did not let go of it.
    """
    live = find()
    if live is not None and live.alias is None:
        guest.detach_device(dev, persistent=True, live=True)
        return
    try:
        driver._detach_with_retry(guest, instance.uuid, find, name)
    except nova_exception.DeviceNotFound:
        return  # in neither: nothing to detach
    except nova_exception.DeviceDetachFailed as e:
        raise nova_exception.PciDeviceDetachFailed(
            reason=e.format_message(), dev=name)


def _check_detached(guest, devices, persistent):
    present = {_hex_key(parts) for parts in _pci_addresses(guest)}
    if persistent:
        present |= {value for _kind, value in domain_devices.keys_in(
            guest.get_xml_desc(dump_inactive=True))}
    for dev in devices:
        parts = (dev.domain, dev.bus, dev.slot, dev.function)
        if _hex_key(parts) in present:
            raise nova_exception.PciDeviceDetachFailed(
                reason='still in the domain after detach',
                dev='%s:%s:%s.%s' % parts)


def attach_pci_hostdevs(guest, accel_info, persistent=False):
    """Plug the guest's PCI accelerators back into the running domain.

    Devices the domain already has are left alone, so this is safe after
    a restore whose saved domain kept them. addAccelerator passes
    ``persistent``: the definition gets them too, so that every later
    start keeps them; each of the two gets only what it lacks (libvirt
    refuses the whole call for a device already in the definition, "already
    in the domain configuration", or already live).

    :param guest: a nova.virt.libvirt.guest.Guest.
    :raises: InvalidAttachHandle before anything is plugged.
    """
    arqs = _validate(accel_info)
    live = {_hex_key(parts) for parts in _pci_addresses(guest)}
    saved = None
    for arq in arqs:
        if arq.attach_type != arq_obj.ATTACH_TYPE_PCI:
            continue
        dev = _hostdev(arq.attach_handle)
        key = _hex_key((dev.domain, dev.bus, dev.slot, dev.function))
        if persistent and saved is None:
            saved = {value for _kind, value in domain_devices.keys_in(
                guest.get_xml_desc(dump_inactive=True))}
        to_live = key not in live
        to_config = persistent and key not in saved
        if not (to_live or to_config):
            continue
        LOG.info('Plugging accelerator %(bdf)s into the guest (%(where)s)',
                 {'bdf': arq.attach_handle.address.bdf,
                  'where': ' and '.join(
                      where for where, wanted in (('live', to_live),
                                                  ('definition', to_config))
                      if wanted)})
        guest.attach_device(dev, persistent=to_config, live=to_live)
