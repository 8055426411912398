"""Health of an Intel DFL FPGA card, from the kernel's DFL files.

Sources (torvalds/linux): ``Documentation/ABI/testing/
sysfs-platform-dfl-fme`` and ``sysfs-platform-dfl-port``,
``drivers/fpga/dfl-fme-error.c``, ``dfl-afu-error.c``, ``dfl-afu-main.c``,
``dfl-fme-main.c`` (hwmon), ``Documentation/fpga/dfl.rst``
("Power/Thermal management").

- the card (the FME, :data:`FME_JUDGED`): ``fme_errors``,
  ``pcie0_errors``, ``pcie1_errors``, ``catfatal_errors``,
  ``nonfatal_errors`` non-zero is a fault of the whole card. The first
  three clear when their value is written back (``fme_errors_store``,
  ``pcie0_errors_store``, ``pcie1_errors_store``:
  :func:`clear_errors`); the last two are read-only registers that a
  card reset clears. ``first_error`` and ``next_error`` are read-only
  and ``fme_errors_store`` does not write them: they are logged as
  detail, never judged, so a cleared card is not fenced for ever;
  ``inject_errors`` (what a test injected) is not judged;
- each port (:data:`PORT_JUDGED`): ``errors/errors`` non-zero is a fault
  of that port's deployable only (an AFU error, often its tenant's):
  the card's other ports stay offered. It clears when its value is
  written back (``errors_store``, ``afu_port_err_clear``).
  ``first_error`` and ``first_malformed_req`` are logged as detail:
  ``afu_port_err_clear`` writes ``PORT_ERROR`` and ``PORT_FIRST_ERROR``
  only, never ``PORT_MALFORMED_REQ0/1``, so the malformed request stays
  readable until a power cycle;
- each port's ``power_state`` (``0x%x`` of the APx state): AP6 (the port
  is shut down for power or thermal reasons) is a fault of that port;
  AP1/AP2 (50%/90% throttling) are logged;
- the FME's hwmon (``hwmon/hwmonX``, ``name`` ``dfl_fme_thermal`` or
  ``dfl_fme_power``): ``temp1_crit_alarm`` or ``temp1_input`` at or above
  ``temp1_crit`` (100% throttling), ``temp1_input`` at or above
  ``temp1_emergency`` (the BMC shuts the FPGA down),
  ``power1_crit_alarm`` or ``power1_input`` at or above ``power1_crit``
  (90% throttling) are faults of the card; the ``max`` thresholds
  (``temp1_max``, ``power1_max``: 50% throttling) are logged as
  warnings;
- the FPGA manager's ``state``: the DFL manager reports ``unknown``
  (drivers/fpga/dfl-fme-mgr.c ``fme_mgr_state``) until the FPGA manager
  core sets ``operating`` after a partial reconfiguration (fpga-mgr.c);
  both are healthy. A state naming an error (``write complete error``
  after a failed reconfiguration) is a fault; one of loading
  (``write``...) gives no verdict;
- the card's FME and each reported port are still there.
"""

import dataclasses
import glob
import os

from oslo_log import log as logging

from sidecar import exception
from sidecar import privileged
from sidecar.discovery import health as health_mod
from sidecar.sources import base as sources
from sidecar.sources import dfl

LOG = logging.getLogger(__name__)

HEALTHY_STATES = frozenset(('unknown', 'operating'))
#: FME error files that fault the card (sysfs-platform-dfl-fme).
FME_JUDGED = ('fme_errors', 'pcie0_errors', 'pcie1_errors',
              'catfatal_errors', 'nonfatal_errors')
#: Those the kernel clears when their value is written back.
FME_CLEARABLE = ('fme_errors', 'pcie0_errors', 'pcie1_errors')
FME_DETAIL = ('first_error', 'next_error')
#: Port error files that fault the port (sysfs-platform-dfl-port).
PORT_JUDGED = ('errors',)
PORT_CLEARABLE = ('errors',)
PORT_DETAIL = ('first_error', 'first_malformed_req')
#: ``power_state`` values (sysfs-platform-dfl-port): AP6 shuts the port.
AP_SHUTDOWN = 6
AP_THROTTLED = {1: 'AP1 (50% throttling)', 2: 'AP2 (90% throttling)'}

#: (name of the hwmon device, input file, [(limit or alarm file, fault)]):
#: a fault holds the card, else it is a warning. Units: millidegree
#: Celsius, microwatt (sysfs-platform-dfl-fme).
HWMON = (
    ('dfl_fme_thermal', 'temp1_input', (
        ('temp1_emergency', True), ('temp1_crit', True),
        ('temp1_max', False))),
    ('dfl_fme_power', 'power1_input', (
        ('power1_crit', True), ('power1_max', False))),
)

_warned = {}   # (card address, what): last warning logged


def _value(path, base=0):
    """The integer in ``path``, None if unread: ``0x...`` (the error
    registers' ``"0x%llx"``) or, with ``base`` 10, decimal (hwmon)."""
    text = sources.read_file(path)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def _warn_once(card, what, message):
    if _warned.get((card, what)) != message:
        _warned[(card, what)] = message
        if message:
            LOG.warning('DFL card %s: %s', card, message)


def error_problems(directory, label, judged, detail):
    """``(problems, unreadable)`` of ``directory/errors``: each judged
    file that is non-zero, with the detail files' values."""
    errors_dir = os.path.join(directory, 'errors')
    if not os.path.isdir(errors_dir):
        return [], []
    problems, unreadable = [], []
    for name in judged:
        path = os.path.join(errors_dir, name)
        if not os.path.exists(path):
            continue
        value = _value(path)
        if value is None:
            unreadable.append('%s/errors/%s is unreadable' % (label, name))
        elif value:
            problems.append('%s/errors/%s is 0x%x' % (label, name, value))
    if problems:
        more = ['%s 0x%x' % (name, v) for name, v in (
            (n, _value(os.path.join(errors_dir, n))) for n in detail)
            if v]
        if more:
            problems[-1] += ' (%s)' % ', '.join(more)
    return problems, unreadable


