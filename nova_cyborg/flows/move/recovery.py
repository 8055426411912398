"""A nova-compute that died in the middle of a move gets its devices back.

Called from ``ComputeManager._init_instance`` (patch 0003) when the
restarted nova-compute finds a server it was moving.

RESIZE_MIGRATING: the compute died on the source after
:func:`nova_cyborg.flows.move.resize.swap_to_destination` (the disk copy,
say): the source's ARQs are parked (unbound), the destination's bound, the
server's allocation is the destination's and the source's is held by the
migration. Upstream rolls the move back by rebuilding the guest on the
source (the driver's ``finish_revert_migration``) and leaves the
allocations as they are (Nova bug 1836369) and the migration in
``migrating``. For a server with accelerators, :func:`resize_migrating`
first puts back what the move changed: the source's allocation goes back
to the server (which frees the destination's devices in Placement), the
destination's ARQs are deleted, the parked ones bound again to their own
providers on the source, and the migration ends in ``error``. The guest
that upstream then builds gets the source's devices, and only those.

The restart in the middle of an accelerator action is
nova_cyborg.flows.attach.recovery.

nova-compute serves no RPC while ``_init_instance`` runs, so no
``accelerator-request-bound`` event can reach it: the binding is awaited
by reading the ARQs from Cyborg until each is resolved
(:func:`nova_cyborg.steps.arqs.bind_and_poll`), for at most ``[DEFAULT]
arq_binding_timeout`` seconds.
"""

from oslo_log import log as logging

from nova.compute import vm_states
import nova.conf

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg.flows.move import resize as move
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.bookkeeping import arq_owner
from nova_cyborg.steps import arqs as arq_steps

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF


def _source(migration):
    return {name for name in (migration.source_compute,
                              migration.source_node) if name}


def rebind_source(context, instance, migration):
    """Delete the destination's ARQs (:func:`nova_cyborg.flows.move.resize.
    destination_arqs`); bind the parked ones again to their own provider
    and host.

    :raises: what :func:`bind_and_poll` raises; the parked ARQs are then
        still remembered.
    """
    source = _source(migration)
    arqs = nc_client.get_client(context).get_arqs_for_instance(
        arq_owner(instance))
    destination = move.destination_arqs(instance, arqs, source)
    arq_steps.retire(context, instance, destination)
    arq_steps.unpark_polling(context, instance,
                             [arq for arq in arqs
                              if arq.get('uuid') not in destination])


def parked_here(context, instance):
    """Bind again the ARQs a failed revert left parked on this host.

    A revert whose binding of the parked ARQs on the source failed
    (Cyborg unreachable, the bind refused) leaves the server in ERROR on
    the source, its allocation there, and its own ARQs parked (unbound,
    remembered in its system metadata): Cyborg no longer ties them to it.
    Called before a hard reboot, a power on or a rebuild on the same host
    reads the server's ARQs, so that the guest built next gets its devices
    back rather than none. Nothing happens while the server is in
    VERIFY_RESIZE (its parked ARQs are the source's, it runs on the
    destination) or when the ARQs were parked on another host.

    :raises: what :func:`bind_and_poll` raises (the ARQs stay parked; the
        operation fails with the reason, and can be retried).
    """
    entries = bookkeeping.parked(instance)
    if not entries or instance.vm_state == vm_states.RESIZED:
        return
    here = {name for name in (instance.host, instance.node) if name}
    if any(host not in here for _u, _rp, host in entries):
        LOG.warning('Accelerator requests %(arqs)s are parked for another '
                    'host than %(host)s; left as they are',
                    {'arqs': ','.join(u for u, _rp, _h in entries),
                     'host': instance.host}, instance=instance)
        return
    LOG.info('A revert left accelerator requests %s parked on this host: '
             'binding them again', ','.join(u for u, _rp, _h in entries),
             instance=instance)
    arq_steps.unpark_polling(context, instance, nc_client.get_client(
        context).get_arqs_for_instance(arq_owner(instance)))


def moving_accelerators(instance):
    """Whether a move of ``instance`` involves accelerators: ARQs parked
    on the source, accelerators now, or a profile in the flavor it is
    being resized to."""
    return bool(bookkeeping.parked(instance) or
                bookkeeping.has_accelerators(instance) or
                move.migration_flavor(instance) and
                move.migration_flavor(instance).extra_specs.get(
                    bookkeeping.DP_EXTRA_SPEC))


def resize_migrating(manager, context, instance, migration):
    """The source restarted with the server in RESIZE_MIGRATING: put the
    allocation, the ARQs and the migration back before upstream rebuilds
    the guest on the source. Nothing for a server without accelerators.

    :param manager: the ComputeManager (its ``_revert_allocation``).
    :raises: the failure to bind the source's ARQs again; upstream then
        logs it and does not rebuild the guest (which would lack them).
    """
    if not moving_accelerators(instance):
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
