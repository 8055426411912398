"""The PCI functions and mediated devices a libvirt domain XML passes
through, and edits of that list. Pure data: no libvirt, no service.

A device is named by its key: ``('pci', (domain, bus, slot, function))``
with integers, read from the XML as libvirt reads them (``0x`` hex, a
leading ``0`` octal, else decimal), or
``('mdev', '<uuid>')`` in lower case. Only ``<hostdev>`` elements directly
under ``<devices>`` count: an ``<interface type='hostdev'>`` is Nova's
own SR-IOV port, described by its network info, never an accelerator.
"""

from lxml import etree

from nova_cyborg.i18n import _

PCI = 'pci'
MDEV = 'mdev'


class UnreadableDomain(ValueError):
    """The domain XML (or one of its hostdevs) cannot be read."""


def _uint(address, name):
    """An address attribute as libvirt reads it (``virXMLPropUInt`` with
    base 0, as ``virPCIDeviceAddressParseXML`` asks: ``strtoul``'s rules):
    ``0x`` hex, a leading ``0`` octal, else decimal. libvirt writes
    ``0x`` hex; what it would read otherwise is read the same here."""
    text = address.get(name)
    try:
        text = text.strip()
        if text[:2].lower() == '0x':
            return int(text[2:], 16)
        if len(text) > 1 and text.startswith('0'):
            return int(text[1:], 8)
        return int(text, 10)
    except (AttributeError, TypeError, ValueError):
        raise UnreadableDomain(_('hostdev address %(name)s is %(value)r')
                               % {'name': name, 'value': text})


def key_of(hostdev):
    """The key of a ``<hostdev>`` element, or None for a kind this product
    does not give (USB, SCSI, ...)."""
    kind = hostdev.get('type')
    address = hostdev.find('./source/address')
    if kind == PCI:
        if address is None:
            raise UnreadableDomain(_('PCI hostdev without an address'))
        return PCI, tuple(_uint(address, part) for part in
                          ('domain', 'bus', 'slot', 'function'))
    if kind == MDEV:
        uuid = address.get('uuid') if address is not None else None
        if not uuid:
            raise UnreadableDomain(_('mdev hostdev without a UUID'))
        return MDEV, uuid.lower()
    return None


def pci_key(domain, bus, slot, function):
    """The key of a PCI function given as integers or hex strings."""
    parts = (domain, bus, slot, function)
    return PCI, tuple(part if isinstance(part, int) else int(part, 16)
                      for part in parts)


def key_of_address(address):
    """The key of a PCI address as Linux writes it (``0000:81:00.1``)."""
    try:
        domain, bus, rest = address.split(':')
        slot, function = rest.split('.')
        return pci_key(domain, bus, slot, function)
    except (AttributeError, ValueError):
        raise UnreadableDomain(_('PCI address %r') % (address,))


def describe(key):
    """A device key as an operator reads it: ``0000:81:01.1`` or
    ``mdev 6f1c...``."""
    kind, value = key
    if kind == PCI:
        return '%04x:%02x:%02x.%x' % value
    return 'mdev %s' % value


def parse(xml):
    """The root element of a domain XML string.

    :raises: UnreadableDomain
    """
    try:
        root = etree.fromstring(xml)
    except (etree.XMLSyntaxError, ValueError) as e:
        raise UnreadableDomain(str(e))
    if root.tag != 'domain':
        raise UnreadableDomain(_('root element is <%s>') % root.tag)
    return root


def hostdevs(root):
    """{key: element} of the domain's PCI and mdev hostdevs."""
    found = {}
    for hostdev in root.findall('./devices/hostdev'):
        key = key_of(hostdev)
        if key is not None:
            found[key] = hostdev
    return found


def interface_keys(root):
    """Keys of the PCI functions the domain's ``<interface
    type='hostdev'>`` elements pass through (Neutron ports: SR-IOV VFs and
    ports with a device profile, whose ARQ Nova gives the guest as the
    port's interface). An interface written without its address is
    skipped."""
    found = set()
    for interface in root.findall("./devices/interface[@type='hostdev']"):
        address = interface.find('./source/address')
        if address is None or address.get('type', PCI) != PCI:
            continue
        found.add((PCI, tuple(_uint(address, part) for part in
                              ('domain', 'bus', 'slot', 'function'))))
    return found


def keys_in(xml):
    """The device keys a domain XML string passes through (a cheap test
    first: most domains have no hostdev at all)."""
    if '<hostdev' not in xml:
        return set()
    return set(hostdevs(parse(xml)))


def remove(root, keys):
    """Remove the hostdevs of ``keys`` from the domain element."""
    for key, element in hostdevs(root).items():
        if key in keys:
            element.getparent().remove(element)


def add(root, elements):
    """Append hostdev elements (lxml) to the domain's ``<devices>``."""
    devices = root.find('./devices')
    if devices is None:
        devices = etree.SubElement(root, 'devices')
    for element in elements:
        devices.append(element)


def to_string(root):
    return etree.tostring(root, encoding='unicode')
