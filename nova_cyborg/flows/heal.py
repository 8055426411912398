"""Heal the accelerator part of a server's Placement allocation.

Upstream ``nova-manage placement heal_allocations`` refuses every server
whose flavor names a device profile (bug 1939020): it can only build an
allocation from the flavor, on the compute node's provider, and would drop
or never create the accelerators' part, which sits on Cyborg's device
providers. Routed from ``PlacementCommands._heal_allocations_for_instance``,
this module gives that part from what Cyborg knows:

* each of the server's ARQs must be ``Bound``; its ``device_rp_uuid`` is
  the provider of its device;
* its device profile group (``device_profile_name`` and
  ``device_profile_group_id``) has one ``resources:<RC>`` key; the ARQ
  holds one unit of that resource class on its provider (Cyborg creates
  one ARQ per unit of a group).

Any doubt (Cyborg unreachable, an ARQ not Bound, a profile gone or
malformed) raises nova's ``AllocationUpdateFailed`` before anything is
written, so nova-manage reports why and exits with 3.

nova-manage has an admin context without a user token: the client calls
Cyborg as ``[service_user]`` then.
"""


from oslo_log import log as logging

from nova import exception as nova_exception

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping
from nova_cyborg.steps import arq_allocations

LOG = logging.getLogger(__name__)

BOUND = 'Bound'


def accelerator_allocations(context, instance):
    """Return the allocations the instance's Bound ARQs account for.

    Accelerators attached with addAccelerator count as the flavor's do:
    ``--force`` on a server whose devices all came from addAccelerator
    rebuilds its allocation from the flavor *and* them, instead of freeing
    in Placement devices its guest holds.

    :returns: ``{rp_uuid: {'resources': {rc: amount}}}``; ``{}`` without
        asking Cyborg if the instance has no accelerator (no device
        profile in its flavor, none attached).
    :raises: nova.exception.AllocationUpdateFailed if Cyborg cannot be
        asked, an ARQ is not Bound or its device profile group is unusable.
    """
    if not bookkeeping.has_accelerators(instance):
        return {}
    dp_name = (bookkeeping.flavor_profile(instance.flavor) or
               ', '.join(bookkeeping.attached_profiles(instance)))
    try:
        cyclient = nc_client.get_client(context)
        arqs = _bound_arqs(cyclient, bookkeeping.arq_owner(instance),
                           dp_name)
        return arq_allocations.expected(
            arqs, arq_allocations.profile_groups(cyclient, arqs))
    except (arq_allocations.CannotAccount, exception.CyborgError,
            nova_exception.DeviceProfileError) as e:
        raise nova_exception.AllocationUpdateFailed(
            consumer_uuid=instance.uuid,
            error=_('cannot heal the accelerator allocations: %s') %
            e.format_message())


def missing_allocations(instance_uuid, allocations, accel_allocations):
    """Return the part of ``accel_allocations`` that ``allocations`` lack.

    :param allocations: the consumer's allocations as they are or will be
        written, ``{rp_uuid: {'resources': {rc: amount}, ...}}``.
    :raises: nova.exception.AllocationUpdateFailed if ``allocations`` hold
        an accelerator resource class on a provider where the instance has
        no Bound ARQ: adding the ARQs' part would allocate the devices
        twice.
    """
    _check_no_stale_devices(instance_uuid, allocations, accel_allocations)
    missing = {}
    for rp_uuid, alloc in accel_allocations.items():
        held = allocations.get(rp_uuid, {}).get('resources', {})
        for rc, amount in alloc['resources'].items():
            lack = amount - held.get(rc, 0)
            if lack > 0:
                missing.setdefault(rp_uuid, {'resources': {}})[
                    'resources'][rc] = lack
    if missing:
        LOG.info('Adding the accelerator allocations %s to instance %s',
                 missing, instance_uuid)
    return missing


def _bound_arqs(cyclient, instance_uuid, dp_name):
    """The instance's ARQs, which must all be Bound to a provider."""
    arqs = cyclient.get_arqs_for_instance(instance_uuid)
    if not arqs:
        raise arq_allocations.CannotAccount(_(
            'Cyborg has no accelerator request for the instance, which '
            'has the accelerators of device profile(s) %s') % dp_name)
    for arq in arqs:
        if arq.get('state') != BOUND:
            raise arq_allocations.CannotAccount(
                exception.AcceleratorRequestNotBound(
                    arq=arq.get('uuid'),
                    state=arq.get('state')).format_message())
        if not arq.get('device_rp_uuid'):
            raise arq_allocations.CannotAccount(_(
                'accelerator request %s is Bound to no resource provider') %
                arq.get('uuid'))
    return arqs


def _check_no_stale_devices(instance_uuid, allocations, accel_allocations):
    """Refuse allocations holding accelerators on providers no ARQ is on."""
    accel_rcs = {rc for alloc in accel_allocations.values()
                 for rc in alloc['resources']}
    for rp_uuid, alloc in sorted(allocations.items()):
        if rp_uuid in accel_allocations:
            continue
        stale = sorted(accel_rcs & set(alloc.get('resources', {})))
        if stale:
            raise nova_exception.AllocationUpdateFailed(
                consumer_uuid=instance_uuid, error=_(
                    'the allocation holds %(rcs)s on resource provider '
                    '%(rp)s, where the instance has no Bound accelerator '
                    'request; run with --force to rebuild it from the '
                    'flavor and the accelerator requests') % {
                        'rcs': ', '.join(stale), 'rp': rp_uuid})
