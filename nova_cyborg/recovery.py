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

ADDING_ACCELERATOR or REMOVING_ACCELERATOR (the task states of the
``addAccelerator`` and ``removeAccelerator`` actions, nova_cyborg.rpc): the
compute died in the middle of the action, which would otherwise hold the
server for good (every other action is refused while a task state is set).
:func:`accelerator_action_interrupted` clears the task state after making
the server's ARQs agree with what it records: a half-done attach is rolled
back (the ARQs it created are deleted, those it parked bound again, the
resources it added to the allocation taken out; its profile is known from
the record nova_cyborg.attach saves before the allocation changes), a
detach whose ARQs are already gone is completed (its records and
allocation go).

nova-compute serves no RPC while ``_init_instance`` runs, so no
``accelerator-request-bound`` event can reach it: the binding is awaited
by reading the ARQs from Cyborg until each is resolved
(:func:`bind_and_poll`), for at most ``[DEFAULT] arq_binding_timeout``
seconds.
"""

import time

from oslo_log import log as logging

from nova.compute import vm_states
import nova.conf

from nova_cyborg import allocations
from nova_cyborg import attach as nc_attach
from nova_cyborg.bookkeeping import arq_owner
from nova_cyborg.bookkeeping import attached
from nova_cyborg.bookkeeping import own_arqs
from nova_cyborg import client as nc_client
from nova_cyborg import compute as nc_compute
from nova_cyborg import function_check
from nova_cyborg import heal
from nova_cyborg import move
from nova_cyborg import rpc

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
    if own_arqs(instance):
        instance.save()
    cyclient = nc_client.get_client(context)
    deadline = clock() + CONF.arq_binding_timeout
    pause = POLL_FIRST
    while True:
        arqs = cyclient.get_arqs_for_instance(arq_owner(instance))
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
    """Delete the destination's ARQs (:func:`nova_cyborg.move.
    destination_arqs`); bind the parked ones again to their own provider
    and host.

    :raises: what :func:`bind_and_poll` raises; the parked ARQs are then
        still remembered.
    """
    source = _source(migration)
    arqs = nc_client.get_client(context).get_arqs_for_instance(
        arq_owner(instance))
    destination = move.destination_arqs(instance, arqs, source)
    move.retire(context, instance, destination)
    _unpark(context, instance, [arq for arq in arqs
                                if arq.get('uuid') not in destination])


def _unpark(context, instance, arqs):
    """Bind the parked ARQs again but those Bound in ``arqs`` (their unbind
    never happened); forget them."""
    bound = {arq.get('uuid') for arq in arqs if arq.get('state') == 'Bound'}
    again = {u: (rp, host) for u, rp, host in move.parked(instance)
             if u not in bound}
    if again:
        bind_and_poll(context, instance, again)
        LOG.info('Bound the parked accelerator requests %s again',
                 ','.join(sorted(again)), instance=instance)
    move.store(instance, move.PARKED_PREFIX, [])
    instance.save()


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
    entries = move.parked(instance)
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
    _unpark(context, instance, nc_client.get_client(
        context).get_arqs_for_instance(arq_owner(instance)))


def moving_accelerators(instance):
    """Whether a move of ``instance`` involves accelerators: ARQs parked
    on the source, accelerators now, or a profile in the flavor it is
    being resized to."""
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


def _unaccounted(reportclient, context, instance, cyclient, rcs):
    """What the allocation holds of ``rcs`` beyond the instance's Bound
    ARQs (one unit of its group's resource class each)."""
    bound = [arq for arq in cyclient.get_arqs_for_instance(arq_owner(instance))
             if arq.get('state') == 'Bound']
    expected = (heal._allocations(bound, heal._profile_groups(cyclient,
                                                              bound))
                if bound else {})
    current = reportclient.get_allocs_for_consumer(
        context, instance.uuid).get('allocations', {})
    excess = {}
    for rp, alloc in current.items():
        want = expected.get(rp, {}).get('resources', {})
        for rc, amount in alloc.get('resources', {}).items():
            if rc in rcs and amount > want.get(rc, 0):
                excess.setdefault(rp, {'resources': {}})['resources'][rc] = (
                    amount - want.get(rc, 0))
    return excess


def _attaching(instance):
    try:
        return nc_attach.attaching(instance)
    except ValueError as e:
        LOG.warning('Ignoring the attach record: %s', e, instance=instance)
        return None


def _undo_attach(manager, context, instance):
    """Roll back an attach that did not record its allocation (the last
    step before a running guest gets the device): delete its ARQs, bind
    the parked ones again, take out of the allocation what no Bound ARQ
    accounts for. The profile is known from the attach record (saved
    before the allocation changed) or from the ARQs recorded."""
    done = {entry.split(' ', 1)[0]
            for entry in move.entries(instance, rpc.ALLOC_PREFIX)}
    pending = [(u, p) for u, p in attached(instance)
               if p not in done]
    profiles = {p for _u, p in pending}
    profile = _attaching(instance)
    if profile not in (None, *done):
        profiles.add(profile)
    profiles = sorted(profiles)
    move.retire(context, instance, [u for u, _p in pending])
    nc_attach.forget(instance, profiles)
    nc_attach.mark_attaching(instance, None)
    instance.save()
    cyclient = nc_client.get_client(context)
    if move.parked(instance):
        _unpark(context, instance,
                cyclient.get_arqs_for_instance(arq_owner(instance)))
    rcs = {rc for name in profiles for group in
           nc_client.get_device_profile_request_groups(context, name)
           for rc in group.resources}
    excess = _unaccounted(manager.reportclient, context, instance, cyclient,
                          rcs)
    if excess:
        allocations.remove(manager.reportclient, context, instance, excess)
    if profiles:
        LOG.info('Rolled back the attach of device profile(s) %s that '
                 'nova-compute was doing when it stopped',
                 ', '.join(profiles), instance=instance)


def _finish_detach(manager, context, instance):
    """Complete a detach whose ARQs are gone already: its records go, and
    what it added to the allocation if still there (at most what no Bound
    ARQ accounts for). A detach that deleted nothing yet is left undone:
    the accelerators stay attached."""
    cyclient = nc_client.get_client(context)
    present = {arq.get('uuid')
               for arq in cyclient.get_arqs_for_instance(arq_owner(instance))}
    by_profile = {}
    for arq_uuid, profile in attached(instance):
        by_profile.setdefault(profile, []).append(arq_uuid)
    gone = sorted(p for p, arq_uuids in by_profile.items()
                  if not present & set(arq_uuids))
    for profile in gone:
        added = nc_attach.added_allocations(instance, profile)
        excess = _unaccounted(manager.reportclient, context, instance,
                              cyclient, {rc for alloc in added.values()
                                         for rc in alloc['resources']})
        still = {}
        for rp, alloc in added.items():
            for rc, amount in alloc['resources'].items():
                left = min(amount, excess.get(rp, {}).get(
                    'resources', {}).get(rc, 0))
                if left:
                    still.setdefault(rp, {'resources': {}})['resources'][
                        rc] = left
        if still:
            allocations.remove(manager.reportclient, context, instance,
                               still)
        nc_attach.forget(instance, [profile])
        instance.save()
        LOG.info('Completed the detach of device profile %s that '
                 'nova-compute was doing when it stopped', profile,
                 instance=instance)


def accelerator_action_interrupted(manager, context, instance):
    """nova-compute restarted with the server in the task state of an
    attach or detach: make its ARQs, records and allocation agree, then
    clear the task state. Never raises (what fails is logged: the task
    state is cleared all the same, so that the server can be acted on).
    """
    actions = {rpc.ADDING: _undo_attach, rpc.REMOVING: _finish_detach}
    settle = actions.get(instance.task_state)
    if settle is None:
        return
    try:
        settle(manager, context, instance)
    except Exception:  # noqa: B902 (logged; the task state is cleared)
        LOG.exception('Could not settle the accelerators of an action '
                      'interrupted by the stop of nova-compute',
                      instance=instance)
    LOG.info('Clearing task state %s left by a stopped nova-compute',
             instance.task_state, instance=instance)
    instance.task_state = None
    instance.save()
