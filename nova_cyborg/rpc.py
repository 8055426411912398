"""What nova-api and nova-compute share about the accelerator actions.

The task states the ``addAccelerator`` and ``removeAccelerator`` actions
hold from the moment nova-api accepts them until nova-compute is done,
and the RPC that hands the work to the server's compute.

RPC: the actions do not use Nova's compute RPC API (its version is Nova's
to bump). nova-compute serves them on an endpoint of its own,
:class:`AcceleratorEndpoint`, in namespace ``nova_cyborg`` version
``1.0``, on the compute topic (patch 0003 adds it to the manager's
``additional_endpoints``). Before it sets the task state, nova-api asks
the server's compute, with a ``call``, which version it serves
(:func:`check_compute`): a compute not patched by nova-cyborg answers
``UnsupportedVersion`` and the action is refused with 409 naming the host,
instead of a 202 whose cast the compute would drop with an error in its
log. A later version of the namespace is used only once
``can_send_version`` says the compute serves it. A patched compute also
reports the namespace's version as a trait of its compute node provider,
which the scheduler and nova-api check for moves of servers with
accelerators (:mod:`nova_cyborg.capability`).

While a task state is set, Nova's API refuses every other action on the
server (409, "in task_state adding_accelerator"), so a start, stop,
second attach or detach cannot overtake the one under way. nova-compute
clears it when it is done, whatever the outcome, also when its handler
fails before or after the work (recording the action's event, saving the
cleared state); one nothing clears (the cast lost, the conductor away too
long) is cleared by nova-compute's periodic task
(:mod:`nova_cyborg.stuck_actions`).

The two values are members of Nova's ``InstanceTaskState`` enum through
patch 0025, so a deployment that sends versioned ``instance.update``
notifications on task state changes (``[notifications]
notify_on_state_change = vm_and_task_state``) gets them for these
transitions too.
"""

import functools
import sys

from nova.compute import rpcapi as compute_rpcapi
from nova.compute import utils as compute_utils
from nova import exception_wrapper
from nova.objects import base as objects_base
from nova import rpc as nova_rpc
from nova import utils as nova_utils
import oslo_messaging as messaging

from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg import move
from nova_cyborg.objects import accelerator_request as arq_obj

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


NAMESPACE = 'nova_cyborg'
VERSION = '1.0'
#: Seconds nova-api waits for a compute to say which version it serves.
CHECK_TIMEOUT = 30

_wrap_exception = functools.partial(
    exception_wrapper.wrap_exception, service='compute',
    binary='nova-compute')


def _client(host, **kwargs):
    target = messaging.Target(topic=compute_rpcapi.RPC_TOPIC,
                              namespace=NAMESPACE, version=VERSION)
    client = nova_rpc.get_client(
        target, serializer=objects_base.NovaObjectSerializer())
    return client.prepare(server=host, **kwargs)


def _unsupported(error):
    return (isinstance(error, (messaging.UnsupportedVersion,
                               messaging.NoSuchMethod)) or
            (isinstance(error, messaging.RemoteError) and
             error.exc_type in ('UnsupportedVersion', 'NoSuchMethod')))


def check_compute(context, host):
    """Refuse unless nova-compute on ``host`` serves this namespace.

    :raises: OperationRefused (409) naming the host and why.
    """
    try:
        _client(host, timeout=CHECK_TIMEOUT).call(context, 'version')
    except messaging.MessagingTimeout:
        raise exception.OperationRefused(reason=_(
            'nova-compute on host %s did not answer: is it running?') % host)
    except Exception as e:  # noqa: B902 (see _unsupported)
        if not _unsupported(e):
            raise
        raise exception.OperationRefused(reason=_(
            'nova-compute on host %(host)s cannot attach or detach '
            'accelerators: it does not serve RPC namespace %(ns)s %(ver)s '
            '(it is not patched by nova-cyborg, or runs an older '
            'nova-cyborg). Upgrade it first.') % {
                'host': host, 'ns': NAMESPACE, 'ver': VERSION})


def cast(context, instance, method, dp_name):
    """Have the server's compute run ``method`` for profile ``dp_name``."""
    _client(instance.host).cast(context, method, instance=instance,
                                device_profile=dp_name)


def endpoints(manager):
    """The RPC endpoints nova-compute adds for nova-cyborg (patch 0003)."""
    return [AcceleratorEndpoint(manager)]


def _ended(handler):
    """The action ends, whatever fails in its handler.

    Around the recording of the instance action's event too: when that
    failed (a conductor RPC timing out after a RabbitMQ restart), the work
    that clears the task state never began, and the server stayed in it
    for good (:mod:`nova_cyborg.stuck_actions`).
    """
    @functools.wraps(handler)
    def wrapper(self, context, instance, device_profile):
        from nova_cyborg import stuck_actions
        with stuck_actions.running(self.manager, context, instance,
                                   TASK_STATES[handler.__name__]):
            return handler(self, context, instance, device_profile)
    return wrapper


class AcceleratorEndpoint(object):
    """nova-compute's endpoint of the accelerator actions."""

    target = messaging.Target(namespace=NAMESPACE, version=VERSION)

    def __init__(self, manager):
        self.manager = manager
        self.host = manager.host

    def version(self, context):
        """The version of the namespace this compute serves."""
        return VERSION

    @_wrap_exception()
    @_ended
    @compute_utils.wrap_instance_event(prefix='compute')
    def add_accelerator(self, context, instance, device_profile):
        from nova_cyborg import attach as nc_attach

        @nova_utils.synchronized(instance.uuid)
        def do_add_accelerator():
            nc_attach.add(self.manager, context, instance, device_profile)
        self._faulted(context, instance, do_add_accelerator)

    @_wrap_exception()
    @_ended
    @compute_utils.wrap_instance_event(prefix='compute')
    def remove_accelerator(self, context, instance, device_profile):
        from nova_cyborg import attach as nc_attach

        @nova_utils.synchronized(instance.uuid)
        def do_remove_accelerator():
            nc_attach.remove(self.manager, context, instance,
                             device_profile)
        self._faulted(context, instance, do_remove_accelerator)

    @staticmethod
    def _faulted(context, instance, work):
        """Record a failure as an instance fault, as wrap_instance_fault."""
        try:
            work()
        except Exception as e:  # noqa: B902 (recorded, then raised)
            compute_utils.add_instance_fault_from_exc(
                context, instance, e, sys.exc_info())
            raise
