"""Who an FPGA is promised to: its Placement allocations.

A server scheduled to a card holds an allocation on one of the card's
resource providers from scheduling until it is deleted or moved away, the
whole time between its ARQ being bound and its domain being defined
included. The allocation is the promise: it lasts exactly as long as the
server needs the card, and it is there whether or not cyborg-conductor
asked the sidecar to program the card for that server (the conductor skips
the call when its ``bitstream_id`` already matches).

Before a card is programmed with function ``W`` every consumer holding an
allocation on one of its providers is looked up in Cyborg (its ARQs bound
to this card, or not bound yet, and their device profile group) to learn
what it wants:

* ``accel:bitstream_id``: the function the bitstream image names in Glance;
* ``accel:function_id``: that function;
* a required ``trait:CUSTOM_FPGA_FUNCTION_ID_*``: that trait;
* none of these: whatever the card holds now (it runs on it as it is).

The programming is refused (:class:`~sidecar.exception.DeviceBusy`, naming
the consumer and why) if a consumer wants something other than ``W`` that
the card holds now, wants "whatever is loaded", or cannot be looked up (no
ARQ for this card, Cyborg, Glance or a profile unreadable). A consumer
that wants another function the card does not hold does not stop ``W``: it
runs on nothing yet, and its own programming is checked in turn. That keeps
two servers asking different functions of a blank card from refusing each
other. Placement unreachable refuses too: the card is never programmed
blind.
"""

import re
import time

from sidecar import exception

FUNCTION_TRAIT_PREFIX = 'CUSTOM_FPGA_FUNCTION_ID'
BITSTREAM_KEY = 'accel:bitstream_id'
FUNCTION_KEY = 'accel:function_id'
TRAIT_KEY_PREFIX = 'trait:' + FUNCTION_TRAIT_PREFIX
FUNCTION_ID_RE = re.compile(r'^[A-Za-z0-9_]{1,64}$')

#: What a consumer asking no function wants: the card as it is.
AS_LOADED = object()

#: The state of an ARQ whose bind job runs (cyborg.common.constants).
BIND_STARTED = 'BindStarted'


def function_trait(driver_name, function_id):
    """The trait cyborg-conductor puts on a provider after programming."""
    return '_'.join((FUNCTION_TRAIT_PREFIX, driver_name.upper(),
                     function_id.upper()))


class _Unknown(Exception):
    """What a consumer wants cannot be found out."""


class _NoRequest(_Unknown):
    """The consumer has no ARQ for this card: its ARQs are not created
    yet (just scheduled) or already deleted (its build failed here and its
    allocation is about to be freed)."""


#: How long a consumer without an ARQ for the card is given to get one or
#: to lose its allocation before the programming is refused (seconds).
SETTLE_SECONDS = 20
SETTLE_POLL = 0.5


