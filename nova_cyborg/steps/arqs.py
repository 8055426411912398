"""ARQ steps that several flows take: bind and wait for the binding, park
and unpark a server's ARQs, retire those it no longer uses, read the ARQs
of its guest.

A move parks (unbinds, remembers) the source's ARQs while the guest is
off and binds them again on a revert (nova_cyborg.flows.move); an attach
parks those of a server that is off (nova_cyborg.flows.attach). A
nova-compute that cannot receive the bind events (it is starting:
nova_cyborg.flows.move.recovery, nova_cyborg.flows.attach.recovery) binds
and reads the ARQs until they are resolved (:func:`bind_and_poll`), for at
most ``[DEFAULT] arq_binding_timeout`` seconds.
"""

import time

from oslo_log import log as logging

import nova.conf

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.bookkeeping import arq_owner
from nova_cyborg.model.bookkeeping import has_accelerators
from nova_cyborg.model.bookkeeping import on_host
from nova_cyborg.model.bookkeeping import own_arqs
from nova_cyborg.model.bookkeeping import parked
from nova_cyborg.model.bookkeeping import PARKED_PREFIX
from nova_cyborg.model.bookkeeping import RETIRED_PREFIX
from nova_cyborg.model.bookkeeping import store
from nova_cyborg.steps import bound_arqs
from nova_cyborg.steps import function_check

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: ARQ states in which Cyborg is done binding.
RESOLVED = ('Bound', 'BindFailed')
#: First pause between two reads of the ARQs, doubled up to POLL_MAX.
POLL_FIRST = 0.1
POLL_MAX = 2.0


def retire(context, instance, arq_uuids):
    """Delete ARQs the instance no longer uses; remember those that fail."""
    retired = bookkeeping.entries(instance, RETIRED_PREFIX)
    retired += [u for u in arq_uuids if u not in retired]
    if not retired:
        return
    try:
        nc_client.get_client(context).delete_arqs_strictly(retired)
    except exception.CyborgError as e:
        LOG.error('Could not delete accelerator requests %(arqs)s that the '
                  'instance no longer uses; they are deleted at its next '
                  'resize or migration: %(err)s',
                  {'arqs': ','.join(retired), 'err': e}, instance=instance)
        bookkeeping.remember_retired(instance, retired)
        return
    LOG.info('Deleted accelerator requests %s', ','.join(retired),
             instance=instance)
    store(instance, RETIRED_PREFIX, [])
    instance.save()


def instance_arqs(context, instance):
    """The ARQs of the instance's guest: those bound to the instance on the
    host it is on now.

    Every path that builds the guest for a flavor with a device profile
    gets its accelerators here: hard reboot, power on, rescue, suspend and
    resume, host reboot, the end of a resize and of its revert. An ARQ
    bound to another host (a resize that failed after the destination's
    were bound, a dead host's) names that host's PCI functions: it is never
    given to this guest, only logged.

    :returns: ARQ dicts, or [] for a flavor without a device profile and
        no accelerator attached.
    """
    if not has_accelerators(instance):
        return []
    arqs = nc_client.get_client(context).get_arqs_for_instance(
        arq_owner(instance))
    mine = on_host(instance, arqs)
    if len(mine) != len(arqs):
        LOG.warning('Leaving out accelerator requests bound to another '
                    'host than %(host)s: %(arqs)s',
                    {'host': instance.node or instance.host,
                     'arqs': ','.join('%s@%s' % (arq.get('uuid'),
                                                 arq.get('hostname'))
                                      for arq in arqs if arq not in mine)},
                    instance=instance)
    return mine


def _bind(context, instance, bindings):
    """Bind ``{arq_uuid: (rp_uuid, hostname)}`` in the instance's project,
    whoever acts; save who owns them if they are bound under its alias."""
    nc_client.get_client(context, instance=instance).bind_arqs({
        arq_uuid: {'hostname': hostname, 'device_rp_uuid': rp_uuid,
                   'instance_uuid': instance.uuid}
        for arq_uuid, (rp_uuid, hostname) in bindings.items()})
    if own_arqs(instance):
        instance.save()


def bind_and_wait(virtapi, context, instance, bindings):
    """Bind ``{arq_uuid: (rp_uuid, hostname)}`` and wait until Bound.

    The ARQs are bound in the instance's project, whoever acts.

    :returns: those ARQs, Bound, with validated attach handles.
    """
    _bind(context, instance, bindings)
    return bound_arqs.get_bound_arqs(virtapi, context, instance,
                                     list(bindings))


def park(context, instance, arqs):
    """Unbind ``arqs``, remembering their provider and host.

    If the unbind fails, they may still be Bound: :func:`unpark` asks
    Cyborg before it binds anything again.
    """
    store(instance, PARKED_PREFIX, [
        '%s %s %s' % (arq['uuid'], arq['device_rp_uuid'], arq['hostname'])
        for arq in arqs])
    instance.save()
    nc_client.get_client(context).unbind_arqs([arq['uuid'] for arq in arqs])
    LOG.info('Parked accelerator requests %s of the source host',
             ','.join(arq['uuid'] for arq in arqs), instance=instance)


def still_bound(context, instance):
    return {arq.get('uuid') for arq in
            nc_client.get_client(context).get_arqs_for_instance(
                arq_owner(instance))
            if arq.get('state') == 'Bound'}


def unpark(virtapi, context, instance, bound=()):
    """Bind the parked ARQs again (but those in ``bound``, which still
    are: their unbind failed, or their bind went through already; Cyborg
    would refuse them) to their own provider and host; forget them."""
    again = [(u, rp, host) for u, rp, host in parked(instance)
             if u not in bound]
    if again:
        bind_and_wait(virtapi, context, instance,
                      {u: (rp, host) for u, rp, host in again})
        LOG.info('Bound the parked accelerator requests %s again',
                 ','.join(u for u, _rp, _host in again), instance=instance)
    store(instance, PARKED_PREFIX, [])
    instance.save()


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
    _bind(context, instance, bindings)
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
    arqs = bound_arqs.check_bound(arqs, list(bindings))
    function_check.check(context, instance, arqs)
    return arqs


def unpark_polling(context, instance, arqs):
    """Bind the parked ARQs again but those Bound in ``arqs`` (their unbind
    never happened); forget them."""
    bound = {arq.get('uuid') for arq in arqs if arq.get('state') == 'Bound'}
    again = {u: (rp, host) for u, rp, host in parked(instance)
             if u not in bound}
    if again:
        bind_and_poll(context, instance, again)
        LOG.info('Bound the parked accelerator requests %s again',
                 ','.join(sorted(again)), instance=instance)
    store(instance, PARKED_PREFIX, [])
    instance.save()
