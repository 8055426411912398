"""The devices Nova manages itself, read from nova-compute's configuration.

A device offered both by Nova (PCI passthrough, ``[pci] device_spec``, or
vGPUs, ``[devices] enabled_mdev_types``) and by Cyborg would be handed to
two servers. The sidecar reads ``[sidecar] nova_config_file`` (by default
``/etc/nova/nova.conf``) every discovery cycle it changed, and its drivers
refuse, with a WARNING naming the device and the Nova option, any device
one of whose functions Nova also manages.

Matching follows ``nova.pci.devspec`` without importing Nova: ``vendor_id``
and ``product_id`` (hex or ``*``) against the function; ``address`` as a
glob string (``[[[domain]:]bus]:][slot][.[function]]``) or a dict of
regular expressions, against the function and, for a single full address
(a PF), against a VF's PF; ``devname`` through ``class/net/<devname>``.
Nova's ``[pci] alias`` entries only name what flavors may ask for; they
are read to say so in the warning. For mdevs, a GPU offering a type of
``[devices] enabled_mdev_types`` (or the older ``enabled_vgpu_types``) is
Nova's unless ``[mdev_<type>] device_addresses`` (``[vgpu_<type>]``)
lists other GPUs.
"""

import dataclasses
import fnmatch
import json
import os
import re

from oslo_config import cfg
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

SPEC_OPTIONS = ('device_spec', 'passthrough_whitelist')
MDEV_OPTIONS = ('enabled_mdev_types', 'enabled_vgpu_types')
_FULL = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')


def _hex(value, width):
    value = str(value).strip().lower()
    if value in ('', '*'):
        return '*'
    try:
        return '%0*x' % (width, int(value.replace('0x', ''), 16))
    except ValueError:
        return value  # never matches a real id: refuses nothing


def _glob_fields(text):
    """Nova's glob address: ``(domain, bus, slot, function)``, ``*`` for
    what is left out."""
    dbs, _sep, func = text.partition('.')
    fields = dbs.split(':') if dbs else []
    fields = ['*'] * (3 - len(fields)) + fields[-3:]
    widths = (4, 2, 2, 1)
    return tuple(_hex(value or '*', width) if value.strip() != '*' else '*'
                 for value, width in zip(fields + [func or '*'], widths))


@dataclasses.dataclass(frozen=True)
class NovaSpec:
    """One Nova ``[pci] device_spec`` entry."""
    text: str
    vendor_id: str = '*'
    product_id: str = '*'
    glob: tuple = None       # (domain, bus, slot, function)
    regex: tuple = None      # compiled (domain, bus, slot, function)
    devname: str = None

    @classmethod
    def parse(cls, text):
        """The entries of one option value; malformed ones are skipped
        with a warning (nova-compute refuses them anyway)."""
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            LOG.warning('Nova [pci] device_spec %r is not JSON (%s); it is '
                        'ignored', text, exc)
            return []
        result = []
        for entry in loaded if isinstance(loaded, list) else [loaded]:
            if not isinstance(entry, dict):
                continue
            address = entry.get('address')
            glob = regex = None
            try:
                if isinstance(address, dict):
                    regex = tuple(re.compile(str(address.get(key, '.*')))
                                  for key in ('domain', 'bus', 'slot',
                                              'function'))
                else:
                    glob = _glob_fields(str(address or '*:*:*.*').lower())
            except re.error:
                LOG.warning('Nova [pci] device_spec %r has a bad address; '
                            'it is ignored', text)
                continue
            result.append(cls(
                text=json.dumps(entry, sort_keys=True),
                vendor_id=_hex(entry.get('vendor_id', '*'), 4),
                product_id=_hex(entry.get('product_id', '*'), 4),
                glob=glob, regex=regex, devname=entry.get('devname')))
        return result

    def _address_matches(self, address):
        parts = address.replace('.', ':').split(':')
        if self.regex is not None:
            return all(r.match(p) for r, p in zip(self.regex, parts))
        return all(g == '*' or fnmatch.fnmatchcase(p, g)
                   for g, p in zip(self.glob, parts))

    def _single(self):
        return self.glob is not None and '*' not in self.glob

    def matches(self, function, sysfs_root):
        if self.vendor_id not in ('*', function.vendor_id):
            return False
        if self.product_id not in ('*', function.product_id):
            return False
        if self.devname:
            address = netdev_address(sysfs_root, self.devname)
            return address in (function.address, function.physfn)
        if self._single() and function.physfn and self._address_matches(
                function.physfn):
            return True
        return self._address_matches(function.address)


