"""Release the accelerators of deleted servers.

``delete_arqs_if_needed`` replaces Nova's own (delete, local delete, build
failures): it knows the accelerators attached with addAccelerator and the
ARQs a resize parked or retired.

Servers deleted while their host was down:

When nova-compute is down, the API deletes a server locally and deletes
its ARQs itself; if Cyborg could not be reached then, Nova only logs it and
the ARQs stay ``Bound``, holding their attach handles for good. The
restarted nova-compute reaps the server's leftover domain
(``ComputeManager._cleanup_running_deleted_instances``, action ``reap``);
routed from there, this deletes the server's ARQs too, with the compute's
own admin context (the client then calls Cyborg as the service user).

Servers deleted before they had a host:

nova-conductor binds a new server's ARQs before it casts the build to the
host's nova-compute, which is what sets ``instance.host``. A conductor that
stops in between (killed, its host lost) leaves the server in BUILD without
a host, its ARQs Bound. Nova deletes such a server in nova-api
(``API._delete``, the "local delete" of a server that never reached a
host), freeing its allocation only: the attach handle stayed in use while
Placement offered the device to the next boot, which failed with
"AttachHandle not found". :func:`delete_arqs_before_host`, routed from that
path's common cleanup (``API._local_delete_cleanup``, patch 0012), deletes
them; only for a server that may have some (:func:`may_have_arqs_before_host`,
from what nova-api loaded), so that a plain server's delete costs no query.
"""

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

import nova.conf

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.model import bookkeeping

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF


def may_have_arqs(instance):
    """False only if the instance is known to have (had) no ARQs; True
    when its row does not load (a deleted instance)."""
    try:
        return bool(bookkeeping.has_accelerators(instance) or
                    bookkeeping.unbound(instance))
    except Exception as e:  # noqa: B902 (a deleted row may not load)
        LOG.debug('Cannot read the flavor of deleted instance %s: %s; '
                  'asking Cyborg anyway', instance.uuid, e,
                  instance=instance)
        return True


def unbound_arqs_of_deleted(instance):
    """:func:`nova_cyborg.model.bookkeeping.unbound` of a deleted instance, or
    none when its row does not load."""
    try:
        return bookkeeping.unbound(instance)
    except Exception:  # noqa: B902 (a deleted row may not load)
        return []


def holders(instance):
    """:func:`nova_cyborg.model.bookkeeping.holders` of the instance, or None
    (both owners, the client's default) when its row does not load."""
    try:
        return bookkeeping.holders(instance)
    except Exception:  # noqa: B902 (a deleted row may not load)
        return None


def delete_arqs_if_needed(context, instance, arq_uuids=None):
    """Delete the instance's ARQs, and ``arq_uuids`` not bound to it yet.

    Routed from ``nova.compute.utils.delete_arqs_if_needed`` (delete, local
    delete, build failures, the conductor's cleanup). Unlike upstream it
    also deletes the accelerators attached with addAccelerator and the ARQs
    a resize parked or retired. Failures are logged, not raised, as
    upstream.
    """
    cyclient = None
    if bookkeeping.has_accelerators(instance):
        cyclient = nc_client.get_client(context)
        try:
            cyclient.delete_arqs_for_instance(instance.uuid,
                                              owners=holders(instance))
        except exception.CyborgError as e:
            LOG.error('Failed to delete the accelerator requests of the '
                      'instance: %s', e, instance=instance)
    extra = list(arq_uuids or []) + bookkeeping.unbound(instance)
    if extra:
        cyclient = cyclient or nc_client.get_client(context)
        cyclient.delete_arqs_by_uuid(extra)


def delete_arqs_of_deleted_instance(context, instance):
    """Delete every ARQ of a deleted instance; never raise.

    Idempotent: Cyborg deletes nothing for an instance without ARQs.
    """
    if not may_have_arqs(instance):
        return
    try:
        cyclient = nc_client.get_client(context)
        cyclient.delete_arqs_for_instance(instance.uuid,
                                          owners=holders(instance))
        cyclient.delete_arqs_by_uuid(unbound_arqs_of_deleted(instance))
    except exception.CyborgError as e:
        LOG.error('Failed to delete the accelerator requests of deleted '
                  'instance %s: %s', instance.uuid, e, instance=instance)
        return
    LOG.info('Deleted the accelerator requests of deleted instance %s',
             instance.uuid, instance=instance)


def delete_arqs_of_deleting_instance(context, instance):
    """Delete every ARQ of a server that nova-compute is deleting.

    Routed from ``ComputeManager._delete_instance``, after the guest and its
    network are gone. As upstream, a Cyborg failure is logged, not raised:
    the user's delete succeeds, and the ARQs Cyborg could not delete are
    named in the log, left for ``nova-cyborg-sweep-arqs`` (the sweep of
    deleted servers' ARQs). Failing the delete there would leave an ERROR
    server without a guest. Never raises.
    """
    try:
        if bookkeeping.has_accelerators(instance):
            nc_client.get_client(context).delete_arqs_for_instance(
                instance.uuid, owners=holders(instance))
        unbound = bookkeeping.unbound(instance)
        if unbound:
            nc_client.get_client(context).delete_arqs_strictly(unbound)
    except exception.CyborgError as e:
        LOG.error('Failed to delete the accelerator requests of the '
                  'instance; they are left in Cyborg (bound to instance '
                  '%(uuid)s, or %(unbound)s) for nova-cyborg-sweep-arqs: '
                  '%(err)s',
                  {'uuid': instance.uuid,
                   'unbound': ','.join(bookkeeping.unbound(instance)) or '-',
                   'err': e}, instance=instance)


