"""Hooks of ``nova.conductor.manager``, ``nova.conductor.tasks.migrate``
and ``nova.conductor.tasks.live_migrate`` (patches 0002, 0007, 0020a and
0023).
"""

import functools

from nova.compute import vm_states

from nova_cyborg import exception
from nova_cyborg.flows.boot import conductor
from nova_cyborg.flows.boot import early_arqs
from nova_cyborg.flows.live_migration import conductor as live_migration
from nova_cyborg.flows.move import resize as move
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import capability


def create_and_bind_arqs(context, instance, hostname, request_spec,
                         requested_networks=None):
    """Called by ``ComputeTaskManager._create_and_bind_arq_for_instance()``.

    :param instance: the nova.objects.Instance.
    :param hostname: the selected node's name.
    :param request_spec: the nova.objects.RequestSpec with its request
        group -> provider mapping.
    :param requested_networks: nova.objects.NetworkRequestList or None.
    :returns: the UUIDs of the ARQs whose binding was started.
    :raises: AcceleratorRequestBindingFailed, after deleting every ARQ
        created here.

    For a first build, :func:`start_binding` started this already in a
    thread: it is joined here, and the ARQs it gave ports with a device
    profile are set on ``requested_networks`` (the objects sent to
    nova-compute); or, where the compute can be told how it ended, the
    build is cast while it runs (nova_cyborg.flows.boot.early_arqs).
    """
    try:
        started = early_arqs.join_binding(context, instance,
                                          requested_networks)
    except exception.AcceleratorRequestBindingFailed:
        # The bind's thread deleted its ARQs, and left the allocation.
        conductor.free_allocation(context, instance, hostname)
        raise
    if started is not None:
        return started
    return conductor.create_and_bind_arqs(
        context, instance, hostname, request_spec, requested_networks)


def start_binding(context, instance, hostname, request_spec,
                  requested_networks=None):
    """Called by ``schedule_and_build_instances()`` once the selected
    host's provider mapping is in the request spec (patch 0002d).

    Starts :func:`create_and_bind_arqs` in a thread for a server with a
    device profile (or a port with one); the call of
    ``_create_and_bind_arq_for_instance()`` before the build is cast joins
    it. Nothing for any other server.
    """
    early_arqs.start_binding(conductor.create_and_bind_arqs, context,
                             instance, hostname, request_spec,
                             requested_networks)


def arqs_while_scheduling(schedule_and_build_instances):
    """Decorates ``ComputeTaskManager.schedule_and_build_instances()``
    (patch 0002d).

    Before the method asks the scheduler for hosts, the ARQs of each new
    server whose flavor names a device profile start being created
    (nova_cyborg.flows.boot.early_arqs); :func:`create_and_bind_arqs` takes
    them once the host is known. Those not taken and the binds not joined when
    the method ends (no host, the server deleted meanwhile, another failure)
    are deleted. Servers without accelerators start nothing.
    """
    @functools.wraps(schedule_and_build_instances)
    def wrapper(self, context, build_requests, *args, **kwargs):
        early_arqs.start(context, build_requests)
        try:
            return schedule_and_build_instances(
                self, context, build_requests, *args, **kwargs)
        finally:
            # Also the binds started and not joined (start_binding()).
            early_arqs.discard(context, [build_request.instance_uuid
                                         for build_request in build_requests])
    return wrapper


def scheduling_failed(context, build_requests):
    """Called by ``schedule_and_build_instances()`` when the scheduler
    failed (no valid host), before the servers are put in ERROR: the ARQs
    created for them meanwhile are deleted first.
    """
    early_arqs.discard(context, [build_request.instance_uuid
                                 for build_request in build_requests])


def rebuild_goes_to_cyborg(instance):
    """Called by ``ComputeTaskManager.rebuild_instance()`` instead of
    upstream's check of the flavor's device profile.

    :returns: whether the server has accelerators: a device profile in its
        flavor, or accelerators attached with addAccelerator, which an
        evacuation takes along (nova_cyborg.steps.evacuation). False for any
        other server, as upstream.
    """
    return bookkeeping.has_accelerators(instance)


def last_failure(filter_properties):
    """Called by ``ComputeTaskManager.build_instances()`` before
    ``populate_retry()``, which drops it.

    :param filter_properties: the legacy filter properties dict.
    :returns: why the last host failed the build, or None.
    """
    return (filter_properties.get('retry') or {}).get('exc_reason')


def exhausted_hosts_reason(instance, reason, failure):
    """Called by ``build_instances()`` when no host is left to retry.

    :param instance: the nova.objects.Instance being rescheduled.
    :param reason: Nova's message for MaxRetriesExceeded.
    :param failure: what :func:`last_failure` returned.
    :returns: the message to raise MaxRetriesExceeded with: for a server
        with accelerators, it says why the last host failed (the
        instance's own fault: no need to name it); else ``reason``.
    """
    if not failure or not bookkeeping.has_accelerators(instance):
        return reason
    return ('Exhausted all hosts available for retrying build failures. '
            'Last failure: %s' % failure)


