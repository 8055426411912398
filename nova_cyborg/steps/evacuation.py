"""What an evacuated server takes along: the accelerators of its flavor
and those attached with addAccelerator.

The conductor gives an evacuated server new ARQs for its flavor's device
profile on the new host (upstream: the scheduler claimed them there). The
accelerators attached with addAccelerator were not asked of the
scheduler; :func:`attached_bindings`, called by
:func:`nova_cyborg.flows.boot.conductor.create_and_bind_arqs` once the new host
is chosen, carries them over: for each attached device profile it allocates
the profile's request groups in Placement inside the new compute node's
tree (as an attach does, :mod:`nova_cyborg.clients.allocations`), creates ARQs
for it, and adds them to the flavor's in the one bind request Cyborg
accepts for a server. The new host's compute waits for all of them and
the rebuilt guest gets them all. The server's bookkeeping (the attached
ARQs and the allocation added) then names the new ARQs and providers, so
that ``removeAccelerator`` works on the new host.

A profile the new host cannot provide (no free device there, the profile
was deleted) is dropped: the evacuation goes on with the rest, the server
forgets it and the evacuation's instance action gets an event in error
(:data:`EVENT`) that names the profile and why, so that the user or the
operator knows to attach it again.

The failed host's ARQs are deleted by the conductor before (upstream's
delete by instance); its part of the allocation goes with the rest of
that host's when it comes back (upstream's cleanup of evacuated servers)
or is deleted. Once the guest runs on the new host, :func:`drop_attached`
makes sure that nothing attached names an ARQ that is not bound there.
"""

from nova import objects
from nova.scheduler.client import report
from oslo_log import log as logging

from nova_cyborg.clients import allocations
from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import actions
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.bookkeeping import arq_owner

LOG = logging.getLogger(__name__)

#: The instance action event that tells attached accelerators went.
EVENT = 'compute_drop_attached_accelerators'


def _record(context, instance, message, host):
    try:
        objects.InstanceActionEvent.event_start(
            context, instance.uuid, EVENT, want_result=False, host=host)
        objects.InstanceActionEvent.event_finish_with_failure(
            context, instance.uuid, EVENT, exc_val=message, exc_tb='')
    except Exception as e:  # noqa: B902 (the evacuation itself worked)
        LOG.warning('Could not record the instance action event %(ev)s: '
                    '%(err)s', {'ev': EVENT, 'err': e}, instance=instance)


def _evacuating(instance, hostname):
    """True if ``hostname`` is a new host for an instance on a host."""
    return bool(instance.obj_attr_is_set('host') and instance.host and
                hostname not in (instance.host, instance.node))


def carries(instance, hostname):
    """True if the instance is evacuated to ``hostname`` with accelerators
    attached with addAccelerator.

    Loads nothing: an evacuated instance comes from the API with its
    system metadata (bookkeeping.has_accelerators), and the conductor asks
    this for every instance it places on a host.
    """
    return (_evacuating(instance, hostname) and
            bool(bookkeeping.attached(instance, load=False)))


def _claim(context, reportclient, instance, tree_uuid, profile):
    """Allocate ``profile`` in the new host's tree.

    :returns: (added, mapping) as :func:`nova_cyborg.clients.allocations.add`.
    :raises: AcceleratorAttachFailed (no free device), CyborgError or
        Nova's DeviceProfileError (the profile is gone).
    """
    groups = nc_client.get_device_profile_request_groups(context, profile)
    return allocations.add(reportclient, context, instance, groups,
                           tree_uuid)


