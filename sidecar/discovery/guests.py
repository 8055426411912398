"""One device, one guest: a watch over the domains of this host.

Every discovery cycle the sidecar reads the definitions of every libvirt
domain of the host, running or not (read-only ``listAllDomains`` and
``XMLDesc``), and reports:

``shared``
    a PCI function or mdev held by the definitions of two domains or more
    (whoever manages it: Cyborg or Nova);
``no_arq``
    a PCI function or mdev of one of this sidecar's devices (an attach
    handle's function, the card's control path, an mdev whose parent is
    one of its GPUs) held by a domain whose server holds no ARQ for it:
    no ARQ of the server (its own UUID, or the alias a live migration
    binds under) is ``Bound`` to this host with that device.

The ARQs are read from Cyborg's API with the sidecar's ``[cyborg]`` user,
only for the servers whose domains hold one of the sidecar's devices (two
reads per such server: its UUID and its alias); a host whose domains hold
none of them asks Cyborg nothing. A suspicion is read again (domains,
then ARQs, then domains) before it is reported, so an attach or detach
between two reads is not taken for one.

Each finding is logged at ERROR when it appears (with the device, the
domains and their servers, and the servers holding an ARQ for it), shown
by ``nova-cyborg-sidecar-manage device list`` while it lasts, and counted
in ``<state_path>/guests.json``::

    {"shared": 0, "no_arq": 0, "findings_total": 0, "findings": [...]}

``shared`` and ``no_arq`` count the findings of the last cycle,
``findings_total`` every finding that appeared since the file was
created. The watch only reports: it changes no domain.
"""

import dataclasses
import os
import uuid

from oslo_log import log as logging

from sidecar import model
from sidecar.state import cache as state_cache

LOG = logging.getLogger(__name__)

FILE = 'guests.json'
SHARED = 'shared'
NO_ARQ = 'no_arq'
#: ``nova_cyborg.model.bookkeeping.ALIAS_NAMESPACE``: a server's ARQs may be
#: bound under ``uuid5(ALIAS_NAMESPACE, server uuid)`` (a live migration's
#: destination). The sidecar does not import nova_cyborg.
ALIAS_NAMESPACE = uuid.UUID('0b5c9e52-6f4e-5d0a-8a43-9d2f6c1e7b31')


def alias(server):
    return str(uuid.uuid5(ALIAS_NAMESPACE, server))


def arq_device(arq):
    """The PCI address or mdev UUID an ARQ holds, or None."""
    kind = arq.get('attach_handle_type')
    info = arq.get('attach_handle_info')
    if kind == 'MDEV' and not (isinstance(info, dict) and info.get(
            model.VGPU_FRAMEWORK) == model.VENDOR_VFIO):
        value = arq.get('attach_handle_uuid')
        return value.lower() if isinstance(value, str) else None
    # A vGPU 17 VF's vendor-VFIO MDEV handle is the VF itself.
    if kind not in ('PCI', 'MDEV') or not isinstance(info, dict):
        return None
    try:
        return '%04x:%02x:%02x.%x' % tuple(
            int(str(info[k]), 16)
            for k in ('domain', 'bus', 'device', 'function'))
    except (KeyError, ValueError):
        return None


@dataclasses.dataclass(frozen=True, order=True)
class Finding:
    """One device in a state a guest must never see."""
    kind: str
    device: str         # PCI address or mdev UUID
    card: str           # the sidecar's device holding it, or ''
    guests: tuple       # the domains (:class:`domains.Guest`) at fault
    holders: tuple = ()  # servers holding a Bound ARQ for it here

    def text(self):
        guests = ', '.join(str(g) for g in self.guests)
        holders = ', '.join(self.holders) or 'none'
        card = (' (device %s)' % self.card
                if self.card and self.card != self.device else '')
        if self.kind == SHARED:
            return ('%s%s is in the definitions of %d domains: %s; servers '
                    'with an ARQ bound to it: %s' % (
                        self.device, card, len(self.guests), guests,
                        holders))
        return ('%s%s is in the definition of %s, whose server holds no '
                'ARQ for it; servers with an ARQ bound to it: %s' % (
                    self.device, card, guests, holders))

    def to_dict(self):
        return {'kind': self.kind, 'device': self.device, 'card': self.card,
                'domains': [{'name': g.name, 'server': g.uuid}
                            for g in self.guests],
                'holders': list(self.holders), 'text': self.text()}


