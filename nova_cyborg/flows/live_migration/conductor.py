"""Live migration of a server with accelerators: the conductor's part.

Cyborg 17 binds no ARQ for an instance UUID that already has ARQs, and the
ARQs of the running guest must stay bound until it has left its source
(an unbound attach handle can be handed to another server). So the
destination's ARQs are bound under the *other* of the server's two ARQ
owners (:func:`nova_cyborg.model.bookkeeping.other_owner`), which holds none:

1. ``LiveMigrationTask`` asks the scheduler for the device profile of the
   flavor, each group on a provider with trait ``HW_PCI_LIVE_MIGRATABLE``
   (:func:`add_profile_groups`), for a scheduler-chosen destination and
   for ``--host`` alike. A forced destination (``force=True``, API
   microversions before 2.68) bypasses the scheduler: it is refused
   (:func:`refuse_forced`), as Nova itself refuses to force a move of a
   server with nested allocations.
2. Once the destination is chosen and checked, the destination's ARQs are
   created, recorded in the server's system metadata
   (:data:`DEST_PREFIX`), bound in the server's project under the other
   owner to the providers the scheduler allocated, and awaited by reading
   them back (Cyborg sends the bind event for the alias to a UUID Nova does
   not know) (:func:`bind_destination`). Any failure deletes them and
   fails the pre-checks: the server stays ACTIVE on its source.
3. ``LiveMigrationTask.rollback`` deletes them (:func:`forget_destination`).

The compute side (the destination's device remap, the source's success
and rollback) is :mod:`nova_cyborg.flows.live_migration.compute`.
"""

import time

from oslo_log import log as logging

import nova.conf
from nova import exception as nova_exception

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import attach_handle
from nova_cyborg.model import bookkeeping

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

#: System metadata list of the ARQs bound for a live migration's
#: destination (under the other owner) until it succeeds or rolls back.
DEST_PREFIX = bookkeeping.LIVE_DEST_PREFIX
#: The trait of providers whose devices support VFIO migration.
LIVE_MIGRATABLE = 'HW_PCI_LIVE_MIGRATABLE'
#: First pause between two reads of the ARQs, doubled up to POLL_MAX.
POLL_FIRST = 0.1
POLL_MAX = 2.0


def _refused(instance, reason):
    LOG.warning('Refusing to live-migrate the server: %s', reason,
                instance=instance)
    return nova_exception.MigrationPreCheckError(reason=reason)


def refuse_forced(instance, destination):
    """Refuse a forced destination for a server with accelerators.

    :param destination: the host of a forced live migration, else None.
    :raises: MigrationPreCheckError
    """
    if destination and bookkeeping.has_accelerators(instance, load=False):
        raise _refused(instance, _(
            'a server with accelerators cannot be live-migrated to a forced '
            'destination host (%s): the scheduler must allocate its devices '
            'there; live-migrate it without forcing the host (API '
            'microversion 2.68 or later, or without --force)') % destination)


def add_profile_groups(context, request_spec, flavor):
    """Ask the scheduler for the flavor's device profile on live-migratable
    providers.

    :param request_spec: the nova.objects.RequestSpec sent to the scheduler
        (its requested_resources were just reset to the ports' requests).
    """
    dp_name = bookkeeping.flavor_profile(flavor)
    if not dp_name:
        return
    groups = nc_client.get_device_profile_request_groups(context, dp_name)
    for group in groups:
        group.required_traits = set(group.required_traits or ()) | {
            LIVE_MIGRATABLE}
    request_spec.requested_resources.extend(groups)


def recorded(instance):
    """The UUIDs of the ARQs bound for the destination, as recorded."""
    return bookkeeping.entries(instance, DEST_PREFIX)


def record(instance, arq_uuids):
    """Record the destination's ARQs (saved)."""
    bookkeeping.store(instance, DEST_PREFIX, list(arq_uuids))
    instance.save()


def source_arqs(cyclient, instance):
    """The server's ARQs, each Bound on its current host, validated.

    :raises: MigrationPreCheckError if one is not (the server's devices
        are not where it runs), or one is not of its flavor's profile
        (attached with addAccelerator or a port's, not live-migrated).
    """
    dp_name = bookkeeping.flavor_profile(instance.flavor)
    arqs = cyclient.get_arqs_for_instance(bookkeeping.arq_owner(instance))
    here = bookkeeping.hostnames(instance)
    for arq in arqs:
        if arq.get('device_profile_name') != dp_name:
            raise _refused(instance, _(
                'accelerator request %(arq)s of device profile %(dp)s is not '
                'of the flavor\'s device profile: accelerators attached to '
                'the server or to its ports are not live-migrated') % {
                    'arq': arq.get('uuid'),
                    'dp': arq.get('device_profile_name')})
        if arq.get('state') != 'Bound' or arq.get('hostname') not in here:
            raise _refused(instance, _(
                'accelerator request %(arq)s is %(state)s on %(host)s, not '
                'Bound on the server\'s host') % {
                    'arq': arq.get('uuid'), 'state': arq.get('state'),
                    'host': arq.get('hostname')})
    return attach_handle.validate_for_attach(arqs)


