"""Faults of a simulated host (:class:`sidecar.simulator.SimulatedHost`),
written to its sysfs tree as the kernel would show them.

Test tooling, like the simulator: the health checks of
:mod:`sidecar.health` are proven against these::

    simulator_faults.set_aer(host, '0000:81:00.0', fatal=1)
    simulator_faults.set_fpga_state(host, '0000:81:00.0', 'write error')
    unplugged = simulator_faults.unplug(host, '0000:81:00.0')
    simulator_faults.replug(host, unplugged)
    simulator_faults.unload_mdev_driver(host, '0000:82:00.0')
    simulator_faults.reload_mdev_driver(host, '0000:82:00.0')
"""

import copy
import os

#: The counters of ``aer_dev_fatal`` (Linux 6.x), then the total.
FATAL_NAMES = ('Undefined', 'DLP', 'SDES', 'TLP', 'FCP', 'CmpltTO',
               'CmpltAbrt', 'UnxCmplt', 'RxOF', 'MalfTLP', 'ECRC', 'UnsupReq',
               'ACSViol', 'UncorrIntErr', 'BlockedTLP', 'AtomicOpBlocked',
               'TLPBlockedErr', 'PoisonTLPBlocked')


def _aer_text(count, total_name):
    lines = ['%s %d' % (name, count if name == 'DLP' else 0)
             for name in FATAL_NAMES]
    lines.append('%s %d' % (total_name, count))
    return '\n'.join(lines)


def set_aer(host, address, fatal=None, nonfatal=None):
    """Write the function's ``aer_dev_fatal`` / ``aer_dev_nonfatal``
    counters (None: leave that file as it is)."""
    if fatal is not None:
        host.write_attr(address, 'aer_dev_fatal',
                        _aer_text(fatal, 'TOTAL_ERR_FATAL'))
    if nonfatal is not None:
        host.write_attr(address, 'aer_dev_nonfatal',
                        _aer_text(nonfatal, 'TOTAL_ERR_NONFATAL'))


def set_fpga_state(host, address, state, kind='manager'):
    """Write the ``state`` of an FPGA's manager (``kind='manager'``) or
    region (``kind='region'``), for example ``'write error'`` or
    ``'operating'``."""
    number = host.functions[address].region
    if number is None:
        raise KeyError('%s is not a simulated FPGA' % address)
    relpath = {'manager': 'fpga_manager/fpga%d/state',
               'region': 'fpga_region/region%d/state'}[kind] % number
    host.write_attr(address, relpath, state)


def unplug(host, address):
    """Remove a PF and its VFs from the host (hot unplug, or a device
    fallen off the bus). Returns what :func:`replug` puts back."""
    pf = host.functions[address]
    saved = [copy.deepcopy(pf)] + [
        copy.deepcopy(host.functions[vf]) for _i, vf in
        sorted(pf.virtfns.items())]
    for _index, vf in sorted(pf.virtfns.items(), reverse=True):
        host.remove_function(vf)
    host.remove_function(address)
    return saved


def replug(host, saved):
    """Put back what :func:`unplug` removed, with fresh AER counters."""
    for function in saved:
        host.functions[function.address] = copy.deepcopy(function)
    if host.root is not None:
        host.write(host.root)


def unload_mdev_driver(host, address):
    """A GPU's vendor driver unloaded: its ``mdev_supported_types`` goes
    (kept aside for :func:`reload_mdev_driver`)."""
    path = host._dir(address, 'mdev_supported_types')
    os.rename(path, path + '.unloaded')


def reload_mdev_driver(host, address):
    """Undo :func:`unload_mdev_driver`."""
    path = host._dir(address, 'mdev_supported_types')
    os.rename(path + '.unloaded', path)
