"""Compute side: wait until the instance's ARQs are bound, then check them.

Routed from ``ComputeManager._get_bound_arq_resources``. The conductor
started the binding; Cyborg sends ``accelerator-request-bound`` events when
it finishes, possibly before this code starts waiting, so the ARQs that are
already resolved end the wait early.

Unlike upstream, every ARQ must be ``Bound`` (a BindFailed ARQ seen
through the early exit is refused too) and must carry an attach handle that
passes strict validation, and its device must hold the FPGA function its
device profile asks for (nova_cyborg.steps.function_check); otherwise the build
fails with a fault that names the ARQ or the functions and the reason.
The ARQs are read again after the wait only if some were not resolved yet
when it began (as upstream does): a boot whose binding Cyborg finished
first costs one read, not two. For a build, rebuild or unshelve, what was
read is handed to the guest's start check of the same request
(nova_cyborg.model.handoff), which does not read it again.
"""

import functools

from oslo_log import log as logging

import nova.conf
from nova import exception as nova_exception

from nova_cyborg.clients import allocations
from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import attach_handle
from nova_cyborg.model import bind_outcome
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.bookkeeping import arq_owner
from nova_cyborg.model import handoff
from nova_cyborg.steps import function_check

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

EVENT_NAME = 'accelerator-request-bound'


def _on_failed_event(event_name, instance):
    """Called by Nova when a bind event arrives with status ``failed``."""
    arq_uuid = event_name[len(EVENT_NAME) + 1:]
    raise exception.AcceleratorRequestNotBound(arq=arq_uuid,
                                               state='BindFailed')


def _wait(virtapi, cyclient, instance, arq_uuids, first=None):
    """Wait until Cyborg resolved every ARQ of ``arq_uuids``.

    :param first: called once the bind events are waited for, before the
        ARQs are read (the wait for the conductor's word on a bind the
        build was cast before: Cyborg's events that come meanwhile reach
        their waiter).

    :returns: the resolved ARQs read as the wait began if they include
        every one of ``arq_uuids`` (nothing was left to wait for, so they
        need not be read again), else None.
    """
    events = [(EVENT_NAME, arq_uuid) for arq_uuid in arq_uuids]
    resolved = None
    try:
        with virtapi.wait_for_instance_event(
                instance, events, timeout=CONF.arq_binding_timeout,
                error_callback=_on_failed_event):
            if first is not None:
                first()
            resolved = _read_resolved(cyclient, instance)
            # Events for ARQs resolved before we started waiting are lost.
            early = [(EVENT_NAME, arq['uuid']) for arq in resolved or ()
                     if arq.get('uuid') in arq_uuids]
            if early:
                virtapi.exit_wait_early(early)
    except nova_exception.InstanceEventTimeout:
        if resolved is not None:
            raise
        # Cyborg could not be read as the wait began, so events sent
        # before it were missed: the ARQs may be bound all the same.
        try:
            arqs = cyclient.get_arqs_for_instance(arq_owner(instance))
        except exception.CyborgError:
            LOG.warning('Could not read the accelerator requests after '
                        'waiting for their binding', exc_info=True,
                        instance=instance)
            raise nova_exception.InstanceEventTimeout()
        if not _all_bound(arqs, arq_uuids):
            raise
        return arqs
    if set(arq_uuids) <= {arq.get('uuid') for arq in resolved or ()}:
        return resolved
    return None


def _read_resolved(cyclient, instance):
    """The instance's resolved ARQs, or None if Cyborg could not be read:
    the bind events still tell when they are resolved."""
    try:
        return cyclient.get_arqs_for_instance(arq_owner(instance),
                                              only_resolved=True)
    except exception.CyborgError as exc:
        LOG.warning('Could not read the accelerator requests before '
                    'waiting for their binding (%s); waiting for the bind '
                    'events', exc.format_message(), instance=instance)
        return None


def _all_bound(arqs, arq_uuids):
    states = {arq.get('uuid'): arq.get('state') for arq in arqs
              if isinstance(arq, dict)}
    return all(states.get(arq_uuid) == 'Bound' for arq_uuid in arq_uuids)


def check_bound(arqs, arq_uuids):
    """Return the ARQs named by arq_uuids if each is Bound and valid.

    :raises: AcceleratorRequestNotBound, InvalidAttachHandle
    """
    by_uuid = {arq.get('uuid'): arq for arq in arqs if isinstance(arq, dict)}
    result = []
    for arq_uuid in arq_uuids:
        arq = by_uuid.get(arq_uuid)
        if arq is None:
            raise exception.AcceleratorRequestNotBound(arq=arq_uuid,
                                                       state='missing')
        if arq.get('state') != 'Bound':
            raise exception.AcceleratorRequestNotBound(
                arq=arq_uuid, state=str(arq.get('state'))[:32])
        result.append(arq)
    attach_handle.validate_for_attach(result)
    return result


class NoWordOnTheBind(nova_exception.NovaException):
    """The conductor did not say how the bind of a build cast before it
    answered ended (not an InstanceEventTimeout: Cyborg's events are not
    what is missing, and ARQs Bound all the same are not to be used)."""

    msg_fmt = _('The conductor did not say how the bind of the accelerator '
                'requests ended within %(timeout)d seconds')


