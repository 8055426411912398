"""The addAccelerator and removeAccelerator actions: their names, task
states and what they record on a server.

The task states the actions hold from the moment nova-api accepts them
until nova-compute is done (members of Nova's ``InstanceTaskState`` enum
through patch 0025), the compute manager methods that serve them, and
the system metadata of the allocation an attach added. Shared by nova-api
(nova_cyborg.flows.attach.api), the RPC client
(nova_cyborg.clients.compute_rpc) and nova-compute
(nova_cyborg.flows.attach).
"""

from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.objects import accelerator_request as arq_obj


#: The task states of addAccelerator and removeAccelerator.
ADDING = 'adding_accelerator'
REMOVING = 'removing_accelerator'
#: The compute manager methods, routed to nova_cyborg.flows.attach.compute.
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
            for entry in bookkeeping.entries(instance,
                                             bookkeeping.ATTACHED_PREFIX)
            if entry.split(' ', 1)[1] == dp_name]


def refuse_unpluggable(arqs):
    """Refuse to unplug a device that is not a PCI function from a guest.

    :param arqs: ARQ dicts of a running server.
    :raises: OperationRefused naming the attach type.
    """
    for arq in arqs:
        kind = arq.get('attach_handle_type')
        info = arq.get('attach_handle_info')
        if (kind == arq_obj.ATTACH_TYPE_MDEV and isinstance(info, dict) and
                info.get(arq_obj.VGPU_FRAMEWORK_KEY) == arq_obj.VENDOR_VFIO):
            # A vGPU 17 VF: a PCI function to the guest (validated in full
            # before it is unplugged).
            kind = arq_obj.ATTACH_TYPE_PCI
        if kind != HOT_PLUGGABLE:
            raise exception.OperationRefused(reason=_(
                'A %s accelerator cannot be removed from a running server: '
                'stop the server first.') % kind)
