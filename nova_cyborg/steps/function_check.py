"""Compute side: never start a guest on an FPGA holding the wrong function.

Called by :func:`nova_cyborg.steps.bound_arqs.get_bound_arqs` once the
instance's ARQs are Bound, before the guest is defined. For each ARQ, the
device profile group it was created from says what function it wants:

* ``accel:bitstream_id``: the function the bitstream image names in its
  ``accel:function_id`` property (read through Nova's image API, as
  cyborg-conductor and the sidecar read it from Glance);
* ``accel:function_id``: that function;
* a required ``trait:CUSTOM_FPGA_FUNCTION_ID_*``: that trait;
* none of these: no check (the guest runs on whatever the card holds).

What the card holds is what the sidecar reports for it: the
``CUSTOM_FPGA_FUNCTION_ID_<DRIVER>_<FUNCTION>`` trait it keeps on the
device's resource provider in Placement. Cyborg skips programming when its
own record says the card already has the bitstream, and that record can be
stale (the card was reprogrammed or reset since), so a Bound ARQ alone does
not prove the function.

What each group asks is recorded on the server by nova-api when it builds
the server from its flavor's device profile (:func:`record`, patch 0027),
so that a first build's check reads no profile from Cyborg; a server
without that record (built before it, by an unpatched nova-api, or since
moved, rebuilt or given accelerators of another profile) has its profile
read here, as it is now.

A mismatch raises :class:`FunctionMismatch` naming both functions; a
function that cannot be verified (Placement, Cyborg or the image
unreadable) raises :class:`FunctionUnverified`: the guest is never started
blind. Either fails this host only (nova_cyborg.steps.bound_arqs.build_failure
reschedules it, after the ARQs were deleted and the allocation freed).
"""

from oslo_log import log as logging

from nova.compute import vm_states
from nova import exception as nova_exception
from nova.scheduler.client import report

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import fpga_function

LOG = logging.getLogger(__name__)

BITSTREAM_KEY = fpga_function.BITSTREAM_KEY
FUNCTION_KEY = fpga_function.FUNCTION_KEY
TRAIT_PREFIX = fpga_function.TRAIT_PREFIX

#: System metadata of a server built from a flavor's device profile: the
#: profile's name, and what each of its groups asks (:func:`record`), as
#: ``<ASK_PREFIX><n>`` keys: ``kind:value``, or ``-`` for no ask.
PROFILE_KEY = 'nova_cyborg_dp_asked'
ASK_PREFIX = 'nova_cyborg_dp_ask_'
_NO_ASK = '-'
#: Nova keeps at most this many characters of a system metadata value.
_MAX_VALUE = 255


class FunctionCheckFailed(nova_exception.AcceleratorRequestOpFailed):
    """The device's function is not (or cannot be shown to be) the one the
    device profile asks for; this host must not start the guest."""

    msg_fmt = _("%(reason)s")


class FunctionMismatch(FunctionCheckFailed):
    pass


class FunctionUnverified(FunctionCheckFailed):
    pass


def _function_of_image(context, image_id):
    try:
        return fpga_function.function_of_image(context, image_id)
    except fpga_function.NoFunction as exc:
        raise FunctionUnverified(reason=str(exc))
    except Exception as exc:  # noqa: B902 (any failure: not verified)
        raise FunctionUnverified(reason=_(
            'the function of bitstream %(image)s cannot be read: %(err)s') %
            {'image': image_id, 'err': exc})


def record(instance, dp_name, request_groups):
    """Record on ``instance`` (not saved) what the groups of its flavor's
    device profile ask of an FPGA.

    :param request_groups: what ``get_device_profile_request_groups``
        returned for ``dp_name`` in this process (a
        nova_cyborg.model.request_groups.ProfileRequestGroups).

    Records nothing (the check reads the profile then) when the groups do
    not carry their asks or an ask is longer than Nova keeps.
    """
    asks = getattr(request_groups, 'asks', None)
    if not dp_name or asks is None:
        return
    values = [_NO_ASK if ask is None else '%s:%s' % ask for ask in asks]
    if len(dp_name) > _MAX_VALUE or any(len(v) > _MAX_VALUE
                                        for v in values):
        return
    if not instance.obj_attr_is_set('system_metadata'):
        instance.system_metadata = {}
    instance.system_metadata[PROFILE_KEY] = dp_name
    bookkeeping.store(instance, ASK_PREFIX, values)


#: What :func:`_recorded_ask` returns when nothing usable is recorded.
_UNRECORDED = object()


