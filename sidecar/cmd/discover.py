"""``nova-cyborg-sidecar-manage discover``: what this host would report.

Runs the discovery drivers the daemon would build from the same
configuration (``[sidecar] enabled_drivers``, ``discovery_source``,
``sysfs_root``, ``[pci]``, ``[gpu]``, ``[fpga]``), once, without the
daemon: it writes nothing (no sysfs write, no file under ``state_path``)
and calls no service. For every PCI function under
``<sysfs_root>/bus/pci/devices`` that no reported device stands for, it
says why: the drivers' own log lines naming the function (captured from
the ``sidecar`` loggers at DEBUG while they run), or, when none names it,
what the function is and that no enabled driver claims it.

:func:`discover` returns plain data; :mod:`sidecar.cmd.manage` prints it
as a table or as JSON.
"""

import contextlib
import logging
import os
import re

from sidecar.daemon import factory
from sidecar.discovery import inventory as inventory_mod
from sidecar.report import reporter
from sidecar.sources import base as sources
from sidecar.sources import libvirt as libvirt_source
from sidecar.sources import sysfs

ADDRESS = re.compile(r'\b[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\b')
#: PCI base class (and a few sub classes) -> what a deployer calls it
#: (PCI Code and ID Assignment Specification).
CLASS_NAMES = (('0604', 'a PCI bridge'), ('0600', 'a host bridge'),
               ('0601', 'an ISA bridge'), ('0c03', 'a USB controller'),
               ('0b40', 'a co-processor'), ('01', 'a storage controller'),
               ('02', 'a network controller'), ('03', 'a display controller'),
               ('0403', 'an audio device'), ('04', 'a multimedia controller'),
               ('06', 'a bridge'), ('08', 'a system peripheral'),
               ('12', 'a processing accelerator'))


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@contextlib.contextmanager
def captured_logs(name='sidecar'):
    """Collect every record of the ``name`` loggers (DEBUG and up) while
    the block runs, instead of emitting them; yields the list."""
    logger = logging.getLogger(name)
    handler = _Records()
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def build_source(conf):
    """The daemon's PCI source (:func:`sidecar.daemon.factory.build`)."""
    if conf.sidecar.discovery_source == 'libvirt':
        connect = factory.libvirt_connector(conf.sidecar.libvirt_uri)
        return libvirt_source.LibvirtSource(
            connect(), sysfs_root=conf.sidecar.sysfs_root)
    return sysfs.SysfsSource(conf.sidecar.sysfs_root)


def _message(record):
    try:
        return record.getMessage()
    except (TypeError, ValueError):
        return str(record.msg)


#: Attach handle fields shown where set (what Nova writes into the domain
#: and its ports read from the attach_info).
_HANDLE_FIELDS = ('mdev_type', 'managed', 'physical_network')


def _handles(deployable):
    """Attach handles grouped: ``{type, address, count}`` and those of
    :data:`_HANDLE_FIELDS` the handles have."""
    groups = {}
    for handle in deployable.attach_handles:
        key = (handle.attach_type, handle.address) + tuple(
            getattr(handle, name) for name in _HANDLE_FIELDS)
        groups[key] = groups.get(key, 0) + 1
    result = []
    for (kind, address, *fields), count in groups.items():
        entry = {'type': kind, 'address': address, 'count': count}
        entry.update((name, value) for name, value in
                     zip(_HANDLE_FIELDS, fields) if value)
        result.append(entry)
    return result


def _health(driver, device):
    try:
        seen = driver.health(device)
    except Exception as exc:  # a driver's bug must not hide the others
        return {'state': 'unknown', 'problems': ['health check failed: %s'
                                                 % exc]}
    state = 'healthy'
    # A deployable's own problem (a DFL port's) holds that provider only.
    problems = list(seen.problems) + ['%s: %s' % (name, problem) for
                                      name, problem in seen.scoped]
    if problems:
        state = 'unhealthy'
    elif seen.busy:
        state = 'busy'
    result = {'state': state, 'problems': problems}
    fatal = {address: count for address, count in seen.fatal if count}
    if fatal:
        # The daemon holds the device when a count rises above the one it
        # first saw; a count alone is shown, not judged.
        result['aer_fatal'] = fatal
    return result