def _conductors_word(instance):
    """Wait for the conductor's word on a bind it did not wait for
    (nova_cyborg.model.bind_outcome), for at most ``[DEFAULT]
    arq_binding_timeout`` seconds.

    :raises: NoWordOnTheBind; AcceleratorRequestBindingFailed with the
        conductor's reason and the ARQs it could not delete.
    """
    word = bind_outcome.wait(instance.uuid, CONF.arq_binding_timeout)
    if word is None:
        raise NoWordOnTheBind(timeout=CONF.arq_binding_timeout)
    status, data = word
    if status != bind_outcome.COMPLETED:
        raise exception.AcceleratorRequestBindingFailed(
            arqs=[u for u in data.get('arqs', '').split(',') if u],
            msg=data.get('reason') or _('no reason given'))


def get_bound_arqs(virtapi, context, instance, arq_uuids, hand_off=False):
    """Wait for the binding of the instance's ARQs; return them, checked.

    :param arq_uuids: the ARQs the conductor bound, or None for all the
        instance's ARQs.
    :param hand_off: True where the guest is spawned next in this request
        (a build, rebuild, evacuation, unshelve): the ARQs read here go to
        its start check (nova_cyborg.model.handoff), which does not read them
        again.
    :returns: the ARQ dicts, each Bound with a validated attach handle, on
        a device holding the function its profile asks for.
    :raises: InstanceEventTimeout, AcceleratorRequestNotBound,
        InvalidAttachHandle, CyborgError, FunctionCheckFailed,
        AcceleratorRequestBindingFailed (a build cast before its bind
        answered, whose bind failed), NoWordOnTheBind
    """
    # A build cast before Cyborg answered the conductor's bind waits for
    # the conductor's word on it first.
    first = (functools.partial(_conductors_word, instance)
             if bind_outcome.pending(context, instance) else None)
    cyclient = nc_client.get_client(context)
    if arq_uuids is None:
        arq_uuids = [arq['uuid'] for arq in
                     cyclient.get_arqs_for_instance(arq_owner(instance))]
    if not arq_uuids:
        return []
    arqs = _wait(virtapi, cyclient, instance, arq_uuids, first)
    if arqs is None:
        arqs = cyclient.get_arqs_for_instance(arq_owner(instance))
    read = arqs
    arqs = check_bound(arqs, arq_uuids)
    function_check.check(context, instance, arqs)
    if hand_off:
        handoff.keep(context, instance.uuid, read)
    LOG.info('Accelerator requests %s are bound', ','.join(arq_uuids),
             instance=instance)
    return arqs


def build_fault_message(exc):
    """The reason a build failed while getting its accelerators."""
    if isinstance(exc, (nova_exception.InstanceEventTimeout,
                        NoWordOnTheBind)):
        return _('Timed out after %d seconds waiting for Cyborg to bind the '
                 'accelerator requests') % CONF.arq_binding_timeout
    if isinstance(exc, nova_exception.NovaException):
        return _('Failure getting accelerator requests: %s') % (
            exc.format_message())
    return _('Failure getting accelerator requests: %s') % (
        str(exc)[:500] or type(exc).__name__)


def _reschedules(exc):
    """Whether a failure of this host may not happen on another one."""
    if isinstance(exc, function_check.FunctionCheckFailed):
        return True
    return (isinstance(exc, exception.AcceleratorRequestNotBound) and
            exc.kwargs.get('state') == 'BindFailed')


def build_failure(instance, exc):
    """The exception a build raises when its accelerators failed.

    Called after the instance's ARQs were deleted. A bind that Cyborg
    failed on this host (no free attach handle, programming failed) or a
    device holding the wrong function may do on another host, so it
    reschedules; anything else (timeout, hostile attach handle, Cyborg
    unreachable) aborts the build with a fault that says why.

    Before a reschedule the allocation of this host is freed here, with
    retries (nova_cyborg.clients.allocations.free): Nova's own delete before it
    casts the reschedule is tried once, and a Placement error there (a
    database deadlock was seen) left the server in BUILD for good, with no
    host. If Placement never frees it, the build is aborted (ERROR) with a
    fault naming both failures; Nova's delete then finds nothing to free.
    """
    if isinstance(exc, exception.AcceleratorRequestBindingFailed):
        # The conductor's bind failed (a build cast first): the ARQs it
        # could not delete go with the server.
        bookkeeping.remember_retired_quietly(instance, exc.arqs)
        return exception.BindFailedBuildAborted(
            reason=exc.format_message(), instance_uuid=instance.uuid)
    if not _reschedules(exc):
        return nova_exception.BuildAbortException(
            reason=build_fault_message(exc), instance_uuid=instance.uuid)
    # Short: when no host is left, this reason ends a fault that Nova
    # cuts at 255 characters, after the conductor's own words.
    reason = exc.format_message()
    try:
        allocations.free(instance._context, instance.uuid)
    except allocations.AllocationFreeFailed as free_exc:
        LOG.error('Not rescheduling after "%(reason)s": %(err)s',
                  {'reason': reason, 'err': free_exc.format_message()},
                  instance=instance)
        return nova_exception.BuildAbortException(
            reason=_('%(free)s; this host had refused the server: '
                     '%(reason)s') % {
                'free': free_exc.format_message(), 'reason': reason},
            instance_uuid=instance.uuid)
    return nova_exception.ComputeResourcesUnavailable(reason=reason)
