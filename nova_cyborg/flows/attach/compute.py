"""Compute side of attaching and detaching accelerators to a server.

Runs in nova-compute for the ``addAccelerator`` and ``removeAccelerator``
server actions (see :mod:`nova_cyborg.flows.attach.api`), under the instance's
lock. nova-api set the server's task state
(:mod:`nova_cyborg.clients.compute_rpc`), so nothing else acts on it meanwhile;
the work starts from the instance as it is in the database now (not the copy
the API cast), and the task state is cleared at the end, whatever the outcome.

Attach: the device profile's groups are allocated in Placement inside the
compute node's tree and added to the server's allocation; the ARQs are
created, bound to the allocated providers on this host and awaited; a
running guest gets the PCI devices hot-plugged through libvirt, a stopped
one gets them when it starts (its domain is rebuilt with all its ARQs).

Cyborg 17 binds no ARQ to a server that already has ARQs. A stopped
server's ARQs are therefore parked (unbound, kept) and bound again
together with the new ones; a running server that already has
accelerators is refused (stop it first), as unbinding devices a guest
uses would let Cyborg hand them to someone else.

Any failure puts everything back: new ARQs deleted, parked ones bound
again, the allocation as before; the instance action's event says why.

What was attached is kept in the instance's system metadata: the ARQs
(``nova_cyborg_attached_arq_<n>`` = "<uuid> <profile>") and the allocation
added (``nova_cyborg_attached_alloc_<n>`` = "<profile> <rp> <rc> <n>"), so
that detach removes exactly that. The profile being attached is recorded
(``nova_cyborg_attaching`` = "<version> <profile>") before the allocation
changes and cleared once the attach is recorded or put back, so that a
nova-compute that stops in between rolls it back at restart
(:mod:`nova_cyborg.flows.move.recovery`).
"""

import contextlib

from nova.compute import vm_states
from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging
from oslo_utils import excutils

from nova_cyborg.clients import allocations
from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import actions
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.bookkeeping import arq_owner
from nova_cyborg.model.bookkeeping import attached
from nova_cyborg.model.objects import accelerator_request as arq_obj
from nova_cyborg.steps import arqs as arq_steps
from nova_cyborg.virt import guard
from nova_cyborg.virt import libvirt as nc_libvirt

LOG = logging.getLogger(__name__)

ATTACHED_PREFIX = bookkeeping.ATTACHED_PREFIX
ALLOC_PREFIX = actions.ALLOC_PREFIX
#: System metadata: "<version> <profile>" of the attach under way.
ATTACHING_KEY = 'nova_cyborg_attaching'
ATTACHING_VERSION = '1'


@contextlib.contextmanager
def _task(instance, task_state):
    """Work on the instance as it is now; clear its task state at the end.

    :raises: AcceleratorAttachFailed if the server is not in
        ``task_state`` (a request that did not come through the API's
        checks), without touching it.
    """
    instance.refresh()
    if instance.task_state != task_state:
        raise exception.AcceleratorAttachFailed(reason=_(
            'the server is in task state %(now)s, not %(want)s') %
            {'now': instance.task_state, 'want': task_state})
    try:
        yield
    finally:
        instance.task_state = None
        try:
            instance.save(expected_task_state=[task_state])
        except (nova_exception.UnexpectedTaskStateError,
                nova_exception.InstanceNotFound) as e:
            # Deleted meanwhile (a delete is allowed in any task state).
            LOG.info('Not clearing task state %(state)s: %(err)s',
                     {'state': task_state, 'err': e}, instance=instance)


def added_allocations(instance, profile):
    """{rp: {'resources': {rc: amount}}} the attach of ``profile`` added
    to the allocation, as recorded."""
    added = {}
    for entry in bookkeeping.entries(instance, ALLOC_PREFIX):
        name, rp, rc, amount = entry.split(' ')
        if name == profile:
            added.setdefault(rp, {'resources': {}})['resources'][rc] = int(
                amount)
    return added


def _remember(instance, profile, arq_uuids, added):
    bookkeeping.store(
        instance, ATTACHED_PREFIX,
        bookkeeping.entries(instance, ATTACHED_PREFIX) +
        ['%s %s' % (arq_uuid, profile) for arq_uuid in arq_uuids])
    bookkeeping.store(instance, ALLOC_PREFIX,
                      bookkeeping.entries(instance, ALLOC_PREFIX) +
                      ['%s %s %s %d' % (profile, rp, rc, amount)
                       for rp, alloc in sorted(added.items())
                       for rc, amount in sorted(alloc['resources'].items())])


def forget(instance, profiles):
    """Drop the records of the attaches of ``profiles``; not saved."""
    bookkeeping.store(
        instance, ATTACHED_PREFIX,
        [e for e in bookkeeping.entries(instance, ATTACHED_PREFIX)
         if e.split(' ', 1)[1] not in profiles])
    bookkeeping.store(instance, ALLOC_PREFIX,
                      [e for e in bookkeeping.entries(instance, ALLOC_PREFIX)
                       if e.split(' ', 1)[0] not in profiles])


