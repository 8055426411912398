"""Hooks of ``nova.scheduler.manager`` (patch 0005)."""

from nova_cyborg import scheduler


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
