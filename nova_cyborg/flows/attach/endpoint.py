"""nova-compute's side of the accelerator actions: the endpoint of RPC
namespace ``nova_cyborg`` (:mod:`nova_cyborg.clients.compute_rpc` has the
namespace, its versions, the task states and nova-api's side) that patch 0003
adds to the compute manager's ``additional_endpoints``.

The handler returns at once: the work runs on Nova's long-task pool, as
builds and snapshots do (binding and the guest's hot plug may take up to
``[DEFAULT] arq_binding_timeout`` under the server's lock, which must not
hold a thread that answers RPC). A cast that arrives after a later action
of the server began (its task state cleared meanwhile by the periodic
task, another action accepted) is stale: it is refused by its request id
(:func:`current`), leaving the later action alone. The periodic task
learns of an action when its cast arrives
(:func:`nova_cyborg.flows.attach.stuck_actions.announce`).
"""

import functools
import sys

from nova.compute import utils as compute_utils
from nova import exception_wrapper
from nova import objects
from nova import utils as nova_utils
from oslo_log import log as logging
import oslo_messaging as messaging

from nova_cyborg.clients import compute_rpc as rpc
from nova_cyborg import compat
from nova_cyborg.flows.attach import compute as nc_attach
from nova_cyborg.flows.attach import stuck_actions
from nova_cyborg.model import actions

LOG = logging.getLogger(__name__)

_wrap_exception = functools.partial(
    exception_wrapper.wrap_exception, service='compute',
    binary='nova-compute')


def endpoints(manager):
    """The RPC endpoints nova-compute adds for nova-cyborg (patch 0003)."""
    return [AcceleratorEndpoint(manager)]


def current(context, instance):
    """Whether the request of ``context`` is the server's latest action.

    nova-api records the action (with the request's id) as it sets the
    task state and casts; the cast carries the same request id. A cast
    that arrives after a later action began (its server's task state
    cleared meanwhile by nova-compute's periodic task, then another
    action accepted) is stale: it must not act on that action's task
    state. Without a request id (an internal caller) it is current.
    """
    request_id = getattr(context, 'request_id', None)
    if not request_id:
        return True
    latest = objects.InstanceActionList.get_by_instance_uuid(
        context, instance.uuid, limit=1)
    return bool(latest) and latest[0].request_id == request_id


def _ended(handler):
    """The action ends, whatever fails in its handler.

    Around the recording of the instance action's event too: when that
    failed (a conductor RPC timing out after a RabbitMQ restart), the work
    that clears the task state never began, and the server stayed in it
    for good (:mod:`nova_cyborg.flows.attach.stuck_actions`).
    """
    @functools.wraps(handler)
    def wrapper(self, context, instance, device_profile):
        with stuck_actions.running(self.manager, context, instance,
                                   actions.TASK_STATES[handler.__name__]):
            return handler(self, context, instance, device_profile)
    return wrapper


class _Actions(object):
    """The work of the accelerator actions, on nova-compute's long-task
    pool. The methods keep the RPC methods' names: Nova names the
    instance action's event (``compute_add_accelerator``) and the error
    notification after them."""

    def __init__(self, manager):
        self.manager = manager
        self.host = manager.host

    @_wrap_exception()
    @_ended
    @compute_utils.wrap_instance_event(prefix='compute')
    def add_accelerator(self, context, instance, device_profile):

        @nova_utils.synchronized(instance.uuid)
        def do_add_accelerator():
            nc_attach.add(self.manager, context, instance, device_profile)
        _faulted(context, instance, do_add_accelerator)

    @_wrap_exception()
    @_ended
    @compute_utils.wrap_instance_event(prefix='compute')
    def remove_accelerator(self, context, instance, device_profile):

        @nova_utils.synchronized(instance.uuid)
        def do_remove_accelerator():
            nc_attach.remove(self.manager, context, instance,
                             device_profile)
        _faulted(context, instance, do_remove_accelerator)


class AcceleratorEndpoint(object):
    """nova-compute's endpoint of the accelerator actions."""

    target = messaging.Target(namespace=rpc.NAMESPACE, version=rpc.VERSION)

    def __init__(self, manager):
        self.manager = manager
        self._actions = _Actions(manager)

    def version(self, context):
        """The version of the namespace this compute serves.

        A nova-api of an older nova-cyborg asks before it sets the task
        state of an action on a server of this host: the periodic task
        looks for actions nothing ends from now on
        (:func:`nova_cyborg.flows.attach.stuck_actions.announce`).
        """
        stuck_actions.announce(self.manager)
        return rpc.VERSION

    def add_accelerator(self, context, instance, device_profile):
        self._start(actions.ADD_METHOD, context, instance, device_profile)

    def remove_accelerator(self, context, instance, device_profile):
        self._start(actions.REMOVE_METHOD, context, instance, device_profile)

    def _start(self, method, context, instance, device_profile):
        """Hand the action to the long-task pool, unless its cast is
        stale (:func:`current`): binding and the guest's hot plug may take
        up to ``[DEFAULT] arq_binding_timeout`` under the server's lock,
        which must not hold one of the threads that answer RPC."""
        # From now on the periodic task looks for an action nothing ends
        # (the work may wait for a thread of the pool).
        stuck_actions.announce(self.manager)
        if not current(context, instance):
            LOG.warning('Ignoring %(method)s of request %(request)s: the '
                        'server has had a later action since (its task '
                        'state is not this request\'s to change)',
                        {'method': method,
                         'request': getattr(context, 'request_id', None)},
                        instance=instance)
            return
        compat.spawn_long_task(
            self.manager, method, instance, context,
            getattr(self._actions, method), context, instance,
            device_profile)


def _faulted(context, instance, work):
    """Record a failure as an instance fault, as wrap_instance_fault."""
    try:
        work()
    except Exception as e:  # noqa: B902 (recorded, then raised)
        compute_utils.add_instance_fault_from_exc(
            context, instance, e, sys.exc_info())
        raise
