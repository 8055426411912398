"""Unified limits for the devices nova-cyborg gives a server after boot.

Nova 34 counts the groups of a flavor's device profile at boot
(``nova.limit.placement``, ``scheduler_utils.request_spec_for_limits``).
nova-cyborg adds two ways for a project to get more devices, which
upstream refuses, and each is checked the way the boot is:

* ``addAccelerator``: the profile's resources, on top of what the project
  uses in Placement (no server is added);
* a resize into a flavor with a device profile: the new flavor with its
  profile's groups, as Nova's ``_check_quota_for_upsize`` checks the new
  flavor (Placement holds both flavors' allocations until the resize is
  confirmed or reverted).

An evacuation is not checked: Nova checks no limit when it evacuates (the
server keeps what it had, and the source's allocation goes when the source
host comes back), for the devices of the flavor or added ones alike.

With the legacy quota driver nothing is checked here: it counts no
resource classes, for the boot either.
"""

from nova.compute import utils as compute_utils
from nova.limit import utils as limit_utils
from nova import objects
from nova.objects import quotas as quotas_obj

from nova_cyborg import compat

#: A flavor that asks for nothing: the deltas of an attach are its
#: profile's groups alone.
_NOTHING = dict(vcpus=0, memory_mb=0, root_gb=0, ephemeral_gb=0, swap=0,
                extra_specs={})


def _enforce(context, instance, flavor, is_bfv, groups, servers):
    project_id, _user_id = quotas_obj.ids_from_instance(context, instance)
    compat.enforce_limits(context, project_id, flavor, is_bfv, groups,
                          delta_updates=None if servers else {'servers': 0})


def check_attach(context, instance, groups):
    """Refuse an ``addAccelerator`` that takes the server's project over
    its limits.

    :param groups: the profile's nova.objects.RequestGroup list.
    :raises: nova.exception.TooManyInstances (an OverQuota: HTTP 403),
        naming the resource class and the limit.
    """
    if not limit_utils.use_unified_limits():
        return
    _enforce(context, instance, objects.Flavor(**_NOTHING), True, groups,
             servers=False)


def check_resize(context, instance, flavor, groups):
    """Refuse a resize into ``flavor``, whose device profile has
    ``groups``, that takes the server's project over its limits.

    :raises: nova.exception.TooManyInstances (HTTP 403).
    """
    if not limit_utils.use_unified_limits():
        return
    is_bfv = compute_utils.is_volume_backed_instance(context, instance)
    _enforce(context, instance, flavor, is_bfv, groups, servers=True)
