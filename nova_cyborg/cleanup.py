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
"""

from oslo_log import log as logging

import nova.conf

from nova_cyborg import bookkeeping
from nova_cyborg import client as nc_client
from nova_cyborg import exception

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
    """:func:`nova_cyborg.bookkeeping.unbound` of a deleted instance, or
    none when its row does not load."""
    try:
        return bookkeeping.unbound(instance)
    except Exception:  # noqa: B902 (a deleted row may not load)
        return []


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
            cyclient.delete_arqs_for_instance(instance.uuid)
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
        cyclient.delete_arqs_for_instance(instance.uuid)
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
                instance.uuid)
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
