"""Resize and cold migration of a server with accelerators.

Upstream Nova refuses both. Cyborg 17 lets an instance have only one set of
bound ARQs (a bind for an instance that already has ARQs is refused), so a
move cannot bind the destination's ARQs next to the source's. Instead, the
source's ARQs are parked (unbound, kept) while the guest is off:

1. The conductor's ``MigrationTask`` asks the scheduler for the new
   flavor's device profile groups (:func:`add_profile_groups`); the
   source's devices stay allocated in Placement to the migration.
2. On the source, before the disks move (:func:`swap_to_destination`):
   the guest is powered off, so no device is in use; the source's ARQs are
   unbound and remembered with their provider and host; the new flavor's
   ARQs are created, bound to the providers the scheduler allocated on the
   destination, and awaited. On failure the new ARQs are deleted, the
   parked ones bound again, the guest powered back on, and the resize
   fails with the server running on the source as before.
3. ``finish_resize`` builds the destination guest with the bound ARQs.
4. Confirm deletes the parked ARQs (:func:`confirm`). Revert first checks
   on the destination that Cyborg answers; once the destination destroyed
   its guest, the source deletes the destination's ARQs and binds the
   parked ones again before its guest is rebuilt
   (:mod:`nova_cyborg.flows.move.revert`). A revert that
   fails on the destination leaves its ARQs Bound under the guest there.
   If the delete or the bind fails on the source, the server is in ERROR
   there with its ARQs still parked; the next hard reboot, power on or
   rebuild there
   binds them again first (nova_cyborg.flows.move.recovery.parked_here).

Parked ARQs are kept in the instance's system metadata, which travels with
it between hosts. So are ARQs that must go but could not be deleted
(Cyborg unreachable): they are deleted at the next move's start or end.
"""

from nova.compute import vm_states
from nova import exception as nova_exception
from oslo_log import log as logging

# The bookkeeping moved to nova_cyborg.model.bookkeeping; its names stay
# reachable here for the modules that still use them through move.
from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model.bookkeeping import arq_owner
from nova_cyborg.model.bookkeeping import ATTACHED_PREFIX  # noqa: F401
from nova_cyborg.model.bookkeeping import attached_profiles  # noqa: F401
from nova_cyborg.model.bookkeeping import DP_EXTRA_SPEC  # noqa: F401
from nova_cyborg.model.bookkeeping import flavor_profile as _profile
from nova_cyborg.model.bookkeeping import has_accelerators
from nova_cyborg.model.bookkeeping import hostnames as _hostnames
from nova_cyborg.model.bookkeeping import on_host
from nova_cyborg.model.bookkeeping import parked
from nova_cyborg.model.bookkeeping import PARKED_PREFIX  # noqa: F401
from nova_cyborg.model.bookkeeping import store
from nova_cyborg.steps import arqs as arq_steps
from nova_cyborg.steps import bound_arqs as nc_compute

LOG = logging.getLogger(__name__)


def add_profile_groups(context, request_spec, flavor):
    """Ask the scheduler for the device profile of the move's flavor.

    Called by the conductor's MigrationTask after it reset the request
    spec's ``requested_resources`` to the ports' requests.
    """
    dp_name = _profile(flavor)
    if not dp_name:
        return
    request_spec.requested_resources.extend(
        nc_client.get_device_profile_request_groups(context, dp_name))


def _bind_new(virtapi, context, instance, dp_name, request_spec, migration,
              created):
    cyclient = nc_client.get_client(context)
    arqs = cyclient.create_arqs(dp_name)
    created.extend(arq.get('uuid') for arq in arqs)
    mapping = request_spec.get_request_group_mapping()
    arq_steps.bind_and_wait(virtapi, context, instance, {
        arq['uuid']: (cyclient.get_arq_device_rp_uuid(arq, mapping, None),
                      migration.dest_node)
        for arq in arqs})


def foreign_arqs(instance, arqs, hostnames):
    """The UUIDs of ``arqs`` bound to none of ``hostnames``."""
    return [arq.get('uuid') for arq in arqs
            if arq.get('hostname') not in hostnames]


def destination_arqs(instance, arqs, source):
    """The UUIDs of the move's destination ARQs among ``arqs`` (with any
    left over from an earlier failure): what a revert, or a resize that
    failed after :func:`swap_to_destination`, deletes before it binds the
    parked ARQs again on the source.

    The move parked every ARQ the source had, so every ARQ not parked is
    the destination's, wherever it is bound: a resize to the same host
    (``allow_resize_to_same_host``) binds the destination's ARQs to the
    source's host too, and Cyborg refuses to bind the parked ones next to
    them. With nothing parked, a source without accelerators has no ARQ
    of its own (all are the destination's); one with accelerators has
    had its parked ARQs bound again already (a revert run a second time),
    and only those bound to another host than ``source`` go.
    """
    parked_uuids = {u for u, _rp, _host in parked(instance)}
    if parked_uuids:
        return [arq.get('uuid') for arq in arqs
                if arq.get('uuid') not in parked_uuids]
    if not has_accelerators(instance):
        return [arq.get('uuid') for arq in arqs]
    return foreign_arqs(instance, arqs, source)