class PromiseChecker:
    """Refuse a programming that would change a card under a consumer."""

    def __init__(self, placement, cyborg, images,
                 trait_prefix=FUNCTION_TRAIT_PREFIX):
        #: The traits that say what a device holds: FPGA functions, or a
        #: vGPU type's (:mod:`sidecar.program.vgpu_types`), whose profiles
        #: ask for it by a required trait only.
        self._prefix = trait_prefix
        self._placement = placement
        self._cyborg = cyborg
        self._images = images
        self._clock = time.monotonic
        self._sleep = time.sleep

    def check(self, address, providers, wanted, loaded):
        """Raise DeviceBusy unless ``address`` may be programmed with the
        function trait ``wanted``.

        :param providers: ``{provider uuid: driver name}`` of every
            deployable of the card.
        :param loaded: the function traits the card holds now.
        """
        held = set(loaded)
        consumers = {}
        for rp in sorted(providers):
            try:
                allocations = self._placement.allocations(rp)
                held |= {t for t in self._placement.read_provider(rp)[1]
                         if t.startswith(self._prefix)}
            except exception.PlacementError as exc:
                raise exception.DeviceBusy(
                    address=address,
                    reason='its allocations cannot be read, so it is not '
                           'programmed blind: %s' % exc)
            for consumer in allocations:
                consumers.setdefault(consumer, set()).add(rp)
        profiles = {}
        for consumer in sorted(consumers):
            try:
                wants = self._settled_wants(consumer, consumers[consumer],
                                            providers, profiles)
            except _Unknown as exc:
                raise exception.DeviceBusy(
                    address=address,
                    reason='consumer %s holds an allocation on it and what '
                           'it wants is unknown (%s)' % (consumer, exc))
            for want in wants:
                if want is AS_LOADED:
                    raise exception.DeviceBusy(
                        address=address,
                        reason='consumer %s holds an allocation on it and '
                               'asks no function: it uses the function '
                               'loaded now' % consumer)
                if want != wanted and want in held:
                    raise exception.DeviceBusy(
                        address=address,
                        reason='consumer %s holds an allocation on it and '
                               'wants %s, which it holds now' % (consumer,
                                                                 want))

    def binding(self, address, providers, wanted):
        """The providers among ``providers`` (``{uuid: driver name}``) an
        ARQ being bound (state ``BindStarted``) that asks ``wanted`` is
        bound to: cyborg-conductor's ``fpga_program`` names a card, this
        names the region it programs for. Raises DeviceBusy when Cyborg
        cannot be read."""
        try:
            arqs = self._cyborg.all_arqs()
        except exception.SidecarError as exc:
            raise exception.DeviceBusy(
                address=address,
                reason='the accelerator requests being bound cannot be '
                       'read, so no region of it is programmed: %s' % exc)
        found, profiles = set(), {}
        for arq in arqs:
            rp = arq.get('device_rp_uuid') if isinstance(arq, dict) else None
            if rp not in providers or arq.get('state') != BIND_STARTED:
                continue
            try:
                wants = self._arq_wants(arq, [providers[rp]], profiles)
            except _Unknown:
                continue
            if wanted in wants:
                found.add(rp)
        return found

    def _settled_wants(self, consumer, rps, providers, profiles):
        """:meth:`_wants`, giving a consumer without an ARQ for the card
        ``SETTLE_SECONDS`` to get one or to lose its allocation (then it
        wants nothing of the card)."""
        deadline = self._clock() + SETTLE_SECONDS
        while True:
            try:
                return self._wants(consumer, providers, profiles)
            except _NoRequest:
                if self._clock() >= deadline:
                    raise
            self._sleep(SETTLE_POLL)
            try:
                if not any(consumer in self._placement.allocations(rp)
                           for rp in rps):
                    return set()
            except exception.PlacementError as exc:
                raise _Unknown(str(exc))

    def _wants(self, consumer, providers, profiles):
        """The function traits (or AS_LOADED) ``consumer`` wants of the
        card whose providers are ``providers``."""
        try:
            arqs = self._cyborg.arqs_of(consumer)
        except exception.SidecarError as exc:
            raise _Unknown(str(exc))
        # Bound to this card, or not bound yet (the bind may bring it
        # here); those bound to other cards do not say what this one is
        # for.
        mine = [arq for arq in arqs
                if arq.get('device_rp_uuid') in providers or
                not arq.get('device_rp_uuid')]
        if not mine:
            raise _NoRequest('it has no accelerator request for this card')
        drivers = sorted(set(providers.values()))
        wants = set()
        for arq in mine:
            rp = arq.get('device_rp_uuid')
            wants |= self._arq_wants(
                arq, [providers[rp]] if rp else drivers, profiles)
        return wants

    def _arq_wants(self, arq, drivers, profiles):
        """What ``arq``'s device profile group asks of a card driven by
        one of ``drivers``."""
        wants = set()
        name = arq.get('device_profile_name')
        index = arq.get('device_profile_group_id')
        if name not in profiles:
            try:
                profiles[name] = self._cyborg.device_profile(name)
            except exception.SidecarError as exc:
                raise _Unknown(str(exc))
        groups = profiles[name].get('groups')
        if (not isinstance(groups, list) or not isinstance(index, int)
                or not 0 <= index < len(groups)
                or not isinstance(groups[index], dict)):
            raise _Unknown('ARQ %s names group %r of device profile %s, '
                           'which has no such group'
                           % (arq.get('uuid'), index, name))
        for driver in drivers:
            wants.add(self._function_of(groups[index], driver))
        return wants

    def _function_of(self, group, driver_name):
        fpga = self._prefix == FUNCTION_TRAIT_PREFIX
        bitstream = group.get(BITSTREAM_KEY) if fpga else None
        function_id = group.get(FUNCTION_KEY) if fpga else None
        if bitstream:
            try:
                metadata = self._images.get_metadata(str(bitstream))
            except exception.SidecarError as exc:
                raise _Unknown(str(exc))
            function_id = self._images.function_id(metadata)
        if function_id:
            if (not isinstance(function_id, str) or
                    not FUNCTION_ID_RE.match(function_id)):
                raise _Unknown('function id %r cannot name a trait'
                               % (function_id,))
            return function_trait(driver_name, function_id)
        traits = sorted(key[len('trait:'):] for key, value in group.items()
                        if key.startswith('trait:' + self._prefix) and
                        value == 'required')
        if len(traits) > 1:
            raise _Unknown('its profile requires %s at once'
                           % ', '.join(traits))
        return traits[0] if traits else AS_LOADED
