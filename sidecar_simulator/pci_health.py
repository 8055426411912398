"""What a PCI device's health looks like in sysfs, and its faults: the
upstream port above a device, AER counters, the PCIe link, config space,
and the state and services of an Intel QAT 4xxx PF.

Written from the kernel's ABI documents and sources (torvalds/linux),
not from what the sidecar reads; :data:`SOURCES` names the source of each
kind of path, :func:`source_of` finds it for a written path::

    port = pci_health.add_port(host, '0000:80:01.0', ['0000:81:00.0'])
    pci_health.set_port_aer(host, port, fatal=1, surprise_down=1)
    pci_health.set_link(host, '0000:81:00.0', speed='2.5', width=4)
    pci_health.set_config_alive(host, '0000:81:00.0', False)
    pci_health.set_qat(host, '0000:3d:00.0', state='down')

A port is added to a :class:`sidecar_simulator.host.SimulatedHost`
(``host.ports``): the functions below it live in its directory, as the
kernel registers a device as a child of the bridge above it. A tree
already written is moved into place.
"""

import os
import re

from sidecar_simulator import abi_sources
from sidecar_simulator import faults

#: kind of path -> its source in the kernel tree.
SOURCES = {
    'port': 'Documentation/ABI/testing/sysfs-bus-pci (/sys/bus/pci/'
            'devices/<dev>, vendor, device, class); include/linux/'
            'pci_ids.h PCI_CLASS_BRIDGE_PCI 0x0604; drivers/pci/probe.c '
            'pci_setup_device (a function below a bridge is its child in '
            '/sys/devices)',
    'aer': 'Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats '
           '(aer_dev_fatal, aer_dev_nonfatal, aer_dev_correctable); '
           'drivers/pci/pcie/aer.c aer_stats_dev_attr ("%s %llu" per '
           'aer_uncorrectable_error_string name: SDES is Surprise Down, '
           'then TOTAL_ERR_FATAL)',
    'rootport': 'Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats '
                '(aer_rootport_total_err_cor, _fatal, _nonfatal: one '
                'number)',
    'link': 'Documentation/ABI/testing/sysfs-bus-pci (current_link_speed, '
            'current_link_width, max_link_speed, max_link_width); '
            'drivers/pci/pci-sysfs.c and drivers/pci/pci.c '
            'pci_speed_string ("16.0 GT/s PCIe", "Unknown" while the link '
            'is down)',
    'config': 'Documentation/PCI/sysfs-pci.rst (config: the binary config '
              'space); include/uapi/linux/pci_regs.h PCI_VENDOR_ID 0x00, '
              'PCI_DEVICE_ID 0x02, little-endian; include/linux/pci.h '
              'PCI_ERROR_RESPONSE (all ones from a device that does not '
              'answer)',
    'qat_heartbeat': 'Documentation/ABI/testing/debugfs-driver-qat '
                     '(/sys/kernel/debug/qat_<device>_<BDF>/heartbeat/'
                     'status: 0 healthy, -1 unresponsive); drivers/crypto/'
                     'intel/qat/qat_common/adf_dbgfs.c (ADF_DEVICE_NAME_'
                     'PREFIX "qat_", the device class name "4xxx", or '
                     '"420xx" for 4946 (ADF_420XX_DEVICE_NAME), pci_name)',
    'qat_ras': 'Documentation/ABI/testing/sysfs-driver-qat_ras '
               '(qat_ras/errors_correctable, errors_nonfatal, errors_fatal: '
               'counts, "%u"; reset_error_counters zeroes them)',
    'qat': 'Documentation/ABI/testing/sysfs-driver-qat (qat/state "up" or '
           '"down", qat/cfg_services such as "sym;asym" or "dc"); PCI ids: '
           'drivers/crypto/intel/qat/qat_common/adf_accel_devices.h '
           '(4940/4941 4xxx, 4942/4943 401xx, 4944/4945 402xx, 4946/4947 '
           '420xx PF/VF)',
}

#: PCI ids of QAT GEN4 PFs and their VFs (adf_accel_devices.h).
QAT_4XXX = {'4940': '4941', '4942': '4943', '4944': '4945',
            '4946': '4947'}