def mark_attaching(instance, profile):
    """Record the profile being attached, or clear it (``None``); not
    saved."""
    if profile is None:
        instance.system_metadata.pop(ATTACHING_KEY, None)
    else:
        instance.system_metadata[ATTACHING_KEY] = '%s %s' % (
            ATTACHING_VERSION, profile)


def attaching(instance):
    """The profile of the attach under way, or ``None``.

    :raises: ValueError for a record of an unknown version.
    """
    value = instance.system_metadata.get(ATTACHING_KEY)
    if value is None:
        return None
    version, _sep, profile = value.partition(' ')
    if version != ATTACHING_VERSION or not profile:
        raise ValueError('unknown attach record %r' % value)
    return profile


def _driver(manager, action, context, instance, arqs):
    """Ask the virt driver (``attach_accelerators`` or
    ``detach_accelerators``, the ComputeDriver methods of patch 0024) to
    plug or unplug ``arqs`` in the running guest, or to give a guest that
    is not running a definition with exactly the devices the server holds
    now: a later start from it (unrescue, soft reboot) must neither lose
    an attached device nor bring back a removed one.

    :raises: AcceleratorAttachFailed for a driver that cannot.
    """
    method = (manager.driver.attach_accelerators
              if action == 'addAccelerator'
              else manager.driver.detach_accelerators)
    try:
        method(context, instance, arqs)
    except NotImplementedError:
        raise exception.AcceleratorAttachFailed(reason=_(
            'the %s virt driver cannot attach or detach accelerators')
            % type(manager.driver).__name__)


def _bind(manager, context, instance, cyclient, dp_name, mapping, existing,
          created):
    arqs = cyclient.create_arqs(dp_name)
    created.extend(arq.get('uuid') for arq in arqs)
    _remember(instance, dp_name, created, {})
    instance.save()
    bindings = {
        arq['uuid']: (cyclient.get_arq_device_rp_uuid(arq, mapping, None),
                      instance.node)
        for arq in arqs}
    if existing:
        arq_steps.park(context, instance, existing)
        bindings.update({arq_uuid: (rp, host) for arq_uuid, rp, host in
                         bookkeeping.parked(instance)})
    bound = arq_steps.bind_and_wait(manager.virtapi, context, instance,
                                    bindings)
    bookkeeping.store(instance, bookkeeping.PARKED_PREFIX, [])
    instance.save()
    return [arq for arq in bound if arq.get('uuid') in created]


def _restore(manager, context, instance, cyclient, dp_name, added, created):
    """Undo a failed attach, step by step; never raises.

    The new ARQs go (deleted, or recorded as retired when Cyborg fails,
    deleted at a later move or the delete); the records of the attach go;
    the allocation loses what the attach added (Placement); the parked ARQs
    are bound again (Cyborg). A step that fails does not stop the next
    ones, so Cyborg being down leaves the allocation as it was before. The
    attach record (``nova_cyborg_attaching``) is cleared only once the
    allocation is: while it stays, nova-compute's restart rolls the attach
    back (nova_cyborg.flows.move.recovery). Parked ARQs that cannot be bound
    again stay parked, and the next start of the guest binds them
    (nova_cyborg.flows.move.recovery).

    :returns: what could not be put back (strings; empty if nothing).
    """
    failures = []

    def step(what, func, *args):
        try:
            func(*args)
            return True
        except Exception as e:  # noqa: B902 (each step is best effort)
            LOG.error('Putting back the failed attach of device profile '
                      '%(dp)s: %(what)s failed: %(err)s',
                      {'dp': dp_name, 'what': what,
                       'err': exception.reason(e)}, instance=instance)
            failures.append('%s: %s' % (what, exception.reason(e)))
            return False

    step(_('deleting its accelerator requests'), arq_steps.retire, context,
         instance, created)
    forget(instance, [dp_name])
    if step(_('taking its devices out of the allocation'),
            allocations.remove, manager.reportclient, context, instance,
            added):
        mark_attaching(instance, None)
    step(_('saving the server'), instance.save)
    if bookkeeping.parked(instance):
        step(_('binding the parked accelerator requests again'), _unpark,
             manager, context, instance, cyclient)
    return failures


def _unpark(manager, context, instance, cyclient):
    # A failure after the bind left some of them bound already.
    bound = {arq.get('uuid') for arq in
             cyclient.get_arqs_for_instance(arq_owner(instance))}
    arq_steps.unpark(manager.virtapi, context, instance, bound)


def add(manager, context, instance, dp_name):
    """Attach the accelerators of device profile ``dp_name``.

    :param manager: the ComputeManager (its virtapi, driver, reportclient).
    :raises: AcceleratorAttachFailed once everything is put back.
    """
    with _task(instance, actions.ADDING):
        _add(manager, context, instance, dp_name)


