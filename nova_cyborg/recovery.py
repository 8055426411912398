"""A nova-compute that died in the middle of a move gets its devices back.

Called from ``ComputeManager._init_instance`` (patch 0003) when the
restarted nova-compute finds a server it was moving.

RESIZE_MIGRATING: the compute died on the source after
:func:`nova_cyborg.move.swap_to_destination` (the disk copy, say): the
source's ARQs are parked (unbound), the destination's bound, the server's
allocation is the destination's and the source's is held by the
migration. Upstream rolls the move back by rebuilding the guest on the
source (the driver's ``finish_revert_migration``) and leaves the
allocations as they are (Nova bug 1836369) and the migration in
``migrating``. For a server with accelerators, :func:`resize_migrating`
first puts back what the move changed: the source's allocation goes back
to the server (which frees the destination's devices in Placement), the
destination's ARQs are deleted, the parked ones bound again to their own
providers on the source, and the migration ends in ``error``. The guest
that upstream then builds gets the source's devices, and only those.

nova-compute serves no RPC while ``_init_instance`` runs, so no
``accelerator-request-bound`` event can reach it: the binding is awaited
by reading the ARQs from Cyborg until each is resolved
(:func:`bind_and_poll`), for at most ``[DEFAULT] arq_binding_timeout``
seconds.
"""

import time

from oslo_log import log as logging

import nova.conf

from nova_cyborg import client as nc_client
from nova_cyborg import compute as nc_compute
from nova_cyborg import function_check
from nova_cyborg import move

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: ARQ states in which Cyborg is done binding.
RESOLVED = ('Bound', 'BindFailed')
#: First pause between two reads of the ARQs, doubled up to POLL_MAX.
POLL_FIRST = 0.1
POLL_MAX = 2.0


def bind_and_poll(context, instance, bindings, clock=time.monotonic,
                  sleep=time.sleep):
    """Bind ``{arq_uuid: (rp_uuid, hostname)}``; read until resolved.

    For a nova-compute that cannot receive the bind events (it is
    starting). The ARQs are bound in the instance's project.

    :returns: those ARQs, Bound, with validated attach handles, on devices
        holding the function their profile asks for.
    :raises: AcceleratorRequestNotBound (not Bound in time, or BindFailed),
        InvalidAttachHandle, CyborgError, FunctionCheckFailed
    """
    nc_client.get_client(context, instance=instance).bind_arqs({
        arq_uuid: {'hostname': hostname, 'device_rp_uuid': rp_uuid,
                   'instance_uuid': instance.uuid}
        for arq_uuid, (rp_uuid, hostname) in bindings.items()})
    cyclient = nc_client.get_client(context)
    deadline = clock() + CONF.arq_binding_timeout
    pause = POLL_FIRST
    while True:
        arqs = cyclient.get_arqs_for_instance(instance.uuid)
        states = {arq.get('uuid'): arq.get('state') for arq in arqs}
        if (all(states.get(u) in RESOLVED for u in bindings) or
                clock() >= deadline):
            break
        sleep(pause)
        pause = min(pause * 2, POLL_MAX)
    arqs = nc_compute.check_bound(arqs, list(bindings))
    function_check.check(context, instance, arqs)
    return arqs


def _source(migration):
    return {name for name in (migration.source_compute,
                              migration.source_node) if name}


def rebind_source(context, instance, migration):
    """Delete the ARQs bound to another host than the move's source; bind
    the parked ones again to their own provider and host.

    :raises: what :func:`bind_and_poll` raises; the parked ARQs are then
        still remembered.
    """
    source = _source(migration)
    arqs = nc_client.get_client(context).get_arqs_for_instance(
        instance.uuid)
    move.retire(context, instance, [arq.get('uuid') for arq in arqs
                                    if arq.get('hostname') not in source])
    # Those still Bound on the source: their unbind never happened.
    bound = {arq.get('uuid') for arq in arqs
             if arq.get('hostname') in source and
             arq.get('state') == 'Bound'}
    again = {u: (rp, host) for u, rp, host in move.parked(instance)
             if u not in bound}
    if again:
        bind_and_poll(context, instance, again)
        LOG.info('Bound the parked accelerator requests %s again',
                 ','.join(sorted(again)), instance=instance)
    move.store(instance, move.PARKED_PREFIX, [])
    instance.save()


def _moving_accelerators(instance):
    return bool(move.parked(instance) or move.has_accelerators(instance) or
                move.migration_flavor(instance) and
                move.migration_flavor(instance).extra_specs.get(
                    move.DP_EXTRA_SPEC))


def resize_migrating(manager, context, instance, migration):
    """The source restarted with the server in RESIZE_MIGRATING: put the
    allocation, the ARQs and the migration back before upstream rebuilds
    the guest on the source. Nothing for a server without accelerators.

    :param manager: the ComputeManager (its ``_revert_allocation``).
    :raises: the failure to bind the source's ARQs again; upstream then
        logs it and does not rebuild the guest (which would lack them).
    """
    if not _moving_accelerators(instance):
        return
    LOG.info('nova-compute stopped while the server was moving: giving '
             'the source its accelerators back', instance=instance)
    # Upstream's libvirt finish_revert_migration reads the flavor the
    # server had before the move; the source sets it only after the disks
    # moved.
    if instance.old_flavor is None:
        instance.old_flavor = instance.flavor
    manager._revert_allocation(context, instance, migration)
    rebind_source(context, instance, migration)
    migration.status = 'error'
    migration.save()
