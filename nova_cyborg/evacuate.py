"""What an evacuated server keeps: its flavor's accelerators, not those
attached with addAccelerator.

The conductor gives an evacuated server new ARQs for its flavor's device
profile on the new host (upstream). The accelerators attached with
addAccelerator were PCI functions of the failed host; nothing asked the
scheduler for them on the new host, so they are not carried over. Routed
from ``ComputeManager._do_rebuild_instance`` once the guest runs on the new
host (:func:`drop_attached`): their ARQs are deleted, the server forgets
them (``removeAccelerator`` has nothing to detach, a later start or hard
reboot nothing to plug), and the evacuation's instance action gets an
event in error that names the device profiles, so that the user or the
operator knows to attach them again. Their allocation on the failed host
goes with that host's, when it comes back (upstream's cleanup of evacuated
servers) or is deleted.
"""

from nova import objects
from oslo_log import log as logging

from nova_cyborg import attach
from nova_cyborg import client as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg import move

LOG = logging.getLogger(__name__)

#: The instance action event that tells the attached accelerators went.
EVENT = 'compute_drop_attached_accelerators'


def _record(context, instance, message):
    try:
        objects.InstanceActionEvent.event_start(
            context, instance.uuid, EVENT, want_result=False,
            host=instance.host)
        objects.InstanceActionEvent.event_finish_with_failure(
            context, instance.uuid, EVENT, exc_val=message, exc_tb='')
    except Exception as e:  # noqa: B902 (the evacuation itself worked)
        LOG.warning('Could not record the instance action event %(ev)s: '
                    '%(err)s', {'ev': EVENT, 'err': e}, instance=instance)


def drop_attached(context, instance):
    """Forget and delete what was attached; record why. Never raises.

    ARQs Cyborg cannot delete now are retired: deleted at the server's
    next move, or with it.
    """
    attached = attach.attached(instance)
    if not attached:
        return
    arq_uuids = [arq_uuid for arq_uuid, _profile in attached]
    profiles = sorted({profile for _uuid, profile in attached})
    move.store(instance, move.ATTACHED_PREFIX, [])
    move.store(instance, attach.ALLOC_PREFIX, [])
    instance.save()
    try:
        nc_client.get_client(context).delete_arqs_strictly(arq_uuids)
    except exception.CyborgError as e:
        LOG.error('Could not delete accelerator requests %(arqs)s that '
                  'stayed on the evacuated host: %(err)s',
                  {'arqs': ','.join(arq_uuids), 'err': e},
                  instance=instance)
        move.remember_retired(instance, arq_uuids)
    message = _('Accelerators attached with addAccelerator were on the '
                'evacuated host and are not carried over; attach device '
                'profile(s) %s again') % ', '.join(profiles)
    LOG.warning(message, instance=instance)
    _record(context, instance, message)
