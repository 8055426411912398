"""API side: which server actions a server with accelerators may take.

Routed from ``nova.compute.api.block_accelerators``, the decorator that
upstream puts on the actions it refuses for a flavor with
``accel:device_profile`` (resize and cold migrate, suspend, live migrate;
rebuild, evacuate and shelve only above a compute service version), and
from the check of the new flavor in ``API.resize``.

Upstream's service version checks are gone (a patched compute reports
the same service version as an unpatched one): what nova-cyborg makes
work is allowed, and what it cannot do is refused with a message that
says why and what to do instead. A move is also refused (HTTP 409) when
a host it needs does not report that it runs nova-cyborg
(:mod:`nova_cyborg.model.capability`).

Live migration is allowed when every ARQ of the server (the flavor's and
the attached ones, under the UUID that holds them now:
:func:`nova_cyborg.model.bookkeeping.arq_owner`) is bound to a device whose
provider has the trait ``HW_PCI_LIVE_MIGRATABLE`` in Placement (the
sidecar sets it for devices whose driver supports VFIO migration), none
was attached with addAccelerator (only the flavor's device profile is
bound on the destination) and the destination is not forced. Anything
else is refused (HTTP 400) naming the ARQ, its device profile, the device
and the host, before any state changes.
"""

import inspect

from keystoneauth1 import exceptions as ks_exc
from nova.compute import vm_states
from nova import exception as nova_exception
from nova.scheduler.client import report as placement_report
import os_traits

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import capability
from nova_cyborg.steps import quota

DP_EXTRA_SPEC = 'accel:device_profile'

#: Decorated ``nova.compute.api.API`` methods this integration supports.
SUPPORTED = frozenset(['evacuate', 'live_migrate', 'rebuild', 'resize',
                       'shelve', 'suspend'])

#: The trait of a device provider whose functions support VFIO migration.
LIVE_MIGRATABLE = os_traits.HW_PCI_LIVE_MIGRATABLE
#: The states ``API.live_migrate`` accepts (its check_instance_state).
_LIVE_MIGRATABLE_STATES = (vm_states.ACTIVE, vm_states.PAUSED)

#: Actions that would lose accelerators attached with addAccelerator:
#: only the flavor's device profile follows a server that is rebuilt,
#: moved or offloaded. (Evacuation is allowed: the host is gone, and the
#: server takes what was attached along, nova_cyborg.steps.evacuation.)
_NOT_WITH_ATTACHED = frozenset(['rebuild', 'resize', 'shelve'])

_REFUSALS = {}


def check_operation(operation, instance):
    """Refuse ``operation`` if this integration cannot keep the devices.

    :param operation: the name of the ``nova.compute.api.API`` method.
    :raises: OperationRefused (HTTP 400) with the reason.
    """
    if (operation in _NOT_WITH_ATTACHED and
            bookkeeping.attached_profiles(instance)):
        raise exception.OperationRefused(reason=_(
            'The %s action would drop the accelerators attached to the '
            'server with addAccelerator: detach them first '
            '(removeAccelerator).') % operation)
    if not bookkeeping.has_accelerators(instance):
        return
    if operation in SUPPORTED:
        return
    reason = _REFUSALS.get(operation) or _(
        'The %s action is not supported for a server with accelerators.'
    ) % operation
    raise exception.OperationRefused(reason=reason)


def check_hosts(context, func, instance, *args, **kwargs):
    """Refuse a move of a server with accelerators a host cannot serve.

    Routed from ``block_accelerators`` with the decorated method and its
    arguments (:func:`nova_cyborg.model.capability.check_hosts`).

    :raises: ComputeNotServing (HTTP 409) naming the host and why.
    """
    if not bookkeeping.has_accelerators(instance):
        return
    arguments = inspect.signature(func).bind(
        None, context, instance, *args, **kwargs).arguments
    # First whether the hosts run what the move needs, then (live
    # migration) whether the devices can move.
    capability.check_hosts(context, func.__name__, instance, arguments)
    if func.__name__ == 'live_migrate':
        check_live_migration(context, instance, arguments.get('host_name'),
                             arguments.get('force'))


def check_unshelve_host(context, instance, host):
    """Refuse an unshelve of a server with accelerators to a named host
    that cannot serve them (:func:`nova_cyborg.model.capability.check_hosts`).

    :raises: UnshelveHostNotServing (HTTP 409) naming the host and why.
    """
    if host and bookkeeping.has_accelerators(instance):
        capability.check_hosts(context, 'unshelve', instance, {'host': host})


def _refuse_live_migration(reason):
    raise exception.OperationRefused(reason=_(
        'Live migration of this server with accelerators is refused: %s'
    ) % reason)


