"""What sysfs shows of a PCI device's health beyond its own AER counters.

Read by :func:`sidecar.discovery.health.pci_observation` for every device
(its control path function, the PF):

- **the upstream port**: the PCIe port above the device in the
  ``devices/`` tree (the parent directory of the function's real path).
  AER counts land where an error is seen, often at the link partner
  (Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats): the port's
  ``aer_dev_fatal`` (its ``TOTAL_ERR_FATAL``, and its ``SDES`` line:
  Surprise Down, the link to the device went down, drivers/pci/pcie/aer.c
  ``aer_uncorrectable_error_string``), and on a root port
  ``aer_rootport_total_err_fatal`` (one number);
- **the link**: ``current_link_speed``/``current_link_width`` below what
  the device and its port can both do (``max_link_speed``/``_width``;
  Documentation/ABI/testing/sysfs-bus-pci, drivers/pci/pci-sysfs.c:
  ``"16.0 GT/s PCIe"``, ``"Unknown"`` while the link is down; widths as a
  number). Only a physical function has a link (a VF's link registers
  are reserved);
- **config space**: the vendor id read through ``config`` (not the
  cached ``vendor`` file) is ``0xffff`` when the device no longer answers
  (include/linux/pci.h ``PCI_ERROR_RESPONSE``, ``PCI_POSSIBLE_ERROR``).

A file that is absent is not checked (a kernel or device without it); a
file that is there and cannot be read (``EIO`` from a device in trouble)
is *unreadable*: the health monitor keeps its verdict, and after
``[health] unknown_after`` seconds without a good reading the device is
Unknown.
"""

import os
import re

#: Counter names of the Surprise Down line: the kernel's, then the ABI
#: document's sample.
SURPRISE_DOWN = ('SDES', 'Surprise Down Error')
_BDF = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
_SPEED = re.compile(r'^([0-9]+(?:\.[0-9]+)?) GT/s')
PCI_ERROR_RESPONSE = 0xffff

#: Suffixes of the counter keys this module adds to an observation, and
#: the phrase a rise of each gives (``%(n)d`` new, ``%(port)s``).
PORT_FATAL = 'upstream'
PORT_SURPRISE_DOWN = 'surprise-down'
ROOTPORT_FATAL = 'rootport'
#: A QAT device's own fatal error count (sysfs-driver-qat_ras).
QAT_FATAL = 'qat-ras-fatal'
PHRASES = {
    QAT_FATAL: '%(n)d fatal error(s) counted by QAT device %(port)s '
               '(qat_ras/errors_fatal)',
    PORT_FATAL: '%(n)d fatal PCIe AER error(s) at upstream port %(port)s',
    PORT_SURPRISE_DOWN: 'Surprise Down at upstream port %(port)s '
                        '(%(n)d): the link to the device went down',
    ROOTPORT_FATAL: '%(n)d fatal error message(s) reported to root port '
                    '%(port)s',
}


class Unreadable(Exception):
    """A health file is there and cannot be read."""


def read(path, binary=False, size=None):
    """A file's text (stripped) or bytes; None when it is absent.

    Raises :class:`Unreadable` for any other error.
    """
    try:
        with open(path, 'rb' if binary else 'r') as f:
            data = f.read(size) if size else f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable('%s: %s' % (path, exc))
    return data if binary else data.strip()


def aer_fields(text):
    """``{counter name: count}`` of an AER statistics file (names may
    have spaces: the count is the last word of each line)."""
    counts = {}
    for line in (text or '').splitlines():
        name, _sep, count = line.strip().rpartition(' ')
        if name and count.isdigit():
            counts[name.strip()] = int(count)
    return counts


