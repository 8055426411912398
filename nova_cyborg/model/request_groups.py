"""Device profile groups -> Placement request groups.

A device profile holds D >= 1 groups; group i becomes one numbered
Placement request group with suffix ``device_profile_<i>`` (the port UUID
is appended for a port-owned profile), which the scheduler maps to exactly
one resource provider. A group is a flat dict:

* ``resources:<RC>``: a positive integer amount of a standard or
  ``CUSTOM_`` resource class;
* ``trait:<TRAIT>``: ``required`` or ``forbidden``, for a standard or
  ``CUSTOM_`` trait;
* ``accel:<property>``: Cyborg's own properties (bitstream, function);
  Placement does not see them.

Cyborg validates profiles loosely, so every group is validated again here,
at the API, before anything is scheduled: an unknown key, a non-integer or
zero amount, an unknown resource class, an invalid trait name, a group
without resources or a profile asking for more accelerators than
``[nova_cyborg] max_accelerators_per_instance`` is refused with a message
that names the group and the key.
"""

import functools
import re

import os_resource_classes
import os_traits

import nova.conf
from nova import objects

from nova_cyborg import conf as nc_conf  # noqa: F401 (registers options)
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import fpga_function

CONF = nova.conf.CONF

REQUESTER_PREFIX = 'device_profile_'
_CUSTOM_NAME = re.compile(r'^CUSTOM_[A-Z0-9_]{1,248}$')
_ACCEL_KEY = re.compile(r'^accel:[A-Za-z0-9_.-]{1,255}$')
TRAIT_TYPES = ('required', 'forbidden')


def requester_id(group_index, owner=None):
    """The request group suffix of profile group ``group_index``."""
    return '%s%s%s' % (REQUESTER_PREFIX, group_index, owner or '')


def _is_resource_class(name):
    return (name in os_resource_classes.STANDARDS or
            bool(_CUSTOM_NAME.match(name)))


def _is_trait(name):
    if os_traits.is_custom(name):
        return bool(_CUSTOM_NAME.match(name))
    return name in _standard_traits()


@functools.lru_cache(maxsize=1)
def _standard_traits():
    return frozenset(os_traits.get_traits())


def _amount(value):
    """Return a positive int from a profile amount, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        amount = value
    elif isinstance(value, str) and re.match(r'^[0-9]{1,6}$', value):
        amount = int(value)
    else:
        return None
    return amount if amount > 0 else None


def _parse_group(dp_name, index, group):
    """Return (resources, required, forbidden) of one profile group."""
    def fail(msg):
        raise exception.DeviceProfileError(
            name=dp_name, msg=_('group %(index)d: %(msg)s') %
            {'index': index, 'msg': msg})

    if not isinstance(group, dict):
        fail(_('a group must be an object'))
    resources, required, forbidden = {}, set(), set()
    for key, value in group.items():
        if not isinstance(key, str):
            fail(_('invalid key %r') % (key,))
        prefix, _sep, name = key.partition(':')
        if prefix == 'resources':
            if not _is_resource_class(name):
                fail(_('unknown resource class %r') % name[:255])
            amount = _amount(value)
            if amount is None:
                fail(_('%(key)s must be a positive integer, not %(val)r') %
                     {'key': key, 'val': str(value)[:64]})
            resources[name] = amount
        elif prefix == 'trait':
            if not _is_trait(name):
                fail(_('invalid trait name %r') % name[:255])
            if value not in TRAIT_TYPES:
                fail(_('%(key)s must be "required" or "forbidden", not '
                       '%(val)r') % {'key': key, 'val': str(value)[:64]})
            (required if value == 'required' else forbidden).add(name)
        elif _ACCEL_KEY.match(key):
            continue
        else:
            fail(_('unknown key %r') % key[:255])
    if not resources:
        fail(_('a group must request at least one resource'))
    return resources, required, forbidden


class ProfileRequestGroups(list):
    """The request groups of one device profile, in its groups' order.

    ``asks`` holds what each group asks of an FPGA
    (:func:`nova_cyborg.model.fpga_function.ask`), for nova-api to record on
    the server (:func:`nova_cyborg.steps.function_check.record`). It stays in
    this process: the request spec sends the groups, never this attribute.
    """

    def __init__(self, groups, asks):
        super().__init__(groups)
        self.asks = asks


def build_request_groups(dp_groups, owner=None, dp_name=None):
    """Validate profile groups and return one RequestGroup per group
    (a :class:`ProfileRequestGroups`).

    :param dp_groups: the ``groups`` list of a device profile.
    :param owner: the port UUID for a port-owned profile, else None.
    :raises: DeviceProfileError naming the group and key at fault.
    """
    dp_name = dp_name or _('(unnamed)')
    if not isinstance(dp_groups, list) or not dp_groups:
        raise exception.DeviceProfileError(
            name=dp_name, msg=_('a device profile needs at least one group'))
    request_groups = []
    total = 0
    for index, group in enumerate(dp_groups):
        resources, required, forbidden = _parse_group(dp_name, index, group)
        total += sum(resources.values())
        rg = objects.RequestGroup(
            requester_id=requester_id(index, owner),
            resources=resources,
            required_traits=required,
            forbidden_traits=forbidden)
        request_groups.append(rg)
    check_limit(dp_name, total)
    return ProfileRequestGroups(
        request_groups, [fpga_function.ask(group) for group in dp_groups])


def count(request_groups):
    """The number of accelerators ``request_groups`` ask for."""
    return sum(sum(rg.resources.values()) for rg in request_groups)


def check_limit(dp_name, total, others=0):
    """Refuse more than ``max_accelerators_per_instance`` for one server.

    :param total: what device profile ``dp_name`` asks for.
    :param others: what the server has already (its flavor's profile and
        the profiles attached with addAccelerator).
    :raises: DeviceProfileError naming the counts.
    """
    limit = CONF.nova_cyborg.max_accelerators_per_instance
    if total + others <= limit:
        return
    if others:
        msg = _('the profile asks for %(total)d accelerators and the server '
                'has %(others)d already; at most %(limit)d are allowed per '
                'server') % {'total': total, 'others': others,
                             'limit': limit}
    else:
        msg = _('the profile asks for %(total)d accelerators; at most '
                '%(limit)d are allowed per instance') % {
                    'total': total, 'limit': limit}
    raise exception.DeviceProfileError(name=dp_name, msg=msg)
