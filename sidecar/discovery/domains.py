"""Which devices the domains on this host use, asked of libvirt."""

import dataclasses
from xml.etree import ElementTree

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

# VIR_CONNECT_LIST_DOMAINS_ACTIVE | VIR_CONNECT_LIST_DOMAINS_INACTIVE: every
# defined domain. (0 means the same to libvirt, but not to every
# implementation of its API, Nova's fakelibvirt among them.)
ALL_DOMAINS = 1 | 2
#: VIR_DOMAIN_XML_INACTIVE: a running domain's saved definition (what its
#: next start gets), where XMLDesc(0) gives its live one.
XML_INACTIVE = 2


def _number(value):
    """A PCI address attribute as libvirt reads it
    (``virPCIDeviceAddressParseXML``: ``strtoul`` with base 0): ``0x``
    hex, a leading ``0`` octal, anything else decimal."""
    text = value.strip()
    if text[:2].lower() == '0x':
        return int(text[2:], 16)
    if len(text) > 1 and text.startswith('0'):
        return int(text[1:], 8)
    return int(text, 10)


def _pci_address(address):
    try:
        return '%04x:%02x:%02x.%x' % (
            _number(address.get('domain')), _number(address.get('bus')),
            _number(address.get('slot')), _number(address.get('function')))
    except (AttributeError, TypeError, ValueError):
        return None


def devices_in_xml(xml):
    """PCI addresses and mdev UUIDs of a domain XML's ``<hostdev>``."""
    pci, mdevs = set(), set()
    root = ElementTree.fromstring(xml)
    for hostdev in root.iterfind('./devices/hostdev'):
        address = hostdev.find('./source/address')
        if address is None:
            continue
        if hostdev.get('type') == 'pci':
            bdf = _pci_address(address)
            if bdf:
                pci.add(bdf)
        elif hostdev.get('type') == 'mdev' and address.get('uuid'):
            mdevs.add(address.get('uuid').lower())
    return pci, mdevs


@dataclasses.dataclass(frozen=True, order=True)
class Guest:
    """A libvirt domain: Nova names it ``instance-XXXXXXXX`` and gives it
    its server's UUID. ``active``: running (or paused), False when only
    defined, None when not known; not part of its identity."""
    name: str
    uuid: str
    active: bool = dataclasses.field(default=None, compare=False)

    def __str__(self):
        state = {True: ', running', False: ', shut off'}.get(self.active, '')
        return '%s (server %s%s)' % (self.name, self.uuid, state)


class DomainInspector:
    """Ask libvirt which PCI functions and mdevs defined domains use.

    ``connect`` returns a libvirt connection (read-only is enough). Every
    defined domain counts, running or not: a stopped server still owns its
    device.
    """

    def __init__(self, connect):
        self._connect = connect

    def users(self):
        """Return ``{pci address or mdev uuid: (Guest, ...)}``: every
        domain whose definition (running or not; for a running one, its
        live or its saved definition) holds the device."""
        users = {}
        conn = self._connect()
        for domain in conn.listAllDomains(ALL_DOMAINS):
            active = bool(domain.isActive())
            pci, mdevs = devices_in_xml(domain.XMLDesc(0))
            if active:
                # A running guest holds what its live definition has, and
                # gets what its saved one has at its next start (a device
                # hot-plugged to the definition only, or one a live
                # detach still waits for the guest to release).
                saved_pci, saved_mdevs = devices_in_xml(
                    domain.XMLDesc(XML_INACTIVE))
                pci, mdevs = pci | saved_pci, mdevs | saved_mdevs
            guest = Guest(domain.name(), domain.UUIDString().lower(),
                          active)
            for device in pci | mdevs:
                users.setdefault(device, set()).add(guest)
        return {device: tuple(sorted(guests))
                for device, guests in users.items()}

    def devices_in_use(self):
        """Return ``{pci address or mdev uuid: domain name}`` (one of them
        where several domains hold the device)."""
        return {device: guests[0].name
                for device, guests in self.users().items()}

    def devices_running(self):
        """:meth:`devices_in_use` of the domains that run (or are paused,
        or whose state is not known): those whose guest holds the device
        open."""
        running = {}
        for device, guests in self.users().items():
            names = [g.name for g in guests if g.active is not False]
            if names:
                running[device] = names[0]
        return running