def _instance_row(context, instance_uuid):
    """The instance (deleted or not) as its cell has it, or None if it
    never reached a cell."""
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            context, instance_uuid)
    except nova_exception.InstanceMappingNotFound:
        return None
    if mapping.cell_mapping is None:
        return None
    with nova_context.target_cell(context.elevated(read_deleted='yes'),
                                  mapping.cell_mapping) as cctxt:
        try:
            return objects.Instance.get_by_uuid(
                cctxt, instance_uuid,
                expected_attrs=['system_metadata', 'flavor'])
        except nova_exception.InstanceNotFound:
            return None


def _booted_with_profile(context, instance_uuid):
    """True if the server's request spec (nova-api's, kept after the
    delete) names a device profile."""
    try:
        spec = objects.RequestSpec.get_by_instance_uuid(context,
                                                        instance_uuid)
    except nova_exception.RequestSpecNotFound:
        return False
    return bool(bookkeeping.flavor_profile(spec.flavor))


def may_have_arqs_before_host(instance):
    """Whether a server being deleted before it had a host may hold ARQs,
    from what is loaded on ``instance`` only (no query; nova-api's
    ``API._delete`` asks it for every delete, patch 0012).

    Its flavor names a device profile, or its system metadata, where
    loaded, names attached or unbound ARQs. True when the flavor is not
    loaded (the caller could not tell): :func:`delete_arqs_before_host`
    then looks the server up, as before. A plain server's local delete
    reads nothing more than upstream's.

    Like upstream's local delete (``nova.compute.utils.
    delete_arqs_if_needed``), the ARQs of ports with a device profile are
    not looked for here: Neutron's port binding profile names them once
    the server has a host, and nova-compute or the network cleanup deletes
    them.
    """
    if not instance.obj_attr_is_set('flavor'):
        return True
    if bookkeeping.flavor_profile(instance.flavor):
        return True
    if not instance.obj_attr_is_set('system_metadata'):
        return False
    return bool(bookkeeping.attached(instance) or
                bookkeeping.unbound(instance))


def delete_arqs_before_host(context, instance_uuid):
    """Delete the ARQs of a server deleted before it had a host; never
    raise.

    Those bound under its UUID, or its alias where its system metadata
    shows a live migration's traces (unknown: both), and the unbound ones
    its system metadata names. The server is read again from its cell (the
    caller may hold only its UUID, or a copy built from the build request);
    one the conductor had not mapped to its cell yet (stopped between the
    bind and the mapping) is known by its request spec. A server without
    accelerators costs no Cyborg call. What Cyborg fails to delete is
    logged and left for ``nova-cyborg-sweep-arqs``.
    """
    try:
        instance = _instance_row(context, instance_uuid)
        if instance is not None:
            if may_have_arqs(instance):
                _delete_before_host(context, instance_uuid,
                                    unbound_arqs_of_deleted(instance),
                                    holders(instance))
        elif _booted_with_profile(context, instance_uuid):
            _delete_before_host(context, instance_uuid, [])
    except Exception as e:  # noqa: B902 (the delete succeeds all the same)
        LOG.error('Failed to delete the accelerator requests of instance '
                  '%(uuid)s, deleted before it had a host; they are left '
                  'in Cyborg for nova-cyborg-sweep-arqs: %(err)s',
                  {'uuid': instance_uuid, 'err': e})


def _delete_before_host(context, instance_uuid, unbound, owners=None):
    cyclient = nc_client.get_client(context)
    cyclient.delete_arqs_for_instance(instance_uuid, owners=owners)
    left = cyclient.delete_arqs_by_uuid(unbound) if unbound else []
    if left:
        LOG.error('Could not delete the unbound accelerator requests '
                  '%(arqs)s of instance %(uuid)s, deleted before it had a '
                  'host', {'arqs': ','.join(left), 'uuid': instance_uuid})
        return
    LOG.info('Deleted the accelerator requests of instance %s, deleted '
             'before it had a host', instance_uuid)


def delete_early_arqs(context, build_request):
    """Delete the ARQs created while the server was scheduled that its
    deleted ``build_request`` records (nova_cyborg.flows.boot.early_arqs);
    never raise. Those the conductor took are the server's, which is being
    deleted; ARQs already gone count as deleted."""
    try:
        arq_uuids = bookkeeping.early_arqs(build_request)
        if not arq_uuids:
            return
        left = nc_client.get_client(context).delete_arqs_by_uuid(arq_uuids)
    except Exception as e:  # noqa: B902 (the delete succeeds all the same)
        LOG.error('Failed to delete the accelerator requests created while '
                  'instance %(uuid)s was scheduled: %(err)s',
                  {'uuid': build_request.instance_uuid, 'err': e})
        return
    if left:
        LOG.error('Could not delete the accelerator requests %(arqs)s '
                  'created while instance %(uuid)s was scheduled; Cyborg '
                  'keeps them unbound', {'arqs': ','.join(left),
                                         'uuid': build_request.instance_uuid})
        return
    LOG.info('Deleted the accelerator requests %(arqs)s created while '
             'instance %(uuid)s was scheduled', {
                 'arqs': ','.join(arq_uuids),
                 'uuid': build_request.instance_uuid})