def rebuild_arqs_failed(manager, context, instance, migration,
                        orig_image_ref, image_ref, exc, request_spec):
    """Called by ``ComputeTaskManager.rebuild_instance()`` when getting or
    binding the server's ARQs failed (only servers with accelerators get
    there); it re-raises the failure after this.

    The server leaves its task state (upstream left it in REBUILD for
    good), its image is the old one again and an evacuation's migration
    ends in error, as when no host is found.

    :param manager: the ComputeTaskManager.
    :param migration: the evacuation's nova.objects.Migration, or None.
    :param exc: the failure.
    """
    if migration:
        migration.status = 'error'
        migration.save()
    if orig_image_ref and orig_image_ref != image_ref:
        instance.image_ref = orig_image_ref
        instance.save()
    manager._set_vm_state_and_notify(
        context, instance.uuid, 'rebuild_server',
        {'vm_state': instance.vm_state, 'task_state': None},
        exc, request_spec)


def build_arqs_failed(manager, context, instance, exc, request_spec):
    """Called by ``ComputeTaskManager.schedule_and_build_instances()``
    when creating or binding one instance's ARQs failed (nova_cyborg.
    conductor already deleted its ARQs and allocation).

    Only this instance fails: upstream put every instance of the request
    in ERROR, even those already sent to their compute. The caller goes on
    with the next instance.

    :param manager: the ComputeTaskManager.
    :param context: a context targeted at the instance's cell.

    The ARQs an early bind (nova_cyborg.flows.boot.early_arqs) could not delete
    are recorded here, in the instance's cell, so that its delete deletes
    them: the bind's worker thread saves nothing.
    """
    if isinstance(exc, exception.AcceleratorRequestBindingFailed):
        bookkeeping.remember_retired_quietly(instance, exc.arqs)
    manager._set_vm_state_and_notify(
        context, instance.uuid, 'build_instances',
        {'vm_state': vm_states.ERROR, 'task_state': None},
        exc, request_spec)


def add_profile_groups(context, request_spec, flavor):
    """Called by ``MigrationTask._execute()`` after the request spec's PCI
    groups: the scheduler is asked for the device profile of the move's
    flavor (upstream refuses the move).

    :param request_spec: the nova.objects.RequestSpec of the move.
    :param flavor: the nova.objects.Flavor the server moves to.
    """
    move.add_profile_groups(context, request_spec, flavor)


# Live migration (patch 0020a).

def refuse_forced_live_migration(instance, destination):
    """Called by ``LiveMigrationTask._execute()`` before anything changes.

    :param destination: the forced destination host, or None (the
        scheduler chooses, with or without ``--host``).
    :raises: MigrationPreCheckError for a server with accelerators and a
        forced destination; nothing for any other server.
    """
    live_migration.refuse_forced(instance, destination)


def add_live_migration_profile_groups(context, request_spec, instance):
    """Called by ``LiveMigrationTask._get_request_spec_for_select_
    destinations()`` after the request spec's PCI groups: the scheduler
    is asked for the flavor's device profile on live-migratable providers,
    and, for a server with accelerators (its flavor's or added ones), for a
    compute that serves their live migration (capability 1.1). Nothing for
    a server without accelerators.
    """
    # The request spec's flavor (the instance's, where the spec has none):
    # nothing is loaded for it.
    flavor = next((obj.flavor for obj in (request_spec, instance)
                   if obj.obj_attr_is_set('flavor')), None)
    live_migration.add_profile_groups(context, request_spec, flavor)
    # Source and destination must serve live migration of accelerators.
    capability.require_for(request_spec, instance, 'live_migrate')


def require_capability(request_spec, instance, operation):
    """Called by ``ComputeTaskManager.rebuild_instance()`` before it asks
    the scheduler for an evacuation's host (patch 0023).

    Requires the capability trait that ``operation`` of a server with
    accelerators needs (its flavor's or those added with addAccelerator)
    on the root provider. Nothing for a server without accelerators.

    :param request_spec: the nova.objects.RequestSpec; changed in place.
    """
    capability.require_for(request_spec, instance, operation)


def bind_live_migration_arqs(context, instance, migration, request_spec):
    """Called by ``LiveMigrationTask._execute()`` once the destination is
    chosen and checked, before the source compute is asked to migrate.

    :returns: the UUIDs of the destination's bound ARQs ([] for a server
        without accelerators).
    :raises: MigrationPreCheckError saying why, after deleting them.
    """
    return live_migration.bind_destination(context, instance, migration,
                                           request_spec)


def live_migration_task_rollback(context, instance):
    """Called by ``LiveMigrationTask.rollback()``: the destination's ARQs
    go. Never raises; nothing for a server without accelerators.
    """
    if bookkeeping.has_accelerators(instance, load=False):
        live_migration.forget_destination(context, instance)
