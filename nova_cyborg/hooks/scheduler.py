"""Hooks of ``nova.scheduler.manager`` and ``nova.scheduler.request_filter``
(patches 0005 and 0014).
"""

import nova.conf

from nova_cyborg import compat
from nova_cyborg.flows import scheduling as scheduler
from nova_cyborg.model import capability

CONF = nova.conf.CONF


def claim(context, placement_client, spec_obj, instance_uuid, candidates,
          allocation_request_version=None):
    """Called by ``SchedulerManager._schedule()`` for each host it tries.

    Tries more than the host's first allocation candidate (bug 1874664).

    :param context: the scheduler's elevated RequestContext.
    :param placement_client: nova's SchedulerReportClient.
    :param spec_obj: the nova.objects.RequestSpec.
    :param candidates: the host's allocation candidates (dicts).
    :returns: the allocation request claimed, or None if none was.
    """
    return scheduler.claim(
        context, placement_client, spec_obj, instance_uuid, candidates,
        allocation_request_version=allocation_request_version)


def require_trait(request_spec):
    """Called by the ``accelerators_filter`` request filter after it
    required ``COMPUTE_ACCELERATORS`` for a flavor with a device profile.

    Requires the trait patched computes report (patch 0013) on the root
    provider too, so that a server with accelerators is never scheduled to
    a compute that does not serve nova-cyborg. Nothing for a request
    without a device profile.

    On a Nova without the ``OWNER_NOVA`` prefilter (Nova 33) with PCI in
    Placement on, warns once (:mod:`nova_cyborg.compat`).

    :param request_spec: the nova.objects.RequestSpec; changed in place.
    """
    compat.warn_without_owner_prefilter(CONF)
    capability.require(request_spec)


def no_valid_host(spec_obj, exc):
    """Called by ``SchedulerManager.select_destinations()`` where it raises
    NoValidHost (no allocation candidate, not enough hosts after the
    filters): the exception to raise. ``exc`` itself (upstream's) for a
    request without a nova-cyborg capability trait
    (:func:`nova_cyborg.flows.scheduling.no_valid_host`).
    """
    return scheduler.no_valid_host(spec_obj, exc)
