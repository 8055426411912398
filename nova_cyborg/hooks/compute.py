"""Hooks of ``nova.compute.manager`` (patch 0003).

The build and rebuild hooks wait for and check the ARQs' binding and say
why a build failed; the delete hooks release the ARQs of deleted servers;
the move hooks (resize, cold migration, evacuation) swap a server's ARQs
between its source and destination hosts; the live migration hooks
(patch 0020b) end a live migration's accelerators on its source.
"""

from nova import exception as nova_exception
from oslo_log import log as logging

from nova_cyborg.flows.attach import endpoint as rpc_endpoint
from nova_cyborg.flows.attach import recovery as attach_recovery
from nova_cyborg.flows.attach import stuck_actions
from nova_cyborg.flows.cleanup import delete as cleanup
from nova_cyborg.flows.live_migration import compute as live_migration_compute
from nova_cyborg.flows.live_migration import reset as lm_reset
from nova_cyborg.flows.move import recovery
from nova_cyborg.flows.move import resize as move
from nova_cyborg.flows.move import revert as move_revert
from nova_cyborg.flows.move import revert_recovery
from nova_cyborg.model import actions
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import bind_outcome
from nova_cyborg.steps import arqs as arq_steps
from nova_cyborg.steps import bound_arqs as compute
from nova_cyborg.steps import evacuation as evacuate

LOG = logging.getLogger(__name__)


def endpoints(manager):
    """Called by ``ComputeManager.__init__()``, added to its
    ``additional_endpoints``.

    :param manager: the ComputeManager.
    :returns: the RPC endpoints of the addAccelerator and removeAccelerator
        actions (RPC namespace nova_cyborg, version 1.0).
    """
    return rpc_endpoint.endpoints(manager)


# Build and rebuild.

def get_bound_arqs(virtapi, context, instance, arq_uuids):
    """Called by ``ComputeManager._get_bound_arq_resources()``.

    :param virtapi: the ComputeManager's ComputeVirtAPI (the bind events).
    :param instance: the nova.objects.Instance.
    :param arq_uuids: the ARQs the conductor bound, or None for all the
        instance's ARQs.
    :returns: the ARQ dicts, each Bound with a validated attach handle.
    :raises: InstanceEventTimeout, AcceleratorRequestNotBound,
        InvalidAttachHandle, CyborgError, FunctionCheckFailed

    The build, rebuild (evacuation) and unshelve that call it spawn the
    guest next: what was read goes to its start check
    (nova_cyborg.model.handoff).
    """
    return compute.get_bound_arqs(virtapi, context, instance, arq_uuids,
                                  hand_off=True)


def external_event(instance, event):
    """Called by ``ComputeManager.external_instance_event()`` for an event
    Nova has no handler of its own for, before it looks for its waiter
    (patch 0028).

    :param event: the nova.objects.InstanceExternalEvent.
    :returns: True for the conductor's word on the bind of a build cast
        before its bind answered, which is kept for that build
        (nova_cyborg.model.bind_outcome); False for any other event, which
        Nova handles as before.
    """
    return bind_outcome.offer(event)


def build_failure(instance, exc):
    """Called by ``ComputeManager._build_resources()`` after the ARQs of a
    failed bind were deleted.

    :param exc: why getting the accelerators failed.
    :returns: the exception to raise: ComputeResourcesUnavailable (a
        reschedule) for a bind Cyborg failed on this host, else
        BuildAbortException with a fault that says why.
    """
    return compute.build_failure(instance, exc)


def evacuation_has_arqs(instance, arq_uuids):
    """Called by ``ComputeManager._rebuild_default_impl()`` for an
    evacuation, instead of upstream's check of the flavor's device profile.

    :param arq_uuids: the ARQs the conductor bound for this host (also
        those of accelerators attached with addAccelerator).
    :returns: whether to wait for bound ARQs: some were bound, or the
        flavor names a device profile. False for a server without
        accelerators, as upstream.
    """
    return bool(arq_uuids or bookkeeping.flavor_profile(instance.flavor))


def abort_build(context, instance, arq_uuids, exc):
    """Called by ``ComputeManager._do_rebuild_instance()`` (evacuation) and
    ``_unshelve_instance()`` when the wait for the bind failed.

    Deletes the ARQs bound for this host (Cyborg may still bind them after
    the wait gave up) and the instance's ARQs (as
    ``nova.compute.utils.delete_arqs_if_needed``; failures are logged).

    :param arq_uuids: the ARQs the conductor bound for this host.
    :param exc: why getting the accelerators failed.
    :returns: the BuildAbortException to raise, with a fault that says why.
    """
    cleanup.delete_arqs_if_needed(context, instance, arq_uuids)
    return rebuild_failure(instance, exc)