def _recorded_ask(instance, arq):
    """The ask :func:`record` kept for ``arq``'s group, or _UNRECORDED.

    Only while the server is in its first build, whose ARQs were created
    from the profile as nova-api read it (a move or rebuild creates them
    from the profile as it is then), and only for its flavor's profile.
    """
    if not (instance.obj_attr_is_set('vm_state') and
            instance.vm_state == vm_states.BUILDING and
            instance.obj_attr_is_set('system_metadata')):
        return _UNRECORDED
    meta = instance.system_metadata
    index = arq.get('device_profile_group_id')
    if (meta.get(PROFILE_KEY) is None or
            meta.get(PROFILE_KEY) != arq.get('device_profile_name') or
            not isinstance(index, int) or isinstance(index, bool)):
        return _UNRECORDED
    value = meta.get('%s%d' % (ASK_PREFIX, index))
    if value is None:
        return _UNRECORDED
    if value == _NO_ASK:
        return None
    kind, _sep, what = value.partition(':')
    if kind not in ('bitstream', 'function', 'trait') or not what:
        return _UNRECORDED
    return (kind, what)


def resolve(context, ask):
    """What ``ask`` (:func:`nova_cyborg.model.fpga_function.ask`) wants of the
    card: ('function', FUNCTION_ID) or ('trait', TRAIT), or None; a
    bitstream is read for its function.
    """
    if ask is None:
        return None
    kind, value = ask
    if kind == 'bitstream':
        return ('function', _function_of_image(context, value))
    return ask


def wanted(context, group):
    """What ``group`` (a device profile group) asks of the card.

    :returns: ('function', FUNCTION_ID) or ('trait', TRAIT), or None when
        it asks no function.
    """
    return resolve(context, fpga_function.ask(group))


def holds(traits, want):
    """Whether the function traits ``traits`` satisfy ``want``."""
    kind, value = want
    if kind == 'trait':
        return value in traits
    return any(fpga_function.names(t, value) for t in traits)


def _describe(want):
    kind, value = want
    if kind == 'trait':
        return value[len(TRAIT_PREFIX):] if value.startswith(
            TRAIT_PREFIX) else value
    return value.upper()


def _held(traits):
    return ', '.join(t[len(TRAIT_PREFIX):] for t in sorted(traits)) or _(
        'no function')


def _profile_group(cyclient, profiles, arq):
    name = arq.get('device_profile_name')
    index = arq.get('device_profile_group_id')
    if name not in profiles:
        try:
            profiles[name] = cyclient.get_device_profile_groups(name)
        except nova_exception.NovaException as exc:
            raise FunctionUnverified(reason=_(
                'the device profile of ARQ %(arq)s cannot be read: '
                '%(err)s') % {'arq': arq.get('uuid'),
                              'err': exc.format_message()})
    groups = profiles[name]
    if (not isinstance(groups, list) or not isinstance(index, int) or
            isinstance(index, bool) or not 0 <= index < len(groups)):
        raise FunctionUnverified(reason=_(
            'ARQ %(arq)s names group %(index)r of device profile %(name)s, '
            'which has no such group') % {'arq': arq.get('uuid'),
                                          'index': index, 'name': name})
    return groups[index]


def _function_traits(context, rp_uuid):
    try:
        info = report.report_client_singleton().get_provider_traits(
            context, rp_uuid)
    except Exception as exc:  # noqa: B902 (any failure: not verified)
        raise FunctionUnverified(reason=_(
            'the function of device %(rp)s cannot be read from Placement: '
            '%(err)s') % {'rp': rp_uuid,
                          'err': str(exc)[:200] or type(exc).__name__})
    return {t for t in info.traits if t.startswith(TRAIT_PREFIX)}


def check(context, instance, arqs):
    """Raise unless every ARQ's device holds the function its profile
    group asks for.

    :param arqs: the instance's Bound ARQs (validated by
        :func:`nova_cyborg.steps.bound_arqs.check_bound`).
    :raises: FunctionMismatch, FunctionUnverified
    """
    cyclient = None
    profiles = {}
    for arq in arqs:
        ask = _recorded_ask(instance, arq)
        if ask is not _UNRECORDED:
            want = resolve(context, ask)
        else:
            if cyclient is None:
                cyclient = nc_client.get_client(context)
            want = wanted(context, _profile_group(cyclient, profiles, arq))
        if want is None:
            continue
        rp_uuid = arq.get('device_rp_uuid')
        traits = _function_traits(context, rp_uuid)
        if not holds(traits, want):
            LOG.error('Device %(rp)s of ARQ %(arq)s holds function '
                      '%(held)s, not %(want)s that device profile %(dp)s '
                      'asks for; this host does not start the guest',
                      {'rp': rp_uuid, 'arq': arq.get('uuid'),
                       'held': _held(traits), 'want': _describe(want),
                       'dp': arq.get('device_profile_name')},
                      instance=instance)
            # Short: Nova cuts a fault at 255 characters, and when no host
            # is left this ends the conductor's "Exhausted all hosts".
            raise FunctionMismatch(reason=_(
                'device holds function %(held)s, profile asks %(want)s') % {
                    'held': _held(traits), 'want': _describe(want)})
        LOG.debug('Device %(rp)s holds function %(want)s',
                  {'rp': rp_uuid, 'want': _describe(want)},
                  instance=instance)