def _device(conf, drivers, device):
    driver = next((d for d in drivers if d.claims(device.address)), None)
    return {
        'address': device.address, 'type': device.type,
        'vendor': device.vendor, 'model': device.model,
        'driver': driver.name if driver else '',
        'health': _health(driver, device) if driver else
        {'state': 'unknown', 'problems': []},
        'deployables': [{
            'name': dep.name,
            'provider': reporter.deployable_name(conf.host, dep),
            'resource_class': dep.resource_class,
            'amount': dep.num_accelerators,
            'traits': list(dep.traits),
            'attach_handles': _handles(dep)} for dep in device.deployables]}


def describe(sysfs_root, address):
    """What a PCI function is, read from its sysfs directory."""
    path = os.path.join(sysfs_root, 'bus', 'pci', 'devices', address)

    def attr(name):
        value = sources.read_file(os.path.join(path, name)) or ''
        return value[2:] if value.lower().startswith('0x') else value
    driver = _link_name(os.path.join(path, 'driver'))
    class_id = attr('class').lower()
    kind = next((text for prefix, text in CLASS_NAMES
                 if class_id.startswith(prefix)), 'a PCI function')
    physfn = _link_name(os.path.join(path, 'physfn'))
    if physfn:
        kind += ', a VF of %s' % physfn
    return {'vendor_id': attr('vendor').lower(),
            'product_id': attr('device').lower(), 'class_id': class_id,
            'bound_driver': driver, 'kind': kind}


def _link_name(path):
    try:
        return os.path.basename(os.readlink(path).rstrip('/'))
    except OSError:
        return ''


def _pci_addresses(sysfs_root):
    try:
        names = os.listdir(os.path.join(sysfs_root, 'bus', 'pci', 'devices'))
    except OSError:
        return []
    return sorted(names)


def discover(conf):
    """Run discovery once, read-only; return what it found as plain data:

    ``{'host', 'drivers', 'devices': [...], 'not_reported': [...],
    'notes': [...]}``; ``not_reported`` has one entry per PCI function no
    reported device stands for, with ``reasons`` (the drivers' log lines
    naming it, most severe first) or, without any, what it is.
    """
    with captured_logs() as records:
        source = build_source(conf)
        drivers = inventory_mod.load_drivers(conf, source, read_only=True)
        devices = inventory_mod.Inventory(drivers).discover()
        found = [_device(conf, drivers, device) for device in
                 sorted(devices, key=lambda d: d.address)]
    reported = set().union(*(d.functions() for d in devices))
    # A function a reported device names in its board info (an Alveo
    # card's management PF): part of that card, never offered itself.
    named_by = {value: (device.address, key) for device in devices
                for key, value in device.std_board_info
                if value not in reported}
    lines = []
    for record in records:
        text = _message(record)
        lines.append((record.levelno, text, set(ADDRESS.findall(text))))
    lines.sort(key=lambda line: -line[0])  # stable: most severe first
    root = conf.sidecar.sysfs_root
    skipped = []
    for address in _pci_addresses(root):
        if address in reported:
            continue
        what = describe(root, address)
        reasons = []
        for level, text, named in lines:
            if address in named and text not in reasons:
                reasons.append(text)
        if not reasons and address in named_by:
            reasons.append('part of reported device %s (its board info '
                           'names it as %s); not offered itself'
                           % named_by[address])
        if not reasons:
            reasons.append(
                'no enabled driver claims it: %s, vendor %s device %s class '
                '%s, bound to %s' % (what['kind'], what['vendor_id'],
                                     what['product_id'], what['class_id'],
                                     what['bound_driver'] or 'no driver'))
        what.update(address=address, reasons=reasons)
        skipped.append(what)
    # Warnings no row above shows: about the configuration, or about a
    # device that is reported all the same (two drivers claiming it).
    shown = {s['address'] for s in skipped}
    notes = []
    for level, text, named in lines:
        if (level >= logging.WARNING and not named & shown and
                text not in notes):
            notes.append(text)
    return {'host': conf.host, 'sysfs_root': root,
            'drivers': [d.name for d in drivers], 'devices': found,
            'not_reported': skipped, 'notes': notes}