def rebuild_failure(instance, exc):
    """Called by ``ComputeManager._do_rebuild_instance()`` when reading the
    ARQs of a rebuild on the same host failed.

    :returns: the BuildAbortException to raise, with a fault that says why
        (upstream: 'Failure getting accelerator resources.').
    """
    return nova_exception.BuildAbortException(
        instance_uuid=instance.uuid,
        reason=compute.build_fault_message(exc))


def accel_info(context, instance):
    """Called by ``ComputeManager._get_accel_info()`` (hard reboot, power
    on, rebuild on the same host).

    ARQs a failed revert left parked on this host are bound again first
    (nova_cyborg.flows.move.recovery.parked_here).

    :returns: the ARQs bound to the instance on the host it is on now, or
        [] for a server without accelerators.
    """
    recovery.parked_here(context, instance)
    return arq_steps.instance_arqs(context, instance)


# Delete.

def delete_arqs_of_deleting_instance(context, instance):
    """Called by ``ComputeManager._delete_instance()`` instead of
    ``delete_arqs_if_needed``: also the ARQs attached with addAccelerator,
    parked or retired; a Cyborg failure is logged, as upstream.

    Nothing, and nothing loaded, for a server without a device profile
    or records, as upstream: the instance comes from the API's delete,
    init_host or the reclaim of soft-deleted servers, with its system
    metadata (:func:`nova_cyborg.model.bookkeeping.has_accelerators`).
    """
    try:
        needed = (bookkeeping.has_accelerators(instance, load=False) or
                  bookkeeping.unbound(instance, load=False))
    except Exception:  # noqa: B902 (a delete never fails here)
        LOG.exception('Could not read whether the instance has accelerator '
                      'requests; not deleting any', instance=instance)
        return
    if needed:
        cleanup.delete_arqs_of_deleting_instance(context, instance)


def delete_arqs_of_deleted_instance(context, instance):
    """Called by ``ComputeManager._complete_partial_deletion()`` and by
    ``_cleanup_running_deleted_instances()`` (action 'reap'): the ARQs of
    a server deleted while its host was down, or while the compute stopped
    mid-delete. Idempotent, runs as the service user, never raises.
    """
    cleanup.delete_arqs_of_deleted_instance(context, instance)


# Moves.

def accelerator_action_at_restart(manager, context, instance):
    """Called by ``ComputeManager._init_instance()`` for every server of
    the host when nova-compute starts.

    A server in the task state of addAccelerator or removeAccelerator
    (states only those actions set) has its ARQs, records and allocation
    put in agreement (a half-done attach rolled back, a detach whose ARQs
    are gone completed) and its task state cleared. A server with
    accelerators left in RESIZE_REVERTING on this, the destination, host
    has its revert cast again to this host, where upstream leaves it stuck
    (:mod:`nova_cyborg.flows.move.revert_recovery`). Nothing for any other
    server. Never raises.

    :param manager: the ComputeManager (its report client, host and
        compute RPC API).
    """
    if instance.task_state in actions.TASK_STATES.values():
        # Should the settling fail now (the conductor away), the periodic
        # task looks again (nova_cyborg.flows.attach.stuck_actions).
        stuck_actions.announce(manager)
    attach_recovery.accelerator_action_interrupted(manager, context, instance)
    revert_recovery.resize_reverting(manager, context, instance)


def stuck_actions_spacing():
    """Called when ``nova.compute.manager`` is imported, for the spacing of
    ``ComputeManager._settle_stuck_accelerator_actions()`` (patch 0022).

    :returns: ``[nova_cyborg] stuck_accelerator_action_interval``, or -1
        (oslo.service does not run the task) for 0.
    """
    return stuck_actions.spacing()


def settle_stuck_accelerator_actions(manager, context):
    """Called by ``ComputeManager._settle_stuck_accelerator_actions()``,
    a periodic task (patch 0022), every ``[nova_cyborg]
    stuck_accelerator_action_interval`` seconds. Queries nothing unless
    an action was announced on this host
    (:func:`nova_cyborg.flows.attach.stuck_actions.announce`).

    A server of this host left in the task state of addAccelerator or
    removeAccelerator for longer than ``[nova_cyborg]
    stuck_accelerator_action_timeout`` seconds, with no handler of the
    action running in this nova-compute (the cast was lost, or the handler
    could not record the action's end), is settled as at restart: a
    half-done attach rolled back, a detach whose ARQs are gone completed,
    the task state cleared. Never raises for one server.

    :param manager: the ComputeManager (its host and report client).
    """
    stuck_actions.settle_stuck(manager, context)