#: The debugfs device class name (adf_dbgfs.c): "420xx" for 4946.
_DEBUGFS_NAME = {'4946': '420xx'}
BRIDGE_CLASS = '060400'
#: pci_speed_string of PCIe generations 1 to 5.
SPEEDS = ('2.5', '5.0', '8.0', '16.0', '32.0')

_RULES = tuple((re.compile(pattern), kind) for pattern, kind in (
    (r'aer_rootport_total_err_(cor|fatal|nonfatal)$', 'rootport'),
    (r'aer_dev_(fatal|nonfatal|correctable)$', 'aer'),
    (r'(current|max)_link_(speed|width)$', 'link'),
    (r'/config$', 'config'),
    (r'/qat/(state|cfg_services)$', 'qat'),
    (r'/qat_ras/errors_(correctable|nonfatal|fatal)$', 'qat_ras'),
    (r'^kernel/debug/qat_(4xxx|420xx)_[0-9a-f:.]+/heartbeat/status$',
     'qat_heartbeat'),
    (r'/(vendor|device|class)$', 'port'),
))

_CORRECTABLE = ('RxErr', 'BadTLP', 'BadDLLP', 'Rollover', 'Timeout',
                'NonFatalErr', 'CorrIntErr', 'HeaderOF')


def source_of(relpath):
    """The :data:`SOURCES` key of a path this module writes, or None."""
    return abi_sources.source_of(_RULES, relpath)


def _speed(generation_speed):
    return '%s GT/s PCIe' % generation_speed


def _aer_text(counts, total_name, names):
    lines = ['%s %d' % (name, counts.get(name, 0)) for name in names]
    lines.append('%s %d' % (total_name, sum(counts.values())))
    return '\n'.join(lines)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text + '\n')


def port_dir(host, port):
    return os.path.join(host.root, 'devices', 'pci%04x:00' % host.domain,
                        port)


def _roots(host):
    """``{port: whether it is a root port}`` of ``host``."""
    return host.__dict__.setdefault('pci_port_roots', {})


def add_port(host, port, below, root_port=True, speed='16.0', width=16,
             ids=('8086', '0000')):
    """A PCIe port (a root port, or a switch's downstream port) above the
    functions ``below`` (their VFs go with them), with vendor and device
    ``ids`` (the sidecar does not read them); returns ``port``. Call it
    after ``host.write``."""
    addresses = []
    for address in below:
        addresses.append(address)
        addresses.extend(host.functions[address].virtfns.values())
    moved = [a for a in addresses if host.root is not None and
             os.path.isdir(host._dir(a))]
    old = {a: host._dir(a) for a in moved}
    for address in addresses:
        host.ports[address] = port
    _roots(host)[port] = root_port
    if host.root is None:
        return port
    _write_port(host, port, root_port, speed, width, ids)
    for address in moved:
        os.rename(old[address], host._dir(address))
    host.write(host.root)  # the links follow the functions
    return port


def _write_port(host, port, root_port, speed, width, ids):
    path = port_dir(host, port)
    # SOURCES['port']
    for name, value in (('vendor', '0x' + ids[0]), ('device', '0x' + ids[1]),
                        ('class', '0x' + BRIDGE_CLASS)):
        _write(os.path.join(path, name), value)
    link = os.path.join(host.root, 'bus', 'pci', 'devices', port)
    if not os.path.lexists(link):
        os.symlink(os.path.relpath(path, os.path.dirname(link)), link)
    _write_link_files(path, speed, width, speed, width)
    _write_aer(path, {}, {}, {})
    if root_port:
        # SOURCES['rootport']
        for kind in ('cor', 'fatal', 'nonfatal'):
            _write(os.path.join(path, 'aer_rootport_total_err_' + kind), '0')


def _write_aer(path, fatal, nonfatal, correctable):
    # SOURCES['aer']
    _write(os.path.join(path, 'aer_dev_fatal'),
           _aer_text(fatal, 'TOTAL_ERR_FATAL', faults.FATAL_NAMES))
    _write(os.path.join(path, 'aer_dev_nonfatal'),
           _aer_text(nonfatal, 'TOTAL_ERR_NONFATAL', faults.FATAL_NAMES))
    _write(os.path.join(path, 'aer_dev_correctable'),
           _aer_text(correctable, 'TOTAL_ERR_COR', _CORRECTABLE))