def netdev_address(sysfs_root, devname):
    """The PCI function of network interface ``devname``, or None."""
    link = os.path.join(sysfs_root, 'class', 'net', os.path.basename(
        devname), 'device')
    if not os.path.lexists(link):
        return None
    address = os.path.basename(os.path.realpath(link))
    return address if _FULL.match(address) else None


@dataclasses.dataclass(frozen=True)
class NovaDevices:
    """What one nova.conf makes Nova manage."""
    path: str
    specs: tuple = ()
    aliases: tuple = ()        # (name, vendor_id, product_id)
    mdev_types: tuple = ()     # (type id, addresses or None: every GPU)

    def managed(self, function, sysfs_root):
        """Why Nova manages ``function`` (a phrase), or None."""
        for spec in self.specs:
            if spec.matches(function, sysfs_root):
                why = '[pci] device_spec %s' % spec.text
                names = [name for name, vendor, product in self.aliases
                         if vendor in ('*', function.vendor_id) and
                         product in ('*', function.product_id)]
                if names:
                    why += ' (flavors ask for it by [pci] alias %s)' % (
                        ', '.join(sorted(names)))
                return why
        for type_id, addresses in self.mdev_types:
            if function.mdev_type(type_id) is None:
                continue
            if addresses is None or function.address in addresses:
                return '[devices] enabled_mdev_types %s' % type_id
        return None


def _values(sections, group, key):
    return [v for v in sections.get(group, {}).get(key, []) if v.strip()]


def parse(path):
    """The :class:`NovaDevices` of the nova.conf at ``path``; None when
    there is no such file."""
    if not os.path.exists(path):
        return None
    sections = {}
    cfg.ConfigParser(path, sections).parse()
    specs = []
    for key in SPEC_OPTIONS:
        for text in _values(sections, 'pci', key):
            specs.extend(NovaSpec.parse(text))
    aliases = []
    for text in _values(sections, 'pci', 'alias'):
        try:
            loaded = json.loads(text)
        except ValueError:
            continue
        for entry in loaded if isinstance(loaded, list) else [loaded]:
            if isinstance(entry, dict) and entry.get('name'):
                aliases.append((str(entry['name']),
                                _hex(entry.get('vendor_id', '*'), 4),
                                _hex(entry.get('product_id', '*'), 4)))
    types = []
    for key in MDEV_OPTIONS:
        for text in _values(sections, 'devices', key):
            for type_id in (t.strip() for t in text.split(',')):
                if not type_id:
                    continue
                addresses = None
                for group in ('mdev_' + type_id, 'vgpu_' + type_id):
                    listed = [a.strip().lower() for v in _values(
                        sections, group, 'device_addresses')
                        for a in v.split(',') if a.strip()]
                    if listed:
                        addresses = frozenset(listed)
                types.append((type_id, addresses))
    return NovaDevices(path, tuple(specs), tuple(aliases), tuple(types))


class NovaConfig:
    """nova.conf, read again when it changes (by mtime and size)."""

    def __init__(self, path):
        self.path = path
        self._stamp = None
        self._devices = None

    def devices(self):
        """The current :class:`NovaDevices`, or None (no file)."""
        if not self.path:
            return None
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._devices = parse(self.path) if stamp else None
            except (OSError, cfg.ParseError) as exc:
                LOG.warning('Cannot read Nova\'s configuration %s (%s): no '
                            'device is refused as Nova\'s until it can be '
                            'read', self.path, exc)
                self._devices = None
            else:
                if self._devices is not None:
                    LOG.info('Read Nova\'s configuration %s: %d '
                             'device_spec entries, mdev types %s', self.path,
                             len(self._devices.specs),
                             [t for t, _a in self._devices.mdev_types])
        return self._devices
