"""The libvirt driver's side of ``addAccelerator`` and
``removeAccelerator``.

nova-compute (:mod:`nova_cyborg.flows.attach.compute`) decides what a server
gets and asks the virt driver, through two methods the series adds to Nova's
``ComputeDriver`` interface (patch 0024: ``attach_accelerators`` and
``detach_accelerators``, ``NotImplementedError`` by default), to give the
guest the devices. ``LibvirtDriver`` answers with this module:

* a running guest (Nova's state ACTIVE and libvirt's domain running): the
  PCI functions of the given ARQs are plugged into (or unplugged from) the
  domain and its persistent definition, so every later start keeps the
  change;
* a guest that is not running (also one that shut itself down under an
  ACTIVE server): its definition, if there is one, is made
  to hold exactly the devices the server is given now
  (:func:`nova_cyborg.virt.guard.checked_guest`); the caller has recorded
  the change first. A server without a definition gets its devices when
  it is next built.
"""

from nova.compute import vm_states
from nova import exception as nova_exception

from nova_cyborg.virt import guard
from nova_cyborg.virt import libvirt as nc_libvirt


def _guest(driver, instance):
    """The server's libvirt guest, or None without a definition."""
    try:
        return driver._host.get_guest(instance)
    except nova_exception.InstanceNotFound:
        return None


def _running(instance, guest):
    """Whether to plug into the live domain: Nova's state says ACTIVE and
    the domain runs now, as libvirt says (a guest that shut itself down
    under an ACTIVE server has no live domain to plug into: libvirt
    refuses with "domain is not running", and its definition is what its
    next start uses)."""
    return (instance.vm_state == vm_states.ACTIVE and guest is not None and
            guest.is_active())


def _redefine(driver, context, instance, guest, action):
    if guest is None:
        # No definition (yet): the next start builds the guest from the
        # server's ARQs.
        return
    guard.checked_guest(driver, context, instance, guest, asked=action)


def attach(driver, context, instance, accel_info):
    """Plug ``accel_info`` (ARQ dicts, Bound here, PCI functions only for
    a running guest) into the guest, or redefine a stopped one.

    :raises: InvalidAttachHandle before anything is plugged,
        GuestDevicesUnchecked, libvirt's errors.
    """
    guest = _guest(driver, instance)
    if _running(instance, guest):
        nc_libvirt.attach_pci_hostdevs(guest, accel_info, persistent=True)
    else:
        _redefine(driver, context, instance, guest, 'addAccelerator')


def detach(driver, context, instance, accel_info):
    """Unplug ``accel_info`` from the running guest, or redefine a stopped
    one without the devices the server no longer holds.

    :raises: InvalidAttachHandle, PciDeviceDetachFailed (a device the
        guest did not let go of), GuestDevicesUnchecked.
    """
    guest = _guest(driver, instance)
    if _running(instance, guest):
        nc_libvirt.remove_pci_hostdevs(driver, guest, instance, accel_info)
    else:
        _redefine(driver, context, instance, guest, 'removeAccelerator')
