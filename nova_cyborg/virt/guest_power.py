"""Power a server's libvirt guest off, and on again through the guard.

A guest that runs holds its mediated devices open: the kernel refuses to
remove an mdev in use, and so does the sidecar (sidecar.program.mdev), so
Cyborg cannot delete the ARQ of a vGPU a running guest has. A revert of a
resize or cold migration deletes the destination's ARQs before the
destination's guest is destroyed (:func:`nova_cyborg.move.
revert_at_destination`): such a guest is powered off first, and started
again when the ARQs stay after all, checked by the guard as every start.
"""

from nova import exception as nova_exception
from oslo_log import log as logging

from nova_cyborg.virt import guard

LOG = logging.getLogger(__name__)


def stop(driver, instance):
    """Power the instance's guest off if it runs; True if it did."""
    try:
        guest = driver._host.get_guest(instance)
    except nova_exception.InstanceNotFound:
        return False
    if not guest.is_active():
        return False
    guest.poweroff()
    return True


def start(driver, context, instance):
    """Start the guest :func:`stop` powered off, with exactly the devices
    of its ARQs still Bound here, as every start is
    (:func:`nova_cyborg.virt.guard.checked_guest`): one whose ARQ went
    while it was off is not given back its device. Never raises: a guest
    that cannot start (or whose devices cannot be checked) stays off, with
    a warning (Nova's power state sync then sees it)."""
    try:
        guard.checked_guest(driver, context, instance,
                            driver._host.get_guest(instance)).launch()
    except Exception as e:  # noqa: B902 (the caller's failure comes first)
        LOG.warning('Could not start the guest again: %s; it stays powered '
                    'off', e, instance=instance)
