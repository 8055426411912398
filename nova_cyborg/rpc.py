"""What nova-api and nova-compute share about the accelerator actions.

The task states the ``addAccelerator`` and ``removeAccelerator`` actions
hold from the moment nova-api accepts them until nova-compute is done,
and the cast that hands the work to the server's compute.

While a task state is set, Nova's API refuses every other action on the
server (409, "in task_state adding_accelerator"), so a start, stop,
second attach or detach cannot overtake the one under way. nova-compute
clears it when it is done, whatever the outcome.

The two values are not members of Nova's ``InstanceTaskState`` enum: a
deployment that sends versioned ``instance.update`` notifications on task
state changes (``[notifications] notify_on_state_change =
vm_and_task_state``) gets a logged error instead of the notification for
these two transitions (Nova catches it; the action is not affected).
"""

from nova.compute import rpcapi as compute_rpcapi

from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg import move

ADDING = 'adding_accelerator'
REMOVING = 'removing_accelerator'
#: The compute manager methods, routed to nova_cyborg.attach.
ADD_METHOD = 'add_accelerator'
REMOVE_METHOD = 'remove_accelerator'

TASK_STATES = {ADD_METHOD: ADDING, REMOVE_METHOD: REMOVING}

#: System metadata: "<profile> <rp> <rc> <n>" of the allocation added.
ALLOC_PREFIX = 'nova_cyborg_attached_alloc_'
#: The only attach type plugged into and out of a running guest.
HOT_PLUGGABLE = 'PCI'


def attached_arqs(instance, dp_name):
    """UUIDs of the ARQs attached to the server for profile ``dp_name``."""
    return [entry.split(' ', 1)[0]
            for entry in move.entries(instance, move.ATTACHED_PREFIX)
            if entry.split(' ', 1)[1] == dp_name]


def refuse_unpluggable(arqs):
    """Refuse to unplug a device that is not a PCI function from a guest.

    :param arqs: ARQ dicts of a running server.
    :raises: OperationRefused naming the attach type.
    """
    for arq in arqs:
        kind = arq.get('attach_handle_type')
        if kind != HOT_PLUGGABLE:
            raise exception.OperationRefused(reason=_(
                'A %s accelerator cannot be removed from a running server: '
                'stop the server first.') % kind)


def cast(context, instance, method, dp_name):
    """Have the server's compute run ``method`` for profile ``dp_name``."""
    rpcapi = compute_rpcapi.ComputeAPI()
    cctxt = rpcapi.router.client(context).prepare(
        server=instance.host, version='6.0')
    cctxt.cast(context, method, instance=instance, device_profile=dp_name)