def attached_bindings(context, instance, hostname, cyclient, created):
    """Bindings on the evacuation's new host for what was attached.

    :param hostname: the new host's node name, as Cyborg knows it.
    :param cyclient: the client that creates and binds the server's ARQs.
    :param created: the ARQ UUIDs created so far; those created here are
        added (the caller deletes them all if the bind fails).
    :returns: {arq_uuid: binding}; {} if the server is not being evacuated
        or has nothing attached.
    :raises: CyborgError if Cyborg fails to create the ARQs.
    """
    if not carries(instance, hostname):
        return {}
    attached = bookkeeping.attached(instance)
    tree_uuid = objects.ComputeNode.get_by_nodename(context, hostname).uuid
    reportclient = report.report_client_singleton()
    bindings, arq_entries, alloc_entries, dropped = {}, [], [], []
    for profile in sorted({name for _uuid, name in attached}):
        try:
            added, mapping = _claim(context, reportclient, instance,
                                    tree_uuid, profile)
        except Exception as e:  # noqa: B902 (this host cannot: dropped)
            dropped.append('%s (%s)' % (profile, exception.reason(e)))
            continue
        arqs = cyclient.create_arqs(profile)
        created.extend(arq['uuid'] for arq in arqs)
        for arq in arqs:
            bindings[arq['uuid']] = {
                'hostname': hostname, 'instance_uuid': instance.uuid,
                'device_rp_uuid': cyclient.get_arq_device_rp_uuid(
                    arq, mapping, None)}
            arq_entries.append('%s %s' % (arq['uuid'], profile))
        alloc_entries.extend(
            '%s %s %s %d' % (profile, rp, rc, amount)
            for rp, alloc in sorted(added.items())
            for rc, amount in sorted(alloc['resources'].items()))
    bookkeeping.store(instance, bookkeeping.ATTACHED_PREFIX, arq_entries)
    bookkeeping.store(instance, actions.ALLOC_PREFIX, alloc_entries)
    instance.save()
    if dropped:
        message = _('Accelerators attached with addAccelerator are not '
                    'carried over to %(host)s, which cannot provide them; '
                    'attach them again: %(dropped)s') % {
                        'host': hostname, 'dropped': '; '.join(dropped)}
        LOG.warning(message, instance=instance)
        _record(context, instance, message, hostname)
    LOG.info('Carrying attached accelerators over to %(host)s: %(arqs)s',
             {'host': hostname, 'arqs': ','.join(bindings)},
             instance=instance)
    return bindings


def drop_attached(context, instance):
    """Forget what was attached but is no longer bound to the instance;
    delete it and record why. Never raises.

    Routed from ``ComputeManager._do_rebuild_instance`` once an evacuated
    guest runs on its new host (``instance.host`` still names the failed
    one there). What the conductor carried over is bound to the instance
    and stays; anything else would name the failed host's devices.
    ARQs Cyborg cannot delete now are retired: deleted at the server's
    next move, or with it.
    """
    # The instance came from the API through the conductor, with its
    # system metadata: nothing to load (bookkeeping.has_accelerators).
    attached = bookkeeping.attached(instance, load=False)
    if not attached:
        return
    cyclient = nc_client.get_client(context)
    try:
        # The conductor deleted the failed host's ARQs by instance before
        # it created those of the new host: any the instance still has
        # are the new host's.
        here = {arq.get('uuid') for arq in
                cyclient.get_arqs_for_instance(arq_owner(instance))}
    except exception.CyborgError as e:
        LOG.warning('Could not check the attached accelerators on the new '
                    'host: %s', e, instance=instance)
        return
    gone = [(arq_uuid, name) for arq_uuid, name in attached
            if arq_uuid not in here]
    if not gone:
        return
    arq_uuids = [arq_uuid for arq_uuid, _name in gone]
    profiles = sorted({name for _uuid, name in gone})
    bookkeeping.store(
        instance, bookkeeping.ATTACHED_PREFIX,
        ['%s %s' % entry for entry in attached if entry not in gone])
    bookkeeping.store(
        instance, actions.ALLOC_PREFIX,
        [e for e in bookkeeping.entries(instance, actions.ALLOC_PREFIX)
         if e.split(' ', 1)[0] not in profiles])
    instance.save()
    try:
        cyclient.delete_arqs_strictly(arq_uuids)
    except exception.CyborgError as e:
        LOG.error('Could not delete accelerator requests %(arqs)s that '
                  'stayed on the evacuated host: %(err)s',
                  {'arqs': ','.join(arq_uuids), 'err': e},
                  instance=instance)
        bookkeeping.remember_retired(instance, arq_uuids)
    message = _('Accelerators attached with addAccelerator were on the '
                'evacuated host and are not carried over; attach device '
                'profile(s) %s again') % ', '.join(profiles)
    LOG.warning(message, instance=instance)
    _record(context, instance, message, instance.host)
