"""Faults of a simulated host (:class:`sidecar_simulator.host.SimulatedHost`),
written to its sysfs tree as the kernel would show them.

Test tooling, like the simulator: the health checks of
:mod:`sidecar.discovery.health` are proven against these::

    simulator_faults.set_aer(host, '0000:81:00.0', fatal=1)
    simulator_faults.set_fpga_state(host, '0000:81:00.0', 'write error')
    unplugged = simulator_faults.unplug(host, '0000:81:00.0')
    simulator_faults.replug(host, unplugged)
    simulator_faults.unload_mdev_driver(host, '0000:82:00.0')
    simulator_faults.reload_mdev_driver(host, '0000:82:00.0')
    removed = simulator_faults.remove_vf(host, '0000:81:00.2')
    simulator_faults.rescan(host, removed)
"""

import copy
import os
import shutil

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


def set_fpga_state(host, address, state):
    """Write the ``state`` of the FPGA manager of the DFL card whose PF
    (or port's VF) is ``address``, for example ``'write complete error'``
    or ``'operating'`` (Documentation/ABI/testing/sysfs-class-fpga-manager;
    drivers/fpga/fpga-mgr.c state_str)."""
    card = host.fpga_card(address)
    if card is None:
        raise KeyError('%s is not a simulated FPGA' % address)
    path = os.path.join(
        host.dfl.fme_dir(card), 'dfl-fme-mgr.%d' % card.fme_id,
        'fpga_manager', 'fpga%d' % card.manager, 'state')
    host.write_attr(card.pf, os.path.relpath(path, host._dir(card.pf)),
                    state)


def set_fpga_error(host, address, relpath, value):
    """Write a DFL error file of the card whose PF (or port's VF) is
    ``address``: ``relpath`` ``fme/<file>``, ``port/<file>`` (the port
    reached through ``address``, port 0 for the PF) with ``value`` such
    as ``'0x1'`` (Documentation/ABI/testing/sysfs-platform-dfl-fme and
    -port, errors/*)."""
    card = host.fpga_card(address)
    if card is None:
        raise KeyError('%s is not a simulated FPGA' % address)
    if relpath.startswith('port/') and address != card.pf:
        _card, index = host.dfl.find_port(address)
        if index:
            relpath = 'port%d/%s' % (index, relpath[len('port/'):])
    host.dfl.set_error(card, relpath, value)


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


def remove_vf(host, address):
    """``echo 1 > /sys/bus/pci/devices/<address>/remove`` on a VF (a VF
    reset gone wrong, or an operator's hot removal).

    Documentation/ABI/testing/sysfs-bus-pci (``remove``): the function is
    hot-removed, it leaves ``/sys/bus/pci/devices``. Its PF is untouched:
    ``sriov_numvfs`` keeps its value and the PF's ``virtfnN`` link stays
    (the kernel removes those links only when SR-IOV is disabled,
    ``sriov_numvfs`` written 0), dangling. Returns what :func:`rescan`
    puts back. A VF serving a DFL port takes the port (its base region
    and ``dfl-port.M``) with it, and their class links.
    """
    function = host.functions[address]
    if function.physfn is None:
        raise KeyError('%s is not a simulated VF' % address)
    saved = copy.deepcopy(function)
    del host.functions[address]
    os.unlink(os.path.join(host.root, 'bus/pci/devices', address))
    shutil.rmtree(host._dir(address))
    host.prune_class_links()
    return saved


def rescan(host, removed):
    """``echo 1 > /sys/bus/pci/rescan`` (Documentation/ABI/testing/
    sysfs-bus-pci): the function :func:`remove_vf` removed is enumerated
    again, at the same address, with fresh AER counters."""
    host.functions[removed.address] = copy.deepcopy(removed)
    host.write(host.root)
