"""Health of an Intel DFL FPGA card, from the kernel's DFL error files.

- ``dfl-fme.N/errors/*`` and ``dfl-port.M/errors/*``
  (Documentation/ABI/testing/sysfs-platform-dfl-fme and -port): any
  non-zero value is a fault, named by its file (``inject_errors``, what a
  test injected, is not);
- the FPGA manager's ``state``: the DFL manager reports ``unknown``
  (drivers/fpga/dfl-fme-mgr.c ``fme_mgr_state``) until the FPGA manager
  core sets ``operating`` after a partial reconfiguration (fpga-mgr.c);
  both are healthy. A state naming an error (``write complete error``
  after a failed reconfiguration) is a fault; one of loading
  (``write``...) gives no verdict;
- the card's FME and each reported port are still there.
"""

import dataclasses
import os

from sidecar.discovery import health as health_mod
from sidecar.sources import base as sources
from sidecar.sources import dfl

HEALTHY_STATES = frozenset(('unknown', 'operating'))


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
    """``observation`` (the PCI checks of ``device``) with the card's."""
    card = dfl.card(sysfs_root, device.address)
    if card is None:
        return dataclasses.replace(observation, problems=(
            observation.problems + ('its DFL FME is gone',)))
    problems = list(dfl.errors(card.fme, card.fme_name))
    ports = {port.address: port for port in card.ports}
    for dep in device.deployables:
        port = ports.get(dep.name)
        if port is None:
            problems.append('the DFL port of %s is gone' % dep.name)
        else:
            problems.extend(dfl.errors(port.path, port.name))
    more, busy = manager_problems(card.manager)
    return dataclasses.replace(
        observation, problems=observation.problems + tuple(problems)
        + tuple(more), busy=observation.busy or busy)
