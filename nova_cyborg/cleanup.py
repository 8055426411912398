"""Release the accelerators of servers deleted while their host was down.

When nova-compute is down, the API deletes a server locally and deletes
its ARQs itself; if Cyborg could not be reached then, Nova only logs it and
the ARQs stay ``Bound``, holding their attach handles for good. The
restarted nova-compute reaps the server's leftover domain
(``ComputeManager._cleanup_running_deleted_instances``, action ``reap``);
routed from there, this deletes the server's ARQs too, with the compute's
own admin context (the client then calls Cyborg as the service user).
"""

from oslo_log import log as logging

from nova_cyborg import client as nc_client
from nova_cyborg import exception

LOG = logging.getLogger(__name__)

DP_EXTRA_SPEC = 'accel:device_profile'


def _may_have_arqs(instance):
    """False only if the instance's flavor is known to ask for none."""
    try:
        return bool(instance.flavor.extra_specs.get(DP_EXTRA_SPEC))
    except Exception as e:  # noqa: B902 (a deleted row may not load)
        LOG.debug('Cannot read the flavor of deleted instance: %s; '
                  'asking Cyborg anyway', e, instance=instance)
        return True


def delete_arqs_of_deleted_instance(context, instance):
    """Delete every ARQ of a deleted instance; never raise.

    Idempotent: Cyborg deletes nothing for an instance without ARQs.
    """
    if not _may_have_arqs(instance):
        return
    try:
        nc_client.get_client(context).delete_arqs_for_instance(instance.uuid)
    except exception.CyborgError as e:
        LOG.error('Failed to delete the accelerator requests of deleted '
                  'instance %s: %s', instance.uuid, e, instance=instance)
        return
    LOG.info('Deleted the accelerator requests of deleted instance %s',
             instance.uuid, instance=instance)
