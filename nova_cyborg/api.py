"""API side: which server actions a server with accelerators may take.

Routed from ``nova.compute.api.block_accelerators``, the decorator that
upstream puts on the actions it refuses for a flavor with
``accel:device_profile`` (resize and cold migrate, suspend, live migrate;
rebuild, evacuate and shelve only above a compute service version), and
from the check of the new flavor in ``API.resize``.

Upstream's service version checks are gone (a patched compute reports
the same service version as an unpatched one): what nova-cyborg makes
work is allowed, and what it cannot do is refused with a message that
says why and what to do instead. A move is also refused (HTTP 409) when
a host it needs does not report that it runs nova-cyborg
(:mod:`nova_cyborg.capability`).
"""

import inspect

from nova_cyborg import capability
from nova_cyborg import client as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg import move

DP_EXTRA_SPEC = 'accel:device_profile'

#: Decorated ``nova.compute.api.API`` methods this integration supports.
SUPPORTED = frozenset(['evacuate', 'rebuild', 'resize', 'shelve', 'suspend'])

#: Actions that would lose accelerators attached with addAccelerator:
#: only the flavor's device profile follows a server that is rebuilt,
#: moved or offloaded. (Evacuation is allowed: the host is gone, and the
#: server takes what was attached along, nova_cyborg.evacuate.)
_NOT_WITH_ATTACHED = frozenset(['rebuild', 'resize', 'shelve'])

_REFUSALS = {
    'live_migrate': _(
        'Live migration of a server with accelerators is not supported: the '
        'state of a device passed through to the guest (a PCI function or a '
        'mediated device) cannot be copied to another host while the guest '
        'runs. Cold migrate the server instead (openstack server migrate).'),
}


def check_operation(operation, instance):
    """Refuse ``operation`` if this integration cannot keep the devices.

    :param operation: the name of the ``nova.compute.api.API`` method.
    :raises: OperationRefused (HTTP 400) with the reason.
    """
    if operation in _NOT_WITH_ATTACHED and move.attached_profiles(instance):
        raise exception.OperationRefused(reason=_(
            'The %s action would drop the accelerators attached to the '
            'server with addAccelerator: detach them first '
            '(removeAccelerator).') % operation)
    if not move.has_accelerators(instance):
        return
    if operation in SUPPORTED:
        return
    reason = _REFUSALS.get(operation) or _(
        'The %s action is not supported for a server with accelerators.'
    ) % operation
    raise exception.OperationRefused(reason=reason)


def check_hosts(context, func, instance, *args, **kwargs):
    """Refuse a move of a server with accelerators a host cannot serve.

    Routed from ``block_accelerators`` with the decorated method and its
    arguments (:func:`nova_cyborg.capability.check_hosts`).

    :raises: ComputeNotServing (HTTP 409) naming the host and why.
    """
    if not move.has_accelerators(instance):
        return
    arguments = inspect.signature(func).bind(
        None, context, instance, *args, **kwargs).arguments
    capability.check_hosts(context, func.__name__, instance, arguments)


def check_new_flavor(context, flavor):
    """Check the device profile of a resize's new flavor, if it has one.

    Upstream refuses any new flavor with a device profile. Here the
    profile must exist and be well formed, which is checked before the
    resize starts, so the user gets the error (HTTP 400) and not an
    instance action event.

    :raises: OperationRefused naming the profile and what is wrong.
    """
    dp_name = flavor.extra_specs.get(DP_EXTRA_SPEC)
    if not dp_name:
        return
    try:
        nc_client.get_device_profile_request_groups(context, dp_name)
    except (exception.DeviceProfileError, exception.CyborgError) as e:
        raise exception.OperationRefused(reason=e.format_message())