def check_live_migration(context, instance, host_name, force):
    """Refuse a live migration whose devices cannot move.

    :param host_name: the destination the caller named, or None.
    :param force: the API's ``force`` (True: the destination is forced,
        microversions 2.30 to 2.67; None below 2.30, where a named host
        is forced too; False: the scheduler checks the named host).
    :raises: OperationRefused (HTTP 400) naming what blocks it.
    """
    if (instance.vm_state not in _LIVE_MIGRATABLE_STATES or
            instance.task_state is not None):
        # Nova's own state check, after this one, answers HTTP 409.
        return
    if host_name and force is not False:
        _refuse_live_migration(_(
            'the destination host %s is forced. The scheduler must choose '
            'the devices on the destination, and Nova refuses forced live '
            'migrations of servers whose allocations span several resource '
            'providers. Name the host without forcing it (API microversion '
            '2.68 or later, or "force": false).') % host_name)
    try:
        arqs = nc_client.get_client(context).get_arqs_for_instance(
            bookkeeping.arq_owner(instance))
    except exception.CyborgError as e:
        _refuse_live_migration(_(
            'its accelerator requests could not be read from Cyborg (%s). '
            'Try again later.') % e.format_message())
    if not arqs:
        _refuse_live_migration(_(
            'Cyborg holds no accelerator request for it: its devices are '
            'not in place.'))
    placement = placement_report.report_client_singleton()
    blocking = []
    for arq in sorted(arqs, key=lambda arq: arq.get('uuid') or ''):
        if arq.get('state') != 'Bound' or not arq.get('device_rp_uuid'):
            blocking.append(_(
                'accelerator request %(arq)s (device profile %(dp)s) is '
                '%(state)s, not bound to a device') % {
                    'arq': arq.get('uuid'),
                    'dp': arq.get('device_profile_name'),
                    'state': arq.get('state')})
            continue
        rp_uuid = arq['device_rp_uuid']
        try:
            traits = placement.get_provider_traits(context, rp_uuid).traits
            if LIVE_MIGRATABLE in traits:
                continue
            device = _provider_name(context, placement, rp_uuid)
        except (nova_exception.NovaException, ks_exc.ClientException) as e:
            _refuse_live_migration(_(
                'the traits of device %(rp)s could not be read from '
                'Placement (%(error)s). Try again later.') % {
                    'rp': rp_uuid, 'error': e})
        blocking.append(_(
            'accelerator request %(arq)s (device profile %(dp)s) uses device '
            '%(device)s on host %(host)s, whose resource provider does not '
            'have trait %(trait)s') % {
                'arq': arq['uuid'], 'dp': arq.get('device_profile_name'),
                'device': device, 'host': arq.get('hostname'),
                'trait': LIVE_MIGRATABLE})
    if blocking:
        _refuse_live_migration(_(
            '%(blocking)s. Only devices whose driver supports VFIO migration '
            'can move with a running guest; the host\'s nova-cyborg sidecar '
            'marks them ([pci] device_spec "live_migratable", [gpu] '
            'live_migratable_mdev_types). Cold migrate the server instead '
            '(openstack server migrate).') % {
                'blocking': '; '.join(blocking)})
    attached = bookkeeping.attached_profiles(instance)
    if attached:
        # The conductor binds the destination's ARQs for the flavor's
        # device profile only (nova_cyborg.flows.live_migration.conductor).
        _refuse_live_migration(_(
            'the accelerators attached with addAccelerator (device profiles '
            '%s) are not live-migrated. Detach them first '
            '(removeAccelerator), or cold migrate the server instead '
            '(openstack server migrate).') % ', '.join(attached))


def _provider_name(context, placement, rp_uuid):
    """The name of a provider (the deployable's), or its UUID if gone."""
    resp = placement.get('/resource_providers/%s' % rp_uuid,
                         version='1.14', global_request_id=context.global_id)
    if not resp:
        return rp_uuid
    return resp.json().get('name') or rp_uuid


def check_new_flavor(context, flavor, instance=None):
    """Check the device profile of a resize's new flavor, if it has one.

    Upstream refuses any new flavor with a device profile. Here the
    profile must exist and be well formed, which is checked before the
    resize starts, so the user gets the error (HTTP 400) and not an
    instance action event; and under unified limits the server's project
    must have room for the new flavor with its profile's devices
    (:func:`nova_cyborg.steps.quota.check_resize`).

    :param instance: the server resized (None: no limit is checked).
    :raises: OperationRefused naming the profile and what is wrong;
        TooManyInstances (HTTP 403) over the project's limits.
    """
    dp_name = flavor.extra_specs.get(DP_EXTRA_SPEC)
    if not dp_name:
        return
    try:
        groups = nc_client.get_device_profile_request_groups(context,
                                                             dp_name)
    except (exception.DeviceProfileError, exception.CyborgError) as e:
        raise exception.OperationRefused(reason=e.format_message())
    if instance is not None:
        quota.check_resize(context, instance, flavor, groups)