def _write_link_files(path, speed, width, max_speed, max_width):
    # SOURCES['link']
    for name, value in (('current_link_speed', speed),
                        ('max_link_speed', _speed(max_speed)),
                        ('current_link_width', str(width)),
                        ('max_link_width', str(max_width))):
        _write(os.path.join(path, name), value)


def set_port_aer(host, port, fatal=0, surprise_down=0, rootport_fatal=None):
    """The port's fatal counters: ``fatal`` Data Link Protocol errors and
    ``surprise_down`` Surprise Downs; a root port's total of fatal error
    messages (default: their sum)."""
    path = port_dir(host, port)
    _write_aer(path, {'DLP': fatal, 'SDES': surprise_down}, {}, {})
    if _roots(host).get(port):
        total = fatal + surprise_down if rootport_fatal is None else \
            rootport_fatal
        _write(os.path.join(path, 'aer_rootport_total_err_fatal'),
               str(total))


def set_link(host, address, speed='16.0', width=16, max_speed='16.0',
             max_width=16):
    """A function's link; ``speed=None`` (or width 0): the link is down
    (``Unknown``)."""
    _write_link_files(host._dir(address),
                      _speed(speed) if speed else 'Unknown',
                      width if speed else 0, max_speed, max_width)


def set_config_alive(host, address, alive=True):
    """The first 64 bytes of config space: the function's ids, or all ones
    when the device no longer answers."""
    f = host.functions[address]
    if alive:
        data = (int(f.vendor_id, 16).to_bytes(2, 'little') +
                int(f.product_id, 16).to_bytes(2, 'little') + bytes(60))
    else:
        data = b'\xff' * 64
    # SOURCES['config']
    with open(host._dir(address, 'config'), 'wb') as out:
        out.write(data)


def set_qat(host, address, state=None, services=None, heartbeat=None,
            ras=None):
    """A QAT 4xxx PF's ``qat/state``, ``qat/cfg_services``, debugfs
    heartbeat ``status`` (``'0'``, ``'-1'``; None: leave as it is) and
    ``ras`` (``{'errors_fatal': n, ...}``: its qat_ras counters)."""
    if host.functions[address].product_id not in QAT_4XXX:
        raise KeyError('%s is not a QAT 4xxx PF' % address)
    # SOURCES['qat']
    if state is not None:
        _write(host._dir(address, 'qat', 'state'), state)
    if services is not None:
        _write(host._dir(address, 'qat', 'cfg_services'), services)
    if heartbeat is not None:
        # SOURCES['qat_heartbeat']
        name = _DEBUGFS_NAME.get(host.functions[address].product_id, '4xxx')
        _write(os.path.join(host.root, 'kernel', 'debug',
                            'qat_%s_%s' % (name, address), 'heartbeat',
                            'status'), heartbeat)
    for counter, value in (ras or {}).items():
        # SOURCES['qat_ras']
        _write(host._dir(address, 'qat_ras', counter), str(value))


def add_qat(host, address, services='sym;asym', num_vfs=4,
            product_id='4940'):
    """A QAT 4xxx PF, up, serving ``services``, with ``num_vfs`` VFs;
    its address (the next free one when ``address`` is None)."""
    pf = host.add_pf('8086', product_id, class_id='0b4000', address=address,
                     num_vfs=num_vfs, vf_product_id=QAT_4XXX[product_id])
    if host.root is not None:
        host.write(host.root)
        set_qat(host, pf.address, 'up', services, heartbeat='0',
                ras={'errors_correctable': 0, 'errors_nonfatal': 0,
                     'errors_fatal': 0})
    return pf.address


def written_paths(host):
    """Paths (relative to the root) this module wrote in ``host``'s tree."""
    names = ('aer_', 'link_', 'config')
    result = []
    for top, _dirs, files in list(os.walk(os.path.join(
            host.root, 'devices'))) + list(os.walk(os.path.join(
                host.root, 'kernel', 'debug'))):
        for name in files:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, host.root)
            port = os.path.basename(top) in _roots(host)
            if (port or '/qat/' in rel or '/qat_ras/' in rel or
                    rel.startswith('kernel/') or
                    any(name.startswith(n) for n in names) or
                    name.startswith(('current_link', 'max_link'))):
                result.append(rel)
    return sorted(result)