class GuestWatch:
    """Check every cycle that each device is in one guest, its server's.

    :param domains: a :class:`sidecar.discovery.domains.DomainInspector`.
    :param arqs_of: ``arqs_of(instance uuid)``: the ARQs of that instance
        (:meth:`sidecar.program.cyborg.AcceleratorClient.arqs_of`).
    :param state_path: directory of :data:`FILE`, or None.
    """

    def __init__(self, host, sysfs_root, domains, arqs_of,
                 state_path=None):
        self.host = host
        self.sysfs_root = sysfs_root
        self._domains = domains
        self._arqs_of = arqs_of
        self._file, data = state_cache.open_in(state_path, FILE)
        total = (data or {}).get('findings_total')
        self.findings_total = total if isinstance(total, int) else 0
        self._findings = ()

    def findings(self):
        """The findings of the last check."""
        return self._findings

    def counters(self):
        return {SHARED: sum(f.kind == SHARED for f in self._findings),
                NO_ARQ: sum(f.kind == NO_ARQ for f in self._findings),
                'findings_total': self.findings_total}

    def users(self):
        """``{pci address or mdev uuid: (Guest, ...)}`` now."""
        return self._domains.users()

    def mdev_parent(self, mdev):
        """The PCI address of an mdev's parent, or None (not in sysfs)."""
        path = os.path.join(self.sysfs_root, 'bus', 'mdev', 'devices', mdev)
        if not os.path.lexists(path):
            return None
        return os.path.basename(os.path.dirname(os.path.realpath(path)))

    def cards(self, devices, users):
        """``{pci address or mdev uuid used by a domain: the sidecar's
        device holding it}``."""
        owner = {}
        for device in devices:
            for function in device.functions():
                owner[function] = device.address
        result = {}
        for key in users:
            card = owner.get(key)
            if card is None and ':' not in key:
                card = owner.get(self.mdev_parent(key))
            if card is not None:
                result[key] = card
        return result

    def _holders(self, servers):
        """``{device: {server}}`` of the ARQs the servers hold, Bound to
        this host."""
        held = {}
        for server in sorted(servers):
            for owner in (server, alias(server)):
                for arq in self._arqs_of(owner):
                    if (arq.get('state') != 'Bound' or
                            arq.get('instance_uuid') != owner or
                            arq.get('hostname') != self.host):
                        continue
                    key = arq_device(arq)
                    if key:
                        held.setdefault(key, set()).add(server)
        return held

    def _look(self, devices):
        users = self._domains.users()
        cards = self.cards(devices, users)
        servers = {g.uuid for key in cards for g in users[key]}
        held = self._holders(servers) if servers else {}
        found = set()
        for key, guests in users.items():
            holders = tuple(sorted(held.get(key, ())))
            if len({g.uuid for g in guests}) > 1:
                found.add(Finding(SHARED, key, cards.get(key, ''), guests,
                                  holders))
            if key in cards:
                stray = tuple(g for g in guests if g.uuid not in holders)
                if stray:
                    found.add(Finding(NO_ARQ, key, cards[key], stray,
                                      holders))
        return found

    def check(self, devices):
        """Look now (``devices``: what this sidecar reports); log what
        appeared and what ended, update :data:`FILE`. Returns the
        findings."""
        found = self._look(devices)
        if found:
            # Seen twice in a row, or an attach or detach in flight.
            again = self._look(devices)
            found = {f for f in found if f in again}
        found = tuple(sorted(found))
        before = set(self._findings)
        for finding in found:
            if finding not in before:
                self.findings_total += 1
                LOG.error('One device, one guest: %s', finding.text())
        for finding in before - set(found):
            LOG.warning('One device, one guest: resolved: %s',
                        finding.text())
        changed = set(found) != before
        self._findings = found
        if changed or (self._file is not None and
                       not os.path.exists(self._file.path)):
            self._save()
        return found

    def _save(self):
        if self._file is None:
            return
        data = self.counters()
        data['findings'] = [f.to_dict() for f in self._findings]
        self._file.save(data)
