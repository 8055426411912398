"""``nova-cyborg-sidecar-manage capture``: the sysfs the sidecar reads, as
an archive to attach to a bug report.

Read-only: the host is only read (no link is followed out of the sysfs
root, no sysfs file is written) and the one file written is the archive,
refused if it exists. The archive (tar.gz) holds ``sysfs/<path>`` for
each path captured, relative to ``[sidecar] sysfs_root``, symlinks kept as
symlinks, and ``MANIFEST.json`` (what was scrubbed and skipped).
:mod:`sidecar_simulator.capture` loads it as a sysfs root for a test.

Captured: the links of ``bus/pci/devices``, ``bus/mdev/devices``,
``bus/platform/devices/dfl-*``, ``class/{fpga_region,fpga_manager,
fpga_bridge,mdev_bus}`` and ``kernel/iommu_groups``; for each PCI function
its attributes and links, and its subdirectories the sidecar reads
(:data:`DESCEND`, mdevs), whole. Never read: :data:`NEVER_READ` (BARs,
option ROM: large, binary, of no use to discovery; actions); of
``config`` only its first :data:`CONFIG_HEADER` bytes.
Scrubbed (written with :data:`PLACEHOLDER` instead of the host's value,
without reading it): see :func:`scrubbed`.
"""

import itertools
import os
import posixpath
import re
import stat

from sidecar.cmd import archive as archive_mod

DEFAULT_OUTPUT = 'nova-cyborg-sysfs.tar.gz'
PREFIX = 'sysfs'
MANIFEST = archive_mod.MANIFEST
PLACEHOLDER = b'SCRUBBED\n'
MAC_PLACEHOLDER = b'00:00:00:00:00:00\n'
#: Bounds: one file, all files, entries, depth below a PCI function.
MAX_FILE = 64 * 1024
MAX_TOTAL = 32 * 1024 * 1024
MAX_ENTRIES = 200000
MAX_DEPTH = 10

#: Subdirectories of a PCI function captured whole.
DESCEND = frozenset(('fpga_region', 'fpga_manager', 'fpga_bridge',
                     'mdev_supported_types', 'nvidia', 'qat', 'net',
                     'hwmon', 'sriov'))
#: Never descended into below a PCI function (large or irrelevant).
SKIP_DIRS = frozenset(('power', 'statistics', 'queues', 'msi_irqs',
                       'subsystem', 'firmware_node'))
#: Of ``config`` only the standard header (vendor id, device id, command,
#: status, class ...: PCI Local Bus Specification, "Configuration Space
#: Header"), which the health checks read; the extended space holds the
#: Device Serial Number.
CONFIG_HEADER = 64
NEVER_READ = re.compile(r'^(rom|resource[0-9]*(_wc)?|'
                        r'reset|remove|rescan|new_id|remove_id|bind|'
                        r'unbind)$')
_UUID = re.compile(r'^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$')
_BDF = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
_SERIAL = frozenset(('dsn', 'vpd', 'phys_port_id',
                     'phys_switch_id', 'board_serial', 'product_serial'))
CLASSES = ('fpga_region', 'fpga_manager', 'fpga_bridge', 'mdev_bus')


class CaptureError(ValueError):
    """The capture cannot be written (the message says why)."""


def scrubbed(relpath):
    """The placeholder ``relpath``'s value is replaced by, or None.

    Serial numbers and identifiers of the card or the host: files named
    ``*serial*`` or ``*mac_addr*`` anywhere, ``dsn``, ``vpd``,
    ``phys_port_id``, ``phys_switch_id``; and under a ``net/`` directory
    ``perm_addr`` and every file whose name has ``address`` (MAC
    addresses).
    """
    parts = relpath.split('/')
    name = parts[-1]
    if 'mac_addr' in name or ('net' in parts[:-1] and (
            'address' in name or name == 'perm_addr')):
        return MAC_PLACEHOLDER
    if 'serial' in name or name in _SERIAL:
        return PLACEHOLDER
    return None


def link_problem(relpath, target):
    """Why the link ``relpath`` -> ``target`` (both relative to the
    root) cannot be in a capture, or None.

    Its target is relative, its ``..`` are all leading (as sysfs writes
    them: a ``..`` after a name would climb from where a link there
    leads, not from its name), and they do not climb above the root.
    """
    if not target or target.startswith('/') or '\0' in target:
        return 'absolute or empty target %r' % target
    parts = target.split('/')
    ups = len(parts) - len(list(itertools.dropwhile(
        lambda part: part == '..', parts)))
    if '..' in parts[ups:]:
        return 'target %r has ".." after a name' % target
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(relpath),
                                                 target))
    if resolved == '..' or resolved.startswith('../'):
        return 'target %r leaves the sysfs root' % target
    return None