def hwmon_problems(fme, card):
    """Faults of the FME's hwmon devices; warnings are logged."""
    problems = []
    for hwmon in sorted(glob.glob(os.path.join(fme, 'hwmon', 'hwmon*'))):
        name = sources.read_file(os.path.join(hwmon, 'name'))
        for kind, input_name, limits in HWMON:
            if name != kind:
                continue
            now = _value(os.path.join(hwmon, input_name), 10)
            warning = None
            for limit_name, fault in limits:
                limit = _value(os.path.join(hwmon, limit_name), 10)
                alarm = _value(os.path.join(hwmon, limit_name + '_alarm'),
                               10)
                crossed = bool(alarm) or (now is not None and limit and
                                          now >= limit)
                if not crossed:
                    continue
                text = '%s %s at or above %s (%s)' % (
                    kind, input_name if now is None else '%s %d' % (
                        input_name, now), limit_name,
                    'alarm' if alarm else limit)
                if fault:
                    problems.append(text)
                    break
                warning = text
            _warn_once(card, kind, warning)
    return problems


def port_problems(port, card):
    """``(problems, unreadable)`` of one port."""
    problems, unreadable = error_problems(port.path, port.name, PORT_JUDGED,
                                          PORT_DETAIL)
    state = _value(os.path.join(port.path, 'power_state'))
    if state == AP_SHUTDOWN:
        problems.append('%s/power_state is AP6: the port is shut down '
                        'for power or thermal reasons' % port.name)
    _warn_once(card, port.name, AP_THROTTLED.get(state) and
               '%s/power_state is %s' % (port.name, AP_THROTTLED[state]))
    return problems, unreadable


def manager_problems(manager):
    """``(problems, busy)`` of a DFL card's manager directory (or None)."""
    if manager is None:
        return (), False
    state = sources.read_file(os.path.join(manager, 'state'))
    if state is None or state in HEALTHY_STATES:
        return (), False
    if state in health_mod.BUSY_STATES:
        return (), True
    return ('FPGA manager %s state is %r'
            % (os.path.basename(manager), state),), False


def observe(sysfs_root, device, observation):
    """``observation`` (the PCI checks of ``device``) with the card's:
    the card's faults join the device's problems, a port's are scoped to
    its deployable (:attr:`sidecar.discovery.health.Observation.scoped`).
    """
    card = dfl.card(sysfs_root, device.address)
    if card is None:
        return dataclasses.replace(observation, problems=(
            observation.problems + ('its DFL FME is gone',)))
    problems, unreadable = error_problems(card.fme, card.fme_name,
                                          FME_JUDGED, FME_DETAIL)
    problems += hwmon_problems(card.fme, card.address)
    ports = {port.address: port for port in card.ports}
    scoped = []
    for dep in device.deployables:
        port = ports.get(dep.name)
        if port is None:
            scoped.append((dep.name, 'the DFL port of %s is gone'
                           % dep.name))
            continue
        found, lost = port_problems(port, card.address)
        scoped.extend((dep.name, p) for p in found)
        unreadable += lost
    more, busy = manager_problems(card.manager)
    return dataclasses.replace(
        observation, problems=observation.problems + tuple(problems)
        + tuple(more), busy=observation.busy or busy,
        unreadable=observation.unreadable + tuple(unreadable),
        scoped=observation.scoped + tuple(scoped))


def _clear(sysfs_root, directory, names):
    """Write each non-zero file's value back; ``[(relpath, value)]``."""
    cleared = []
    for name in names:
        path = os.path.join(directory, 'errors', name)
        value = _value(path)
        if not value:
            continue
        relpath = os.path.relpath(os.path.realpath(path),
                                  os.path.realpath(sysfs_root))
        privileged.dfl_clear_errors(sysfs_root, relpath, '0x%x' % value)
        cleared.append((relpath, value))
    return cleared


def clear_port_errors(sysfs_root, port):
    """Clear ``port``'s (a :class:`sidecar.sources.dfl.DflPort`) errors
    as OPAE's ``fpgaconf`` does before a partial reconfiguration
    (opae-sdk xfpga ``clear_port_errors``: the value read, written back
    to ``errors/errors``). Returns what was cleared."""
    return _clear(sysfs_root, port.path, PORT_CLEARABLE)


def clear_errors(sysfs_root, device):
    """Clear the errors of the DFL card ``device`` (a
    :class:`sidecar.model.Device`) and of its reported ports: each
    clearable error file's value written back, through the privileged
    daemon. Returns ``['<file> 0x<value>', ...]`` cleared (the read-only
    ``catfatal_errors`` and ``nonfatal_errors`` need a card reset).
    Raises UnknownDevice when ``device`` is no DFL card, OSError as the
    kernel answers (EBUSY: the port is in a low power state)."""
    card = dfl.card(sysfs_root, device.address)
    if card is None:
        raise exception.UnknownDevice(kind='DFL', address=device.address)
    cleared = _clear(sysfs_root, card.fme, FME_CLEARABLE)
    names = {dep.name for dep in device.deployables}
    for port in card.ports:
        if port.address in names:
            cleared += clear_port_errors(sysfs_root, port)
    for relpath, value in cleared:
        LOG.info('Cleared DFL errors: wrote 0x%x back to %s', value,
                 relpath)
    return ['%s 0x%x' % (relpath, value) for relpath, value in cleared]