def swap_to_destination(virtapi, context, instance, flavor, request_spec,
                        migration, power_off, power_on):
    """Give the server the new flavor's ARQs on the destination.

    Runs on the source in ``resize_instance``, before the disks move.

    :param power_off: callable that stops the guest.
    :param power_on: callable taking ``accel_info`` that starts it again.
    :raises: InstanceFaultRollback once the source's state is restored: the
        resize fails and the server runs on the source as before. If the
        restore fails too, AcceleratorRequestBindingFailed with both
        reasons: the server goes to ERROR.
    """
    dp_name = _profile(flavor)
    if not dp_name and not _profile(instance.flavor):
        arq_steps.retire(context, instance, [])
        return
    arqs = nc_client.get_client(context).get_arqs_for_instance(
        arq_owner(instance))
    # ARQs bound to another host are left over from an earlier failure.
    arq_steps.retire(context, instance,
                     foreign_arqs(instance, arqs, _hostnames(instance)))
    source_arqs = on_host(instance, arqs)
    stopped_here = False
    unsure = False
    created = []
    try:
        if source_arqs:
            # Unbound devices may go to another server at once: the guest
            # must have let go of them first.
            stopped_here = instance.vm_state == vm_states.ACTIVE
            power_off()
            unsure = True
            arq_steps.park(context, instance, source_arqs)
            unsure = False
        if dp_name:
            _bind_new(virtapi, context, instance, dp_name, request_spec,
                      migration, created)
    except Exception as e:
        reason = nc_compute.build_fault_message(e)
        LOG.error('Getting the accelerators of the destination %(host)s '
                  'failed; restoring the source: %(err)s',
                  {'host': migration.dest_compute, 'err': reason},
                  instance=instance)
        _restore_source(virtapi, context, instance, created, reason,
                        power_on if stopped_here else None, unsure)
        raise nova_exception.InstanceFaultRollback(
            inner_exception=exception.AcceleratorRequestBindingFailed(
                arqs=[], msg=reason))
    LOG.info('Accelerator requests %s are bound on %s for the move',
             ','.join(created), migration.dest_compute, instance=instance)


def _restore_source(virtapi, context, instance, created, reason, power_on,
                    unsure):
    """Delete ``created``, bind the parked ARQs again, start the guest.

    :param unsure: True if the unbind of the parked ARQs failed: Cyborg
        says which are still bound, and those are not bound twice.
    :raises: AcceleratorRequestBindingFailed naming the move's failure
        (``reason``) and the restore's, if the restore fails.
    """
    try:
        arq_steps.retire(context, instance, created)
        arq_steps.unpark(
            virtapi, context, instance,
            arq_steps.still_bound(context, instance) if unsure else ())
        if power_on:
            power_on(arq_steps.instance_arqs(context, instance))
    except Exception as e:
        LOG.error('Restoring the accelerators of the source failed: '
                  '%(err)s', {'err': _innermost(e)}, instance=instance)
        # Short: Nova cuts the fault at 255 characters.
        raise exception.AcceleratorRequestBindingFailed(arqs=[], msg=_(
            '%(reason)s; restoring the source failed too: %(why)s') % {
                'reason': reason, 'why': _innermost(e)})


def _innermost(exc):
    """The innermost message of a failure, without repeated prefixes."""
    msg = (getattr(exc, 'kwargs', None) or {}).get('msg')
    if isinstance(msg, str):
        return msg
    if hasattr(exc, 'format_message'):
        return exc.format_message()
    return str(exc)[:200] or type(exc).__name__


def undo_swap(virtapi, context, instance, migration):
    """The resize failed on the source after :func:`swap_to_destination`
    (the disk copy, say): the destination's ARQs go, the parked ones are
    bound again on the source. Never raises (the resize's own error is
    what the user sees); what fails is logged.
    """
    if not (parked(instance) or _profile(instance.flavor) or
            _profile(migration_flavor(instance))):
        return
    source = {name for name in (migration.source_compute,
                                migration.source_node) if name}
    try:
        arqs = nc_client.get_client(context).get_arqs_for_instance(
            arq_owner(instance))
        destination = destination_arqs(instance, arqs, source)
        arq_steps.retire(context, instance, destination)
        arq_steps.unpark(virtapi, context, instance,
                         bound={arq.get('uuid') for arq in arqs
                                if arq.get('uuid') not in destination and
                                arq.get('state') == 'Bound'})
    except Exception as e:
        LOG.error('Could not give the source %(host)s its accelerators back '
                  'after the resize failed: %(err)s',
                  {'host': migration.source_compute,
                   'err': nc_compute.build_fault_message(e)},
                  instance=instance)
        return
    LOG.info('The resize failed: the accelerators of the source are bound '
             'again, those of the destination deleted', instance=instance)


def migration_flavor(instance):
    """The flavor the instance is being resized to, if any."""
    try:
        return instance.new_flavor
    except Exception:  # noqa: B902 (not set, not loadable)
        return None


def confirm(context, instance):
    """The move is confirmed (or ended on the destination): the parked
    ARQs go. Never raises: those that cannot be deleted are retired.
    """
    arq_uuids = [u for u, _rp, _host in parked(instance)]
    store(instance, PARKED_PREFIX, [])
    arq_steps.retire(context, instance, arq_uuids)
