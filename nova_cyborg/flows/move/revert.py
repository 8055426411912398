"""The revert of a resize or cold migration of a server with accelerators
(step 4 of :mod:`nova_cyborg.flows.move.resize`).

On the destination, :func:`revert_at_destination` only checks that Cyborg
answers: the destination's ARQs stay Bound under its guest until the guest
is destroyed. On the source, once the destination destroyed its guest,
:func:`rebind_at_source` deletes the destination's ARQs and binds the
parked ones again before the source's guest is rebuilt. A destination
that stops in the middle is dealt with at its restart
(:mod:`nova_cyborg.flows.move.revert_recovery`).
"""

from nova import objects
from oslo_log import log as logging

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.flows.move import resize as move
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.bookkeeping import arq_owner
from nova_cyborg.model.bookkeeping import flavor_profile as _profile
from nova_cyborg.model.bookkeeping import hostnames as _hostnames
from nova_cyborg.model.bookkeeping import parked
from nova_cyborg.steps import arqs as arq_steps

LOG = logging.getLogger(__name__)

#: The instance action event of a revert that could not start.
REVERT_EVENT = 'compute_revert_resize_accelerators'


def revert_at_destination(context, instance, migration=None, driver=None):
    """The move is about to be reverted: check that Cyborg answers, since
    the source needs it to delete the destination's ARQs and bind the
    parked ones again (:func:`rebind_at_source`). Nothing is deleted or
    stopped here: the destination's ARQs stay Bound under its guest until
    the destination has destroyed it, so that a revert failing on the
    destination (Neutron, Cinder, libvirt) leaves a running guest whose
    devices Cyborg still counts as its own (and a vGPU guest keeps its
    mdevs, which the sidecar removes only with an unbound ARQ).

    :param migration: the nova.objects.Migration being reverted (status
        ``reverting``).
    :param driver: the compute host's virt driver (unused, kept for the
        hook's signature).
    :returns: True to go on with the revert. False if it must not start:
        Cyborg could not be reached. Nothing changed then: the migration is
        ``finished`` again, the server's task state is cleared (it stays in
        VERIFY_RESIZE, running on the destination with its devices) and an
        instance action event in error (:data:`REVERT_EVENT`) says why;
        the revert, or a confirm, can be asked for again.
    """
    if not (parked(instance) or _profile(instance.flavor)):
        return True
    try:
        nc_client.get_client(context).get_arqs_for_instance(
            arq_owner(instance))
    except exception.CyborgError as e:
        error = exception.RevertNotStarted(error=e)
        LOG.error('%s', error.format_message(), instance=instance)
        if migration is not None:
            migration.status = 'finished'
            migration.save()
        instance.task_state = None
        instance.save()
        _record_failure(context, instance, REVERT_EVENT, error)
        return False
    return True


def _record_failure(context, instance, event, error):
    """An instance action event in error, saying why, for the owner."""
    try:
        objects.InstanceActionEvent.event_start(
            context, instance.uuid, event, want_result=False,
            host=instance.host)
        objects.InstanceActionEvent.event_finish_with_failure(
            context, instance.uuid, event, exc_val=error.format_message(),
            exc_tb='')
    except Exception as e:  # noqa: B902 (the state is restored already)
        LOG.warning('Could not record the instance action event %(ev)s: '
                    '%(err)s', {'ev': event, 'err': e}, instance=instance)


def rebind_at_source(virtapi, context, instance):
    """Delete the destination's ARQs, then bind the parked ones again,
    before the source guest is rebuilt.

    Runs on the source in ``finish_revert_resize``, after the destination
    destroyed its guest: no device is in use there any more. The
    destination's ARQs are those not parked
    (:func:`nova_cyborg.flows.move.resize.destination_arqs`): on another host,
    or on this one after a resize to the same host. Cyborg would refuse the
    bind of the parked ones next to them.

    :raises: CyborgError if the destination's ARQs could not be deleted
        (they are remembered, and deleted at the next move), or the
        binding failure; the revert fails with it, the ARQs of the source
        still parked (:func:`nova_cyborg.flows.move.recovery.parked_here`).
    """
    # The flavor is the source's again; the destination's ARQs come from
    # the flavor the server was being resized to.
    if not (parked(instance) or _profile(instance.flavor) or
            _profile(move.migration_flavor(instance))):
        return
    client = nc_client.get_client(context)
    destination = move.destination_arqs(
        instance, client.get_arqs_for_instance(arq_owner(instance)),
        _hostnames(instance))
    if destination:
        try:
            client.delete_arqs_strictly(destination)
        except exception.CyborgError:
            bookkeeping.remember_retired(instance, destination)
            raise
        LOG.info('Deleted the accelerator requests %s of the destination',
                 ','.join(destination), instance=instance)
    arq_steps.unpark(virtapi, context, instance)
