"""Placement matches the host: check what cyborg-conductor wrote, repair it.

cyborg-conductor turns each report into this host's device providers in
Placement, and can fail at it while answering the report normally: it drops
a device whose custom trait another host's report created a moment before
(its check-then-create reads the 204 of the create as an error), it keeps a
new total in its database when Placement refused the inventory update, and
nothing brings back a provider an operator deleted. Seed 001 gives the
conductor the job to keep Placement in sync with reality; where it fails,
the sidecar does not.

Every cycle the reconciler reads the compute node's provider tree (one
call) and, for each provider whose generation changed since it last
matched, its inventories and traits. What the sidecar owns is compared:

- the provider: its name, the UUID cyborg-conductor derives from it, its
  parent (the compute node);
- the inventory of the deployable's resource class: ``total`` and
  ``max_unit`` equal to the accelerators found, ``reserved`` 0, or
  ``total`` while the device is held (:mod:`sidecar.state.holds`: disabled, new
  or unhealthy) (a device being programmed is skipped: its job holds it
  fully reserved);
- the traits: every trait the driver reports is there, and no function
  trait (``CUSTOM_FPGA_FUNCTION_ID_*``) other than the loaded one.

Other inventories and traits of those providers are left alone. A provider
that is missing is first reported again (cyborg-conductor re-creates a
device it dropped); what is still wrong afterwards is written directly, and
the next cycle reports once more so that a conductor which had lost the
device adds it back to its database.
"""

import contextlib
import dataclasses

from oslo_log import log as logging

from sidecar.discovery import health
from sidecar.program import manager as program
from sidecar.report import reporter as report

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Wanted:
    """What Placement should show for one deployable."""
    address: str
    name: str
    uuid: str
    resource_class: str
    total: int
    traits: frozenset
    #: ``total`` while the device is held out of scheduling, else 0.
    reserved: int = 0


def wanted(host, devices, held=None):
    """The providers ``devices`` should have in Placement;
    ``held(address)`` is true for a device held out of scheduling."""
    for device in devices:
        hold = bool(held and held(device.address))
        for dep in device.deployables:
            name = report.deployable_name(host, dep)
            # One deployable's own hold (health.deployable_key).
            own = hold or bool(held and held(health.deployable_key(
                device.address, dep.name)))
            yield Wanted(device.address, name, program.provider_uuid(name),
                         dep.resource_class, dep.num_accelerators,
                         frozenset(dep.traits),
                         dep.num_accelerators if own else 0)


def _owned_traits(traits):
    return {t for t in traits if t.startswith(program.FUNCTION_TRAIT_PREFIX)}


@dataclasses.dataclass
class Drift:
    """How one provider differs from what the host has."""
    missing: bool
    problems: list

    def __str__(self):
        return '; '.join(self.problems)


def differences(want, root_uuid, provider, inventories, traits):
    """What is wrong with ``provider`` (as Placement shows it, or None),
    as a list of phrases; empty when it matches ``want``."""
    if provider is None:
        return ['the provider is missing']
    problems = []
    if provider.get('parent_provider_uuid') != root_uuid:
        problems.append('its parent is %s, not the compute node %s' % (
            provider.get('parent_provider_uuid'), root_uuid))
    if want.total > 0:
        inv = inventories.get(want.resource_class)
        if inv is None:
            problems.append('it has no %s inventory' % want.resource_class)
        else:
            seen = (inv.get('total'), inv.get('max_unit'),
                    inv.get('reserved', 0))
            if seen != (want.total, want.total, want.reserved):
                problems.append(
                    '%s total/max_unit/reserved are %s/%s/%s, not '
                    '%d/%d/%d' % ((want.resource_class,) + seen +
                                  (want.total, want.total, want.reserved)))
    missing = want.traits - traits
    if missing:
        problems.append('traits %s are missing' % ', '.join(sorted(missing)))
    stale = _owned_traits(traits) - want.traits
    if stale:
        problems.append('stale traits %s' % ', '.join(sorted(stale)))
    return problems


