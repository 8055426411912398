"""The libvirt driver's side of ``addAccelerator`` and
``removeAccelerator``.

nova-compute (:mod:`nova_cyborg.attach`) decides what a server gets and
asks the virt driver, through two methods the series adds to Nova's
``ComputeDriver`` interface (patch 0024: ``attach_accelerators`` and
``detach_accelerators``, ``NotImplementedError`` by default), to give the
guest the devices. ``LibvirtDriver`` answers with this module:

* a running guest: the PCI functions of the given ARQs are plugged into
  (or unplugged from) the domain and its persistent definition, so every
  later start keeps the change;
* a guest that is not running: its definition, if there is one, is made
  to hold exactly the devices the server is given now
  (:func:`nova_cyborg.virt.guard.checked_guest`); the caller has recorded
  the change first. A server without a definition gets its devices when
  it is next built.
"""

from nova.compute import vm_states
from nova import exception as nova_exception

from nova_cyborg.virt import guard
from nova_cyborg.virt import libvirt as nc_libvirt


def _redefine(driver, context, instance, action):
    try:
        guest = driver._host.get_guest(instance)
    except nova_exception.InstanceNotFound:
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
    if instance.vm_state == vm_states.ACTIVE:
        nc_libvirt.attach_pci_hostdevs(driver._host.get_guest(instance),
                                       accel_info, persistent=True)
    else:
        _redefine(driver, context, instance, 'addAccelerator')


def detach(driver, context, instance, accel_info):
    """Unplug ``accel_info`` from the running guest, or redefine a stopped
    one without the devices the server no longer holds.

    :raises: InvalidAttachHandle, PciDeviceDetachFailed (a device the
        guest did not let go of), GuestDevicesUnchecked.
    """
    if instance.vm_state == vm_states.ACTIVE:
        nc_libvirt.detach_pci_hostdevs(driver._host.get_guest(instance),
                                       accel_info, persistent=True)
    else:
        _redefine(driver, context, instance, 'removeAccelerator')
