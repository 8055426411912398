"""Hooks of ``nova.compute.utils`` (patch 0011).

Separate from :mod:`nova_cyborg.hooks.compute`: ``nova.compute.utils`` is
imported by the modules that hook imports (nova_cyborg.clients.compute_rpc uses
its decorators), so this one imports the ARQ cleanup only.
"""

from nova_cyborg.flows.cleanup import delete as cleanup
from nova_cyborg.model import bookkeeping


def delete_arqs_if_needed(context, instance, arq_uuids=None):
    """Called by ``nova.compute.utils.delete_arqs_if_needed()`` (delete,
    local delete, build failures, the conductor's cleanup).

    Also deletes the accelerators attached with addAccelerator and the ARQs
    a resize parked or retired. Failures are logged, not raised, as
    upstream.

    Nothing, and nothing loaded, for a server without a device profile,
    without records and without ``arq_uuids``, as upstream: every caller
    has the instance the API made or loaded, with its system metadata
    (:func:`nova_cyborg.model.bookkeeping.has_accelerators`).

    :param instance: the nova.objects.Instance.
    :param arq_uuids: ARQs not bound to the instance yet, to delete too.
    """
    if not (arq_uuids or
            bookkeeping.has_accelerators(instance, load=False) or
            bookkeeping.unbound(instance, load=False)):
        return
    cleanup.delete_arqs_if_needed(context, instance, arq_uuids)