class Reconciler:
    """Compare this host's device providers with Placement; repair them.

    :param placement: a :class:`sidecar.report.placement.PlacementClient`.
    :param idle: ``idle(address)``, a context manager that yields False
        while the device at ``address`` is being programmed (its providers
        then belong to the programming job) and True otherwise, holding the
        device for the duration.
    :param held: ``held(address)``, true while the device is held out of
        scheduling (its providers are then kept fully reserved).
    """

    def __init__(self, host, placement, idle=None, held=None):
        self._host = host
        self._placement = placement
        self._idle = idle or (lambda address: contextlib.nullcontext(True))
        self._held = held
        # uuid -> (generation, Wanted) of providers seen matching.
        self._matched = {}
        self._report_next = False

    def report_due(self):
        """True once after providers were created directly: the next cycle
        reports again, so a conductor that had dropped the device (not
        just its provider) adds it back."""
        due, self._report_next = self._report_next, False
        return due

    def check(self, root_uuid, devices):
        """``{Wanted: Drift}`` for each provider that does not match;
        devices being programmed are not checked."""
        tree = {rp['uuid']: rp
                for rp in self._placement.providers_in_tree(root_uuid)}
        drift = {}
        for want in wanted(self._host, devices, self._held):
            provider = tree.get(want.uuid)
            if (provider is not None and self._matched.get(want.uuid) ==
                    (provider.get('generation'), want) and
                    provider.get('parent_provider_uuid') == root_uuid):
                continue
            with self._idle(want.address) as idle:
                if not idle:
                    continue
                inventories, traits = {}, set()
                if provider is not None:
                    inventories, traits = self._placement.read_provider(
                        want.uuid)
                problems = differences(want, root_uuid, provider,
                                       inventories, traits)
            if problems:
                self._matched.pop(want.uuid, None)
                drift[want] = Drift(provider is None, problems)
            else:
                self._matched[want.uuid] = (provider.get('generation'), want)
        return drift

    def repair(self, root_uuid, drift):
        """Write what the sidecar owns for each provider of ``drift``."""
        for want in sorted(drift, key=lambda want: want.name):
            with self._idle(want.address) as idle:
                if not idle:
                    continue
                self._repair_one(root_uuid, want)
            LOG.warning('Wrote provider %(name)s in Placement as this host '
                        'has it (it was wrong: %(drift)s)',
                        {'name': want.name, 'drift': drift[want]})

    def _repair_one(self, root_uuid, want):
        placement = self._placement
        provider = placement.get_provider(want.uuid)
        if provider is None:
            placement.create_provider(want.uuid, want.name, root_uuid)
            self._report_next = True
        elif provider.get('parent_provider_uuid') != root_uuid:
            placement.set_parent(want.uuid, want.name, root_uuid)
        if want.total > 0:
            placement.set_inventory(want.uuid, want.resource_class,
                                    want.total, reserved=want.reserved)
        placement.replace_traits_with_prefix(
            want.uuid, program.FUNCTION_TRAIT_PREFIX, want.traits)

    def converge(self, root_uuid, devices, report_again):
        """Check, repair, check again. ``report_again()`` sends the full
        device list to the conductor; it is called first when a provider
        is missing. Returns the drift left ({} when everything matches)."""
        drift = self.check(root_uuid, devices)
        if not drift:
            return drift
        for want in sorted(drift, key=lambda want: want.name):
            LOG.warning('Placement does not match this host: %(name)s: '
                        '%(drift)s', {'name': want.name,
                                      'drift': drift[want]})
        if any(d.missing for d in drift.values()):
            LOG.warning('Reporting the full device list again: '
                        'cyborg-conductor may have dropped a device')
            report_again()
            drift = self.check(root_uuid, devices)
            if not drift:
                LOG.info('Placement matches this host again after a new '
                         'report')
                return drift
        self.repair(root_uuid, drift)
        return self.check(root_uuid, devices)