class _Archive:
    """What is captured, in memory (bounded), before it is written."""

    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.entries = {}  # relpath: ('file', bytes) | ('link', target)
        self.total = 0
        self.skipped = []  # {'path', 'reason'}
        self.scrubbed = []
        self._walked = set()  # (directory, device)

    def _inside(self, path):
        return path == self.root or path.startswith(self.root + os.sep)

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def _skip(self, relpath, reason):
        self.skipped.append({'path': relpath, 'reason': reason})

    def _full(self, relpath):
        if len(self.entries) >= MAX_ENTRIES:
            self._skip(relpath, 'more than %d entries captured' % MAX_ENTRIES)
            return True
        return False

    def link(self, path):
        relpath = self.rel(path)
        if relpath in self.entries or self._full(relpath):
            return
        try:
            target = os.readlink(path)
        except OSError as exc:
            return self._skip(relpath, 'unreadable link: %s' % exc)
        if os.path.isabs(target):
            if not self._inside(os.path.normpath(target)):
                return self._skip(relpath, 'link leaves the sysfs root')
            target = os.path.relpath(target, os.path.dirname(path))
        why = link_problem(relpath, target)
        if why:
            return self._skip(relpath, why)
        self.entries[relpath] = ('link', target)

    def file(self, path, st):
        relpath = self.rel(path)
        if relpath in self.entries or self._full(relpath):
            return
        name = os.path.basename(path)
        placeholder = scrubbed(relpath)
        if placeholder is not None:
            self.scrubbed.append(relpath)
            data = placeholder
        elif not st.st_mode & 0o444:
            data = b''  # write-only (remove, create): its presence counts
        elif NEVER_READ.match(name):
            return self._skip(relpath, 'not captured (BARs, option ROM or '
                              'an action file)')
        else:
            size = CONFIG_HEADER if name == 'config' else MAX_FILE + 1
            try:
                with open(path, 'rb') as f:
                    data = f.read(size)
            except OSError as exc:
                return self._skip(relpath, 'unreadable: %s' % exc)
            if len(data) > MAX_FILE:
                return self._skip(relpath, 'larger than %d bytes' % MAX_FILE)
        if self.total + len(data) > MAX_TOTAL:
            return self._skip(relpath, 'capture larger than %d bytes'
                              % MAX_TOTAL)
        self.total += len(data)
        self.entries[relpath] = ('file', data)

    def tree(self, path, depth=0, device=False):
        """Capture ``path`` (a real directory inside the root): its files
        and links; below a PCI function only :data:`DESCEND` and mdevs."""
        if (path, device) in self._walked:
            return  # a class link leads where a PCI function's walk went
        self._walked.add((path, device))
        if depth > MAX_DEPTH:
            return self._skip(self.rel(path), 'deeper than %d' % MAX_DEPTH)
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            return self._skip(self.rel(path), 'unreadable: %s' % exc)
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                self._skip(self.rel(entry.path), 'unreadable: %s' % exc)
                continue
            if stat.S_ISLNK(st.st_mode):
                self.link(entry.path)
            elif stat.S_ISREG(st.st_mode):
                self.file(entry.path, st)
            elif stat.S_ISDIR(st.st_mode):
                if entry.name in SKIP_DIRS or _BDF.match(entry.name):
                    continue  # a child PCI function is captured on its own
                if device and not (entry.name in DESCEND or
                                   _UUID.match(entry.name)):
                    continue
                self.tree(entry.path, depth + 1)

    def links_of(self, relpath, pattern=None):
        """Capture the links in ``relpath``; return the real directories
        inside the root they lead to."""
        directory = os.path.join(self.root, relpath)
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return []
        targets = []
        for name in names:
            if pattern and not name.startswith(pattern):
                continue
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                continue
            self.link(path)
            real = os.path.realpath(path)
            if self._inside(real) and os.path.isdir(real):
                targets.append(real)
        return targets


def collect(root):
    """Read what the sidecar reads under ``root``: an :class:`_Archive`."""
    archive = _Archive(root)
    if not os.path.isdir(os.path.join(archive.root, 'bus', 'pci',
                                      'devices')):
        raise CaptureError('%s has no bus/pci/devices: is [sidecar] '
                           'sysfs_root a sysfs tree?' % root)
    for real in archive.links_of('bus/pci/devices'):
        archive.tree(real, device=True)
    for name in CLASSES:
        for real in archive.links_of(os.path.join('class', name)):
            # Usually under a PCI function, read already: not again.
            archive.tree(real, device=bool(_BDF.match(
                os.path.basename(real))))
    archive.links_of('bus/mdev/devices')
    archive.links_of('bus/platform/devices', pattern='dfl-')
    groups = os.path.join(archive.root, 'kernel', 'iommu_groups')
    if os.path.isdir(groups):
        archive.tree(groups)
    return archive


def write(archive, output):
    """Write ``archive`` to the new file ``output``; return its
    manifest."""
    manifest = {'format': 1, 'files': sum(
        1 for kind, _ in archive.entries.values() if kind == 'file'),
        'links': sum(1 for kind, _ in archive.entries.values()
                     if kind == 'link'),
        'bytes': archive.total, 'scrubbed': sorted(archive.scrubbed),
        'skipped': archive.skipped}
    try:
        archive_mod.write(output, archive.entries, manifest, PREFIX)
    except FileExistsError:
        raise CaptureError('%s exists: choose another --output' % output)
    return manifest


def capture(conf, output):
    """Capture ``[sidecar] sysfs_root`` into ``output``; a summary line."""
    archive = collect(conf.sidecar.sysfs_root)
    manifest = write(archive, output)
    return ('Wrote %s: %d files, %d links, %d bytes of %s; %d scrubbed '
            '(serial numbers, MAC addresses), %d skipped (listed in its '
            '%s)' % (output, manifest['files'], manifest['links'],
                     manifest['bytes'], conf.sidecar.sysfs_root,
                     len(manifest['scrubbed']), len(manifest['skipped']),
                     MANIFEST))