def upstream_port(sysfs_root, address):
    """``(port address, port directory)`` of the function, or None when
    its parent in the device tree is no PCI function (a root bus)."""
    link = os.path.join(sysfs_root, 'bus', 'pci', 'devices', address)
    parent = os.path.dirname(os.path.realpath(link))
    name = os.path.basename(parent)
    if _BDF.match(name) and os.path.exists(os.path.join(parent, 'vendor')):
        return name, parent
    return None


def port_counters(port, path):
    """``[(key, count)]`` of the upstream port's fatal counters."""
    result = []
    fatal = read(os.path.join(path, 'aer_dev_fatal'))
    if fatal is not None:
        fields = aer_fields(fatal)
        if 'TOTAL_ERR_FATAL' in fields:
            result.append(('%s %s' % (port, PORT_FATAL),
                           fields['TOTAL_ERR_FATAL']))
        for name in SURPRISE_DOWN:
            if name in fields:
                result.append(('%s %s' % (port, PORT_SURPRISE_DOWN),
                               fields[name]))
                break
    total = read(os.path.join(path, 'aer_rootport_total_err_fatal'))
    if total is not None and total.isdigit():
        result.append(('%s %s' % (port, ROOTPORT_FATAL), int(total)))
    return result


def phrase(key, count):
    """What a rise of ``count`` of counter ``key`` means, or None for a
    function's own counter (``key`` is its address)."""
    port, _sep, kind = key.partition(' ')
    if kind not in PHRASES:
        return None
    return PHRASES[kind] % {'n': count, 'port': port}


def _speed(text):
    match = _SPEED.match(text or '')
    return float(match.group(1)) if match else None


def _width(text):
    return int(text) if text and text.isdigit() else None


def link_problem(path, port_path, check_speed=True):
    """A phrase when the function's link runs below what it and its port
    can do, or is down; None otherwise (or when not shown)."""
    current = read(os.path.join(path, 'current_link_speed'))
    best = _speed(read(os.path.join(path, 'max_link_speed')))
    if current is None or best is None:
        return None
    width = _width(read(os.path.join(path, 'current_link_width')))
    widest = _width(read(os.path.join(path, 'max_link_width')))
    if port_path is not None:
        port_best = _speed(read(os.path.join(port_path, 'max_link_speed')))
        port_widest = _width(read(os.path.join(port_path,
                                               'max_link_width')))
        best = min(best, port_best or best)
        if widest and port_widest:
            widest = min(widest, port_widest)
    speed = _speed(current)
    if speed is None or width == 0:
        return 'PCIe link down (current_link_speed %r, current_link_width ' \
               '%r)' % (current, width)
    problems = []
    if check_speed and speed < best:
        problems.append('speed %g GT/s of %g' % (speed, best))
    if width is not None and widest and width < widest:
        problems.append('width x%d of x%d' % (width, widest))
    if problems:
        return 'PCIe link degraded: %s' % ', '.join(problems)
    return None


def config_problem(path):
    """A phrase when the vendor id read from config space is 0xffff.

    Not read while the function is runtime-suspended
    (``power/runtime_status`` ``suspended``,
    Documentation/ABI/testing/sysfs-devices-power): a read of ``config``
    resumes it (drivers/pci/pci-sysfs.c ``pci_read_config`` →
    ``pci_config_pm_runtime_get``), which would wake an idle GPU on
    ``vfio-pci`` from D3cold every cycle."""
    if read(os.path.join(path, 'power', 'runtime_status')) == 'suspended':
        return None
    data = read(os.path.join(path, 'config'), binary=True, size=2)
    if data is None or len(data) < 2:
        return None
    if int.from_bytes(data[:2], 'little') == PCI_ERROR_RESPONSE:
        return ('config space reads vendor id 0xffff: the device no longer '
                'answers on the bus')
    return None


def is_vf(path):
    return os.path.lexists(os.path.join(path, 'physfn'))


def class_id(path):
    """The function's class as hex digits without ``0x`` (``030200``)."""
    text = read(os.path.join(path, 'class')) or ''
    return text.lower().replace('0x', '')
