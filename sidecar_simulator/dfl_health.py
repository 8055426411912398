"""A DFL card's health files beyond its error registers, and the
kernel's answer to a write of an error register, from the kernel's ABI
documents and drivers (torvalds/linux), not from what the sidecar reads.

- the FME's hwmon devices (``<dfl-fme.N>/hwmon/hwmonX``): :data:`SOURCES`
  ``hwmon``; values in millidegree Celsius and microwatt;
- :func:`errors_store`: what ``dfl-fme-error.c`` ``fme_errors_store`` /
  ``pcie0_errors_store`` / ``pcie1_errors_store`` and ``dfl-afu-error.c``
  ``errors_store`` (``afu_port_err_clear``) do with a write: the value is
  parsed with ``kstrtou64(buf, 0)`` (EINVAL if it does not parse), and
  the register is cleared only when the value written is the value it
  holds (else EINVAL); the read-only files refuse any write (EACCES, as
  sysfs answers a file without a store); ``first_error`` and
  ``first_malformed_req`` of a port are never written by
  ``afu_port_err_clear`` (``PORT_MALFORMED_REQ0/1`` keep their value),
  while ``PORT_FIRST_ERROR`` is cleared with ``PORT_ERROR``.
"""

import errno
import os

from sidecar_simulator import host as simulator

SOURCES = {
    'hwmon': 'Documentation/ABI/testing/sysfs-platform-dfl-fme '
             '(hwmon/hwmonX/name dfl_fme_thermal, dfl_fme_power; temp1_*, '
             'power1_*); drivers/fpga/dfl-fme-main.c (thermal and power '
             'management hwmon); Documentation/fpga/dfl.rst '
             '"Power/Thermal management"',
    'errors_store': 'drivers/fpga/dfl-fme-error.c fme_errors_store, '
                    'pcie0_errors_store, pcie1_errors_store; '
                    'drivers/fpga/dfl-afu-error.c errors_store, '
                    'afu_port_err_clear',
}

#: A card at rest: 40 C, thresholds 90/100/105 C, 60 W of 80/100 W.
THERMAL = {'name': 'dfl_fme_thermal', 'temp1_input': 40000,
           'temp1_max': 90000, 'temp1_crit': 100000,
           'temp1_emergency': 105000, 'temp1_max_alarm': 0,
           'temp1_crit_alarm': 0, 'temp1_max_policy': 0}
POWER = {'name': 'dfl_fme_power', 'power1_input': 60000000,
         'power1_max': 80000000, 'power1_crit': 100000000,
         'power1_max_alarm': 0, 'power1_crit_alarm': 0,
         'power1_xeon_limit': 0, 'power1_fpga_limit': 0, 'power1_ltr': 1}

#: Writable error files (cleared by writing their value back).
CLEARABLE = frozenset(('fme_errors', 'pcie0_errors', 'pcie1_errors',
                       'errors'))


def write_hwmon(dfl_host, card, thermal=None, power=None):
    """Write the FME's two hwmon devices of ``card`` (SOURCES['hwmon'])
    with :data:`THERMAL` and :data:`POWER`, changed by ``thermal`` and
    ``power``; returns ``(thermal dir, power dir)``."""
    base = os.path.join(dfl_host.fme_dir(card), 'hwmon')
    dirs = []
    for index, (values, more) in enumerate(((THERMAL, thermal),
                                            (POWER, power))):
        path = os.path.join(base, 'hwmon%d' % (10 * card.fme_id + index))
        simulator._write_files(path, dict(values, **(more or {})))
        dirs.append(path)
    return tuple(dirs)


def set_hwmon(path, **values):
    """Change readings of one hwmon device (what the card measures)."""
    simulator._write_files(path, values)


def _owner(dfl_host, errors_dir):
    """``(card, key prefix)`` whose FME or port has ``errors_dir``."""
    base = os.path.realpath(os.path.dirname(errors_dir))
    for card in dfl_host.cards:
        if os.path.realpath(dfl_host.fme_dir(card)) == base:
            return card, lambda name: 'fme/' + name
        for port in card.ports:
            if dfl_host._present(card, port) and os.path.realpath(
                    dfl_host.port_dir(card, port.index)) == base:
                return card, lambda name, port=port: dfl_host._error_key(
                    port, 'port/' + name)
    return None, None


def errors_store(path, value, dfl_host=None):
    """The kernel's answer to ``value`` written to the error file
    ``path`` (SOURCES['errors_store']); raises OSError as it would.
    With ``dfl_host`` (a :class:`sidecar_simulator.dfl.DflHost`), its
    cards' descriptions keep what was cleared, so a tree written again
    (a replug, a rescan) shows it cleared too."""
    name = os.path.basename(path)
    if name not in CLEARABLE:
        raise OSError(errno.EACCES, os.strerror(errno.EACCES))
    try:
        written = int(value.strip(), 0)
    except ValueError:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    with open(path) as f:
        held = int(f.read().strip(), 0)
    if written != held:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    cleared = [name]
    simulator._write(path, '0x0\n')
    if name == 'errors':  # afu_port_err_clear: PORT_FIRST_ERROR too
        first = os.path.join(os.path.dirname(path), 'first_error')
        if os.path.exists(first):
            simulator._write(first, '0x0\n')
            cleared.append('first_error')
    card, key = (_owner(dfl_host, os.path.dirname(path)) if dfl_host
                 else (None, None))
    for cleared_name in cleared if card is not None else ():
        card.errors[key(cleared_name)] = '0x0'
