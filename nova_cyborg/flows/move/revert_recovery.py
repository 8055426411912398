"""A revert cut short on the destination, finished when it restarts.

``revert_resize`` runs on the destination with the server in
RESIZE_REVERTING: it checks that Cyborg answers
(:func:`nova_cyborg.flows.move.revert.revert_at_destination`), tears down the
guest's networks, destroys the guest, drops its claim and casts
``finish_revert_resize`` to the source, which deletes the destination's
ARQs, binds the parked ones again and rebuilds the guest
(:func:`nova_cyborg.flows.move.revert.rebind_at_source`). A destination
nova-compute that stops anywhere in there leaves the server in RESIZE_REVERTING
for good: upstream's ``_init_instance`` has no case for it, and every action
on the server is refused. Meanwhile the destination's ARQs are Bound
(under a guest that may already be gone) and the parked ones hold the
source's devices in Placement.

At the destination's restart :func:`resize_reverting` casts the revert
to its own queue again, served as the lost message would have been once
the service is up: every step before the cast is
safe to repeat (a teardown of networks already torn down, the destroy of
a guest already gone, a claim already dropped), and the cast cannot have
been made before the guest was destroyed. What the guest really is
decides nothing further: found here it is destroyed now, gone it was
destroyed before; either way the source rebuilds it with its own
devices. If Cyborg does not answer, the revert refuses to start as it
would have at first: the server is back in VERIFY_RESIZE (the migration
``finished``), and its owner can revert or confirm again.

One window is left: the destination stopped after its cast and came back
before the source took the server over (the source sets the server's
host when it finishes). Then the instance the restart reads is still on
this host: it is read again before deciding, and a revert the source is
already finishing is left to it.

Nothing for a server without accelerators (upstream's behaviour).
"""

from nova.compute import task_states
from nova import objects
from oslo_log import log as logging

from nova_cyborg.flows.move import recovery

LOG = logging.getLogger(__name__)


def _reverting_here(manager, context, instance):
    """The migration this destination was reverting, or None."""
    if instance.migration_context is None:
        return None
    migration = objects.Migration.get_by_id_and_instance(
        context, instance.migration_context.migration_id, instance.uuid)
    if (migration.status != 'reverting' or
            migration.dest_compute != manager.host):
        return None
    return migration


def resize_reverting(manager, context, instance):
    """Called at nova-compute's start for each server of its host
    (``_init_instance``, through
    :func:`nova_cyborg.hooks.compute.accelerator_action_at_restart`): a
    server with accelerators left in RESIZE_REVERTING on this, the
    destination, host has its revert cast again to this host
    (``revert_resize``), which ends on the source with its parked ARQs
    bound again. Never raises; nothing for any other server.

    :param manager: the ComputeManager (its host and compute RPC API).
    """
    if instance.task_state != task_states.RESIZE_REVERTING:
        return
    try:
        if not recovery.moving_accelerators(instance):
            return
        migration = _reverting_here(manager, context, instance)
        if migration is None:
            return
        # Read again: the source may have taken the server over since
        # this restart listed the host's servers.
        instance.refresh()
        if (instance.host != manager.host or
                instance.task_state != task_states.RESIZE_REVERTING):
            return
        guest_here = manager.driver.instance_exists(instance)
        LOG.warning('nova-compute stopped while reverting the move of a '
                    'server with accelerators (migration %(migration)s, '
                    'its guest %(where)s): reverting it again',
                    {'migration': migration.uuid,
                     'where': 'still here' if guest_here else
                     'already destroyed here'}, instance=instance)
        request_spec = objects.RequestSpec.get_by_instance_uuid(
            context, instance.uuid)
        # The message again, to this host's own queue: it is served once
        # the service is up, its resource tracker knowing its nodes (the
        # revert drops the move's claim there), as the lost one would have
        # been. A failure of the revert then faults the server as a first
        # revert failing would.
        manager.compute_rpcapi.revert_resize(
            context, instance, migration, manager.host, request_spec)
    except Exception:
        LOG.exception('Could not revert again the move the stopped '
                      'nova-compute was reverting', instance=instance)
