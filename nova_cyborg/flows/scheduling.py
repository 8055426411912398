"""Claiming in nova-scheduler: more than a host's first candidate.

Nova's ``SchedulerManager._schedule`` is patched to call :func:`claim` where
upstream claims ``host.allocation_candidates[0]`` only. For a multi-create
request whose accelerators sit on several nested providers of one host, that
first candidate is already used by the previous server of the request, so
upstream fails with NoValidHost (bug 1874664) although the host has room.
A request without accelerators is claimed as upstream: the first candidate
only.
"""

from oslo_log import log as logging

from nova import exception as nova_exception
from nova.scheduler import utils as scheduler_utils

from nova_cyborg import conf
from nova_cyborg.i18n import _
from nova_cyborg.model import capability
from nova_cyborg.model.request_groups import REQUESTER_PREFIX

CONF = conf.CONF
LOG = logging.getLogger(__name__)

DP_EXTRA_SPEC = 'accel:device_profile'


def requests_accelerators(spec_obj):
    """Whether the request asks for accelerators: its flavor names a device
    profile, or a device profile (a flavor's, a port's) added request
    groups.

    Loads nothing: a flavor without its extra specs loaded is judged by
    the request groups only (the API and the move tasks add a device
    profile's groups to every request that has one).
    """
    flavor = (spec_obj.flavor if spec_obj.obj_attr_is_set('flavor')
              else None)
    if (flavor is not None and flavor.obj_attr_is_set('extra_specs') and
            (flavor.extra_specs or {}).get(DP_EXTRA_SPEC)):
        return True
    if not spec_obj.obj_attr_is_set('requested_resources'):
        return False
    groups = spec_obj.requested_resources or []
    return any((group.requester_id or '').startswith(REQUESTER_PREFIX)
               for group in groups)


def claim(context, placement_client, spec_obj, instance_uuid, candidates,
          allocation_request_version=None):
    """Claim the first of a host's allocation candidates that Placement takes.

    Tries at most ``[nova_cyborg] claim_candidates_per_host`` candidates, in
    order, for a request with accelerators; only the first for any other,
    as upstream.

    :returns: the claimed allocation request, or None.
    """
    limit = (CONF.nova_cyborg.claim_candidates_per_host
             if requests_accelerators(spec_obj) else 1)
    for number, alloc_req in enumerate(candidates[:limit], 1):
        if scheduler_utils.claim_resources(
                context, placement_client, spec_obj, instance_uuid,
                alloc_req,
                allocation_request_version=allocation_request_version):
            if number > 1:
                LOG.debug('Claimed allocation candidate %d of the host for '
                          'instance %s', number, instance_uuid)
            return alloc_req
    return None


def no_valid_host(spec_obj, exc):
    """The NoValidHost to raise for ``exc``: for a request that required a
    nova-cyborg capability trait (a server with accelerators: boots,
    moves, live migration), one whose reason adds that only the hosts
    reporting it were considered; ``exc`` itself for any other request.

    A compute not patched by nova-cyborg, or patched by a version that does
    not serve the operation, never reports the trait: without this a user
    reads only "No valid host was found", though hosts with free devices
    may exist.
    """
    try:
        required = sorted(trait for trait in spec_obj.root_required
                          if trait.startswith(capability.TRAIT_PREFIX))
    except Exception:  # noqa: B902 (no request level params: not ours)
        return exc
    if not required:
        return exc
    reason = (exc.kwargs.get('reason') or '').strip()
    return nova_exception.NoValidHost(reason=' '.join(filter(None, [
        reason, _('Only hosts reporting %(traits)s (the nova-cyborg '
                  'capabilities this server needs) were considered.') % {
                      'traits': ', '.join(required)}])))
