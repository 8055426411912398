"""What a server's Bound ARQs account for in its Placement allocation:
one unit of its device profile group's resource class per ARQ, on the
ARQ's device provider.

Used by ``nova-manage placement heal_allocations`` (nova_cyborg.flows.heal)
and by nova-compute's recovery of an interrupted accelerator action
(nova_cyborg.flows.attach.recovery).
"""

import collections

from nova_cyborg.i18n import _
from nova_cyborg.model import request_groups


class CannotAccount(Exception):
    """Why the accelerator part cannot be known; becomes a nova error."""

    def format_message(self):
        return str(self)


def profile_groups(cyclient, arqs):
    """{device profile name: [RequestGroup]} of the profiles ARQs name."""
    groups = {}
    for dp_name in sorted({arq.get('device_profile_name') for arq in arqs}):
        groups[dp_name] = request_groups.build_request_groups(
            cyclient.get_device_profile_groups(dp_name), dp_name=dp_name)
    return groups


def resource_class(arq, groups):
    """The resource class one unit of which the ARQ holds."""
    dp_name = arq.get('device_profile_name')
    index = arq.get('device_profile_group_id')
    profile = groups[dp_name]
    if not isinstance(index, int) or not 0 <= index < len(profile):
        raise CannotAccount(_(
            'accelerator request %(arq)s names group %(index)s of device '
            'profile %(name)s, which has %(count)d groups') % {
                'arq': arq.get('uuid'), 'index': index, 'name': dp_name,
                'count': len(profile)})
    resources = profile[index].resources
    if len(resources) != 1:
        raise CannotAccount(_(
            'group %(index)d of device profile %(name)s asks for several '
            'resource classes (%(rcs)s); which one accelerator request '
            '%(arq)s holds is unknown') % {
                'index': index, 'name': dp_name,
                'rcs': ', '.join(sorted(resources)), 'arq': arq.get('uuid')})
    return next(iter(resources))


def expected(arqs, groups):
    """Sum one unit of each ARQ's resource class per provider."""
    totals = collections.defaultdict(collections.Counter)
    for arq in arqs:
        totals[arq['device_rp_uuid']][resource_class(arq, groups)] += 1
    return {rp_uuid: {'resources': dict(resources)}
            for rp_uuid, resources in totals.items()}
