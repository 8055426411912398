"""Attach and detach actions that nothing would end.

nova-api sets the server's task state (``adding_accelerator`` or
``removing_accelerator``, :mod:`nova_cyborg.rpc`) and casts the action to
the server's nova-compute, whose handler clears it at the end of its work
(``nova_cyborg.attach._task``). Every other action on the server is
refused while it is set, so a task state nobody clears holds the server for
good. Two ways that happened with every service running again:

* The handler failed before its work began or after it ended: recording
  the instance action's event (``wrap_instance_event``, a conductor RPC)
  timed out after a RabbitMQ restart or with the conductor down, or saving
  the cleared task state did. :func:`running` (around the whole handler,
  the event's recording included) settles the server as soon as the
  handler fails, if the conductor answers by then.
* The cast never reached nova-compute (RabbitMQ's queues lost in a
  restart), nova-api could not cast it, or the settling above failed too:
  :func:`settle_stuck`, nova-compute's periodic task (patch 0022), settles
  every server of its host left in one of those task states for more than
  ``[nova_cyborg] stuck_accelerator_action_timeout`` seconds without a
  handler running for it in this nova-compute.

Settling is what a restarted nova-compute does
(:func:`nova_cyborg.recovery.accelerator_action_interrupted`): a half-done
attach rolled back, a detach whose ARQs are gone completed, the task state
cleared; under the instance's lock, on the server as the database has it
now. A dead nova-compute is settled by its restart.
"""

import contextlib
import threading

from nova import objects
from nova import utils as nova_utils
from oslo_log import log as logging
from oslo_utils import timeutils

import nova.conf

from nova_cyborg import conf as nc_conf  # noqa: F401 (registers options)
from nova_cyborg import recovery
from nova_cyborg import rpc

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: Instance UUIDs whose action handler runs in this nova-compute.
_running = set()
_lock = threading.Lock()


@contextlib.contextmanager
def running(manager, context, instance, task_state):
    """Around an action's handler: while it runs, :func:`settle_stuck`
    leaves the server alone; if it fails with the task state still set
    (its work never began, or could not record its end), the server is
    settled at once. What the handler raised is raised again."""
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
    handler of this nova-compute works on."""
    instances = objects.InstanceList.get_by_filters(
        context, {'host': manager.host, 'deleted': False,
                  'task_state': sorted(rpc.TASK_STATES.values())},
        expected_attrs=[])
    timeout = CONF.nova_cyborg.stuck_accelerator_action_timeout
    for instance in instances:
        with _lock:
            if instance.uuid in _running:
                continue
        if not timeutils.is_older_than(
                instance.updated_at or instance.created_at, timeout):
            continue
        _settle(manager, context, instance.uuid, instance.task_state)