def resize_migrating_at_restart(manager, context, instance, migration):
    """Called by ``ComputeManager._init_instance()`` for a server left in
    RESIZE_MIGRATING on this (the source) host, before the driver rebuilds
    the guest (``finish_revert_migration``).

    For a server with accelerators the allocation goes back to it from
    the migration, the destination's ARQs are deleted, the parked ones
    bound again on this host, and the migration ends in error. Nothing for
    a server without accelerators.

    :param manager: the ComputeManager (its ``_revert_allocation``).
    :param migration: the nova.objects.Migration of the move.
    :raises: the failure to bind the source's ARQs again; upstream then
        logs it and does not rebuild the guest.
    """
    recovery.resize_migrating(manager, context, instance, migration)


def swap_to_destination(virtapi, context, instance, flavor, request_spec,
                        migration, power_off, power_on):
    """Called by ``ComputeManager._resize_instance()`` on the source, before
    the disks move: the source's ARQs are parked (unbound, kept) and the
    new flavor's ARQs bound on the destination.

    :param flavor: the nova.objects.Flavor the server moves to.
    :param migration: the nova.objects.Migration.
    :param power_off: callable with no argument, powers the guest off.
    :param power_on: callable taking ``accel_info``, powers it on again
        (the failure path restores the source's guest).
    :raises: the failure, after the source is restored; the resize is then
        rolled back.
    """
    move.swap_to_destination(virtapi, context, instance, flavor,
                             request_spec, migration, power_off=power_off,
                             power_on=power_on)


def undo_swap(virtapi, context, instance, migration):
    """Called by ``ComputeManager.resize_instance()``'s failure path on the
    source, next to ``_revert_allocation()``: the destination's ARQs are
    deleted and the parked ones bound again.
    """
    move.undo_swap(virtapi, context, instance, migration)


def confirm_move(context, instance):
    """Called by ``ComputeManager._confirm_resize()`` and by a failed
    ``finish_resize()``: the source's parked ARQs go. Never raises.
    """
    move.confirm(context, instance)


def revert_at_destination(context, instance, migration, driver=None):
    """Called by ``ComputeManager.revert_resize()`` on the destination
    before anything there is torn down: checks that Cyborg answers. The
    destination's ARQs stay Bound under its guest (``driver`` is unused);
    the source deletes them once the guest is destroyed
    (:func:`rebind_at_source`).

    :returns: False if Cyborg could not be reached: the revert returns at
        once, nothing changed, the server still in VERIFY_RESIZE on the
        destination and its migration ``finished``, so that the revert can
        be asked for again
        (:func:`nova_cyborg.flows.move.revert.revert_at_destination`).
        True otherwise, and for a server without accelerators.
    """
    return move_revert.revert_at_destination(context, instance, migration,
                                             driver)


def rebind_at_source(virtapi, context, instance):
    """Called by ``ComputeManager._finish_revert_resize()`` on the source
    before the guest is rebuilt, after the destination destroyed its
    guest: the destination's ARQs are deleted, then the parked ones bound
    again.
    """
    move_revert.rebind_at_source(virtapi, context, instance)


def after_evacuation(context, instance):
    """Called by ``ComputeManager._do_rebuild_instance()`` at the end of an
    evacuation: the accelerators attached with addAccelerator stayed on the
    failed host; their ARQs and bookkeeping go and an instance action event
    says so. Never raises.
    """
    evacuate.drop_attached(context, instance)


# Live migration (patch 0020b).

def live_migration_succeeded(context, instance):
    """Called by ``ComputeManager._post_live_migration()`` on the source,
    before the destination is told to take the guest over: the source's
    ARQs go and the destination's become the server's. Never raises;
    nothing for a server without accelerators (the instance came from
    the API with its system metadata: nothing is loaded).
    """
    if bookkeeping.has_accelerators(instance, load=False):
        live_migration_compute.succeeded(context, instance)


def live_migration_rolled_back(context, instance):
    """Called by ``ComputeManager._rollback_live_migration()`` on the
    source (failed, aborted, or the destination died): the destination's
    ARQs go, the source's are checked to be still Bound here. Never raises;
    nothing for a server without accelerators (the instance came from
    the API with its system metadata: nothing is loaded).
    """
    if bookkeeping.has_accelerators(instance, load=False):
        live_migration_compute.rolled_back(context, instance)


def live_migration_reset(manager, context, instance, migration):
    """Called by ``ComputeManager._reset_live_migration()``: the source
    nova-compute restarted with the server in MIGRATING (it stopped in the
    middle of the live migration, and neither ``_rollback_live_migration``
    nor the end of ``_post_live_migration`` ran), after the migration was
    aborted and set to 'error'. If the guest still runs here, the server
    gets its allocation on this host back and the destination's ARQs go;
    if it left, the destination's ARQs and allocation stay and the server
    goes to ERROR with a fault (:mod:`nova_cyborg.flows.live_migration.reset`).
    Never raises; nothing for a server without accelerators.

    :param migration: the migration upstream found running, or None.
    """
    # init_host loads the host's instances with their system metadata.
    if bookkeeping.has_accelerators(instance, load=False):
        lm_reset.reset(manager, context, instance, migration)