def await_bound(cyclient, owner, arq_uuids, clock=None, sleep=None):
    """Read ``owner``'s ARQs until those of ``arq_uuids`` are all Bound.

    For at most ``[DEFAULT] arq_binding_timeout`` seconds: no bind event
    reaches Nova for the alias.

    :returns: their validated AcceleratorRequests, in ``arq_uuids`` order.
    :raises: AcceleratorRequestNotBound (BindFailed, gone, or not Bound in
        time), InvalidAttachHandle
    """
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    deadline = clock() + CONF.arq_binding_timeout
    pause = POLL_FIRST
    while True:
        arqs = {arq.get('uuid'): arq
                for arq in cyclient.get_arqs_for_instance(owner)}
        states = {u: (arqs.get(u) or {}).get('state') for u in arq_uuids}
        failed = [u for u, state in states.items()
                  if state in (None, 'BindFailed', 'Deleting')]
        if failed:
            raise exception.AcceleratorRequestNotBound(
                arq=failed[0], state=states[failed[0]] or 'gone')
        if all(state == 'Bound' for state in states.values()):
            return attach_handle.validate_for_attach(
                [arqs[u] for u in arq_uuids])
        if clock() >= deadline:
            late = [u for u, state in states.items() if state != 'Bound']
            raise exception.AcceleratorRequestNotBound(
                arq=late[0], state='%s after %d seconds' % (
                    states[late[0]], CONF.arq_binding_timeout))
        sleep(pause)
        pause = min(pause * 2, POLL_MAX)


def _delete(cyclient, instance, arq_uuids):
    failed = cyclient.delete_arqs_by_uuid(arq_uuids)
    if failed:
        # Deleted with the server, or at its next move
        # (nova_cyborg.flows.move.resize).
        bookkeeping.remember_retired(instance, failed)


def bind_destination(context, instance, migration, request_spec):
    """Create and bind the destination's ARQs under the other owner.

    Called once the destination is chosen and checked, before the source
    compute is asked to migrate.

    :param migration: the nova.objects.Migration (its dest_node is the
        host Cyborg binds on).
    :param request_spec: the RequestSpec whose group -> provider mapping
        the scheduler filled for the destination.
    :returns: the UUIDs of the bound ARQs ([] for a server without).
    :raises: MigrationPreCheckError saying why, after deleting them.
    """
    if not bookkeeping.has_accelerators(instance, load=False):
        return []
    dp_name = bookkeeping.flavor_profile(instance.flavor)
    if not dp_name:
        raise _refused(instance, _(
            'accelerators attached to the server (%s) are not '
            'live-migrated') % ', '.join(
                bookkeeping.attached_profiles(instance)))
    cyclient = nc_client.get_client(context, instance=instance)
    owner = bookkeeping.other_owner(instance)
    created = []
    try:
        source = source_arqs(cyclient, instance)
        # Left by an earlier live migration that stopped half-way.
        _delete(cyclient, instance, recorded(instance) + [
            arq['uuid'] for arq in cyclient.get_arqs_for_instance(owner)])
        arqs = cyclient.create_arqs(dp_name)
        created = [arq['uuid'] for arq in arqs]
        if len(arqs) != len(source):
            raise exception.CyborgError(op=_('create'), msg=_(
                'device profile %(dp)s gave %(n)d accelerator requests, the '
                'server has %(m)d') % {'dp': dp_name, 'n': len(arqs),
                                       'm': len(source)})
        record(instance, created)
        mapping = request_spec.get_request_group_mapping()
        # Nova's 404 to the alias's bind event is no failure: bind_arqs
        # reads the ARQs back.
        cyclient.bind_arqs({
            arq['uuid']: {
                'hostname': migration.dest_node,
                'device_rp_uuid': cyclient.get_arq_device_rp_uuid(
                    arq, mapping, None),
                'instance_uuid': owner}
            for arq in arqs})
        await_bound(nc_client.get_client(context), owner, created)
    except Exception as e:
        reason = _('binding the accelerators on %(host)s failed: %(err)s') % {
            'host': migration.dest_node, 'err': exception.reason(e, 'reason')}
        LOG.error('Live migration: %s; deleting ARQs %s', reason,
                  ','.join(created), instance=instance)
        if created:
            _delete(cyclient, instance, created)
            record(instance, [])
        if isinstance(e, nova_exception.MigrationPreCheckError):
            raise
        raise nova_exception.MigrationPreCheckError(reason=reason)
    LOG.info('Bound ARQs %s on %s for the live migration',
             ','.join(created), migration.dest_node, instance=instance)
    return created


def forget_destination(context, instance):
    """Delete the destination's ARQs (recorded, and any Cyborg holds under
    the other owner); forget them (saved). Never raises."""
    arq_uuids = recorded(instance)
    try:
        cyclient = nc_client.get_client(context)
        arq_uuids += [arq['uuid'] for arq in cyclient.get_arqs_for_instance(
            bookkeeping.other_owner(instance)) if arq['uuid'] not in arq_uuids]
        if arq_uuids:
            _delete(cyclient, instance, arq_uuids)
            LOG.info('Deleted the ARQs %s bound for the live migration\'s '
                     'destination', ','.join(arq_uuids), instance=instance)
        if recorded(instance):
            record(instance, [])
    except Exception as e:  # noqa: B902 (a rollback must go on)
        LOG.error('Could not delete the ARQs %s bound for the live '
                  'migration\'s destination: %s', ','.join(arq_uuids), e,
                  instance=instance)
    return arq_uuids
