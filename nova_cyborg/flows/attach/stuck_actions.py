"""Attach and detach actions that nothing would end.

nova-api sets the server's task state (``adding_accelerator`` or
``removing_accelerator``, :mod:`nova_cyborg.clients.compute_rpc`) and casts the
action to the server's nova-compute, whose handler clears it at the end of its
work (``nova_cyborg.flows.attach.compute._task``). Every other action on the
server is refused while it is set, so a task state nobody clears holds the
server for good. Two ways that happened with every service running again:

* The handler failed before its work began or after it ended: recording
  the instance action's event (``wrap_instance_event``, a conductor RPC)
  timed out after a RabbitMQ restart or with the conductor down, or saving
  the cleared task state did. :func:`running` (around the whole handler,
  the event's recording included) settles the server as soon as the
  handler fails, if the conductor answers by then.
* The cast never reached nova-compute (RabbitMQ's queues lost in a
  restart), nova-api could not cast it, or the settling above failed too:
  :func:`settle_stuck`, nova-compute's periodic task (patch 0022, every
  ``[nova_cyborg] stuck_accelerator_action_interval`` seconds, 0 disables
  it), settles every server of its host left in one of those task states
  for more than ``[nova_cyborg] stuck_accelerator_action_timeout`` seconds
  without a handler running for it in this nova-compute.

The periodic task reads the database only while an action may be set on
a server of this host (:func:`announce`): since a cast of an action
reached this compute or a handler last ran, or since nova-compute found a
server in one of those task states when it started (its settling at start
may have failed); and until a look finds nothing left to settle once that
is older than the timeout and a margin. A cast that never arrived
announces nothing (nova-api makes no call to the compute,
:mod:`nova_cyborg.clients.compute_rpc`): on a host whose compute node has child
providers (devices that accelerators could be attached from, as the report
client's cache last saw its provider tree; no I/O) the task also looks once
every ``stuck_accelerator_action_timeout`` seconds. A compute without devices
does not query at all; one with devices whose servers get no attach or
detach queries once per timeout.

Settling is what a restarted nova-compute does
(:func:`nova_cyborg.flows.attach.recovery.accelerator_action_interrupted`): a
half-done attach rolled back, a detach whose ARQs are gone completed, the task
state cleared; under the instance's lock, on the server as the database has it
now. A dead nova-compute is settled by its restart.
"""

import contextlib
import threading
import weakref

from nova import objects
from nova import utils as nova_utils
from oslo_log import log as logging
from oslo_utils import timeutils

import nova.conf

from nova_cyborg import conf as nc_conf  # noqa: F401 (registers options)
from nova_cyborg.flows.attach import recovery
from nova_cyborg.model import actions

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: Instance UUIDs whose action handler runs in this nova-compute.
_running = set()
_lock = threading.Lock()
#: Seconds after the timeout during which an announced action keeps the
#: periodic task looking.
MARGIN = 60
#: When the periodic task last looked for a lost cast, per nova-compute.
_looked = weakref.WeakKeyDictionary()
#: When an action was last announced, per nova-compute (its manager: one
#: process may run several, as the functional tests do); none: nothing to
#: look for.
_announced = weakref.WeakKeyDictionary()


def spacing():
    """The periodic task's spacing for oslo.service: the interval, or -1
    (the task is not run at all) for 0."""
    return CONF.nova_cyborg.stuck_accelerator_action_interval or -1


def announce(manager):
    """An attach or detach may be set on a server of ``manager``'s host:
    have its periodic task look until it finds nothing left to settle."""
    now = timeutils.utcnow()
    with _lock:
        _announced[manager] = now


@contextlib.contextmanager
def running(manager, context, instance, task_state):
    """Around an action's handler: while it runs, :func:`settle_stuck`
    leaves the server alone; if it fails with the task state still set
    (its work never began, or could not record its end), the server is
    settled at once. What the handler raised is raised again."""
    announce(manager)
    with _lock:
        _running.add(instance.uuid)
    try:
        yield
    except Exception:  # noqa: B902 (settled, then raised again)
        with _lock:
            _running.discard(instance.uuid)
        _settle(manager, context, instance.uuid, task_state)
        raise
    finally:
        with _lock:
            _running.discard(instance.uuid)


def _settle(manager, context, instance_uuid, task_state):
    """Settle the server if it is still in ``task_state``; never raises
    (a later periodic task tries again)."""
    @nova_utils.synchronized(instance_uuid)
    def locked():
        instance = objects.Instance.get_by_uuid(
            context, instance_uuid,
            expected_attrs=['system_metadata', 'flavor'])
        if instance.task_state != task_state:
            return
        LOG.warning('Ending action %s that did not end: settling the '
                    'accelerators and clearing the task state', task_state,
                    instance=instance)
        recovery.accelerator_action_interrupted(manager, context, instance)
    try:
        locked()
    except Exception as e:  # noqa: B902 (the periodic task tries again)
        LOG.warning('Could not end action %(state)s of instance %(uuid)s '
                    'yet (nova-compute tries again every minute): %(err)s',
                    {'state': task_state, 'uuid': instance_uuid, 'err': e})


def settle_stuck(manager, context):
    """nova-compute's periodic task: settle the servers of this host left
    in the task state of an attach or detach for longer than
    ``[nova_cyborg] stuck_accelerator_action_timeout`` seconds that no
    handler of this nova-compute works on. No query unless an action was
    announced (:func:`announce`)."""
    if not CONF.nova_cyborg.stuck_accelerator_action_interval:
        return
    timeout = CONF.nova_cyborg.stuck_accelerator_action_timeout
    with _lock:
        since = _announced.get(manager)
    if since is None and not _lost_cast_look_due(manager, timeout):
        return
    instances = objects.InstanceList.get_by_filters(
        context, {'host': manager.host, 'deleted': False,
                  'task_state': sorted(actions.TASK_STATES.values())},
        expected_attrs=[])
    if since is None:
        if not instances:
            return
        # Keep looking every interval until they are settled.
        announce(manager)
    elif not instances and timeutils.is_older_than(since, timeout + MARGIN):
        with _lock:
            if _announced.get(manager) == since:
                del _announced[manager]
        return
    for instance in instances:
        with _lock:
            if instance.uuid in _running:
                continue
        if not timeutils.is_older_than(
                instance.updated_at or instance.created_at, timeout):
            continue
        _settle(manager, context, instance.uuid, instance.task_state)


def _lost_cast_look_due(manager, timeout):
    """Whether to look for an action whose cast never arrived: once per
    ``timeout`` on a host with devices (:func:`_has_devices`)."""
    now = timeutils.utcnow()
    with _lock:
        last = _looked.get(manager)
        if last is not None and not timeutils.is_older_than(last, timeout):
            return False
    if not _has_devices(manager):
        return False
    with _lock:
        _looked[manager] = now
    return True


def _has_devices(manager):
    """Whether one of this compute's nodes has child providers, as the
    report client's cache last saw its provider tree (no I/O)."""
    tree = getattr(manager.reportclient, '_provider_tree', None)
    if tree is None:
        return False
    for node in list(manager.rt.compute_nodes.values()):
        try:
            if len(tree.get_provider_uuids(node.uuid)) > 1:
                return True
        except ValueError:  # not in the cache (yet)
            continue
    return False