def _add(manager, context, instance, dp_name):
    if dp_name in bookkeeping.attached_profiles(instance):
        raise exception.AcceleratorAttachFailed(reason=_(
            'the accelerators of device profile %s are attached already')
            % dp_name)
    groups = nc_client.get_device_profile_request_groups(context, dp_name)
    cyclient = nc_client.get_client(context)
    running = instance.vm_state == vm_states.ACTIVE
    existing = cyclient.get_arqs_for_instance(arq_owner(instance))
    if existing and running:
        raise exception.AcceleratorAttachFailed(reason=_(
            'Cyborg binds no accelerator to a server that already has '
            'some; stop the server first'))
    node = objects.ComputeNode.get_by_host_and_nodename(
        context, instance.host, instance.node)
    # Saved before the allocation changes: a nova-compute that stops
    # before the attach is recorded (or put back) rolls it back at restart.
    mark_attaching(instance, dp_name)
    instance.save()
    try:
        added, mapping = allocations.add(manager.reportclient, context,
                                         instance, groups, node.uuid)
    except Exception:
        with excutils.save_and_reraise_exception():
            mark_attaching(instance, None)
            instance.save()
    created = []
    try:
        arqs = _bind(manager, context, instance, cyclient, dp_name, mapping,
                     existing, created)
        _remember(instance, dp_name, [], added)
        mark_attaching(instance, None)
        instance.save()
        if running:
            _refuse_mdevs(arqs)
        _driver(manager, 'addAccelerator', context, instance, arqs)
    except Exception as e:
        reason = exception.reason(e)
        LOG.error('Attaching the accelerators of device profile %(dp)s '
                  'failed; putting everything back: %(err)s',
                  {'dp': dp_name, 'err': reason}, instance=instance)
        left = _restore(manager, context, instance, cyclient, dp_name,
                        added, created)
        if left:
            reason = _('%(reason)s; not put back: %(left)s') % {
                'reason': reason, 'left': '; '.join(left)}
        raise exception.AcceleratorAttachFailed(reason=reason)
    LOG.info('Attached accelerators %s of device profile %s',
             ','.join(created), dp_name, instance=instance)


def remove(manager, context, instance, dp_name):
    """Detach the accelerators attached for device profile ``dp_name``.

    :raises: AcceleratorAttachFailed if none is attached, if a device
        cannot be unplugged from the running guest, or if the guest did
        not let go of a device (then nothing else changed).
    """
    with _task(instance, actions.REMOVING):
        _remove(manager, context, instance, dp_name)


def _remove(manager, context, instance, dp_name):
    mine = [arq_uuid for arq_uuid, profile in attached(instance)
            if profile == dp_name]
    if not mine:
        raise exception.AcceleratorAttachFailed(reason=_(
            'no accelerator of device profile %s is attached') % dp_name)
    cyclient = nc_client.get_client(context)
    arqs = [arq for arq in cyclient.get_arqs_for_instance(arq_owner(instance))
            if arq.get('uuid') in mine]
    if instance.vm_state == vm_states.ACTIVE and arqs:
        try:
            actions.refuse_unpluggable(arqs)
        except exception.OperationRefused as e:
            raise exception.AcceleratorAttachFailed(
                reason=e.format_message())
        _driver(manager, 'removeAccelerator', context, instance, arqs)
    added = added_allocations(instance, dp_name)
    arq_steps.retire(context, instance, mine)
    try:
        allocations.remove(manager.reportclient, context, instance, added)
    except exception.AcceleratorAttachFailed as e:
        # Nothing uses these resources any more; heal_allocations --force
        # rebuilds the allocation from the flavor and the Bound ARQs.
        LOG.error('Could not take %(added)s out of the allocation: %(err)s',
                  {'added': added, 'err': e}, instance=instance)
    # Forgotten last: a compute that stops before this point finds the
    # records at restart and completes the detach
    # (nova_cyborg.flows.move.recovery).
    forget(instance, [dp_name])
    instance.save()
    if instance.vm_state != vm_states.ACTIVE:
        try:
            _driver(manager, 'removeAccelerator', context, instance, [])
        except guard.GuestDevicesUnchecked as e:
            # The check at the next start removes them.
            LOG.warning('The guest definition still holds the devices: %s',
                        e.format_message(), instance=instance)
    LOG.info('Detached accelerators %s of device profile %s',
             ','.join(mine), dp_name, instance=instance)


def _refuse_mdevs(arqs):
    for arq in nc_libvirt.validated(arqs):
        if arq.attach_type != arq_obj.ATTACH_TYPE_PCI:
            raise exception.AcceleratorAttachFailed(reason=_(
                'a %s accelerator cannot be plugged into a running server; '
                'stop the server first') % arq.attach_type)
