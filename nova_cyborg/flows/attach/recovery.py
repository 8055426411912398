"""A nova-compute that died in the middle of an accelerator action.

Called from ``ComputeManager._init_instance`` (patch 0003) when the
restarted nova-compute finds a server in ADDING_ACCELERATOR or
REMOVING_ACCELERATOR (the task states of the ``addAccelerator`` and
``removeAccelerator`` actions, nova_cyborg.model.actions): the compute
died in the middle of the action, which would otherwise hold the server
for good (every other action is refused while a task state is set).
:func:`accelerator_action_interrupted` clears the task state after making
the server's ARQs agree with what it records: a half-done attach is rolled
back (the ARQs it created are deleted, those it parked bound again, the
resources it added to the allocation taken out; its profile is known from
the record nova_cyborg.flows.attach.compute saves before the allocation
changes), a detach whose ARQs are already gone is completed (its records
and allocation go).

nova-compute serves no RPC while ``_init_instance`` runs, so no
``accelerator-request-bound`` event can reach it: parked ARQs are bound
again by reading them from Cyborg until each is resolved
(:func:`nova_cyborg.steps.arqs.unpark_polling`).
"""

from oslo_log import log as logging

from nova_cyborg.clients import allocations
from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg.flows.attach import compute as nc_attach
from nova_cyborg.model import actions
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.bookkeeping import arq_owner
from nova_cyborg.model.bookkeeping import attached
from nova_cyborg.steps import arq_allocations
from nova_cyborg.steps import arqs as arq_steps

LOG = logging.getLogger(__name__)


def _unaccounted(reportclient, context, instance, cyclient, rcs):
    """What the allocation holds of ``rcs`` beyond the instance's Bound
    ARQs (one unit of its group's resource class each)."""
    bound = [arq for arq in cyclient.get_arqs_for_instance(arq_owner(instance))
             if arq.get('state') == 'Bound']
    expected = (arq_allocations.expected(bound, arq_allocations.profile_groups(
        cyclient, bound))
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
            for entry in bookkeeping.entries(instance, actions.ALLOC_PREFIX)}
    pending = [(u, p) for u, p in attached(instance)
               if p not in done]
    profiles = {p for _u, p in pending}
    profile = _attaching(instance)
    if profile not in (None, *done):
        profiles.add(profile)
    profiles = sorted(profiles)
    arq_steps.retire(context, instance, [u for u, _p in pending])
    nc_attach.forget(instance, profiles)
    nc_attach.mark_attaching(instance, None)
    instance.save()
    cyclient = nc_client.get_client(context)
    if bookkeeping.parked(instance):
        arq_steps.unpark_polling(
            context, instance,
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
    handlers = {actions.ADDING: _undo_attach, actions.REMOVING: _finish_detach}
    settle = handlers.get(instance.task_state)
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
