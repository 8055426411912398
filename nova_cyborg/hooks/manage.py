"""Hooks of ``nova.cmd.manage`` (patch 0008): ``nova-manage placement
heal_allocations`` heals the accelerators' allocations too (upstream
refuses a server with a device profile, bug 1939020).
"""

from nova_cyborg.flows import heal


def accelerator_allocations(context, instance):
    """Called by ``PlacementCommands._heal_allocations_for_instance()``
    instead of ``ensure_instance_has_no_cyborg_device_profile_request()``.

    :param instance: the nova.objects.Instance.
    :returns: what the server's Bound ARQs hold,
        ``{rp_uuid: {'resources': {rc: amount}}}``; ``{}`` without them.
    """
    return heal.accelerator_allocations(context, instance)


def add_accelerator_allocations(command, instance, allocations,
                                accel_allocations):
    """Called by ``_heal_allocations_for_instance()`` once ``allocations``
    holds what the server's allocations will be.

    Adds to ``allocations['allocations']`` the accelerators' part they lack
    (missing, or dropped by --force).

    :param command: the PlacementCommands (its ``_merge_allocations``).
    :param allocations: the consumer's allocations body; changed in place.
    :param accel_allocations: what :func:`accelerator_allocations` returned.
    :returns: True if something was added (the allocations need an update).
    """
    missing = heal.missing_allocations(
        instance.uuid, allocations['allocations'], accel_allocations)
    if not missing:
        return False
    allocations['allocations'] = command._merge_allocations(
        allocations['allocations'], missing)
    return True
