"""The ports of a DFL card whose SR-IOV serves them, given back to the PF
around a partial reconfiguration.

Intel's OPAE driver architecture guide (683857, "Partial
Reconfiguration") gives the host's procedure for a port released to a
VF: unplug the VF from the guest, disable SR-IOV, perform the partial
reconfiguration, enable SR-IOV, plug the VF. The kernel's
``dfl_fpga_cdev_assign_port`` (drivers/fpga/dfl.c) says the assign is "a
mandatory step after disable SRIOV support", and
``dfl_fpga_cdev_config_ports_vf`` enables SR-IOV only with as many VFs as
released ports. So :func:`assigned_back`:

1. refuses, writing nothing, while a VF of the card is on another driver
   than ``dfl-pci`` (``vfio-pci``: a guest holds it; disabling SR-IOV
   would take it away from under the guest);
2. writes 0 to the PF's ``sriov_numvfs`` (drivers/pci/iov.c; dfl-pci.c
   ``cci_pci_sriov_configure``: the released ports go back to PF access
   mode);
3. assigns every released port back (``DFL_FPGA_FME_PORT_ASSIGN``);
4. after the load, whatever its outcome, releases them again
   (``DFL_FPGA_FME_PORT_RELEASE``) and writes the VF count read in step 2
   back to ``sriov_numvfs``: dfl-pci probes each VF with its port.

A failure in 4 fails the job saying what is left to do by hand.
"""

import contextlib
import glob
import os

from oslo_log import log as logging

from sidecar import exception
from sidecar import privileged
from sidecar.program import programmers
from sidecar.sources import base as sources
from sidecar.sources import dfl

LOG = logging.getLogger(__name__)

DFL_PCI = 'dfl-pci'


def _driver(sysfs_root, address):
    try:
        return os.path.basename(os.readlink(os.path.join(
            sysfs_root, 'bus', 'pci', 'devices', address, 'driver')))
    except OSError:
        return None


def _vfs(sysfs_root, pf):
    """The PF's VFs (its ``virtfnN`` links), by address."""
    found = []
    for link in glob.glob(os.path.join(sysfs_root, 'bus', 'pci', 'devices',
                                       pf, 'virtfn*')):
        try:
            found.append(os.path.basename(os.readlink(link).rstrip('/')))
        except OSError:
            continue
    return sorted(found)


def _failed(address, reason):
    return exception.ProgrammingFailed(address=address, reason=reason)


@contextlib.contextmanager
def assigned_back(conf, address, card):
    """Run the body with every released port of ``card`` (a
    :class:`sidecar.sources.dfl.DflCard`) assigned back to its PF and
    SR-IOV disabled; see the module's steps."""
    root = conf.sidecar.sysfs_root
    vfs = _vfs(root, card.address)
    held = ['%s (%s)' % (vf, _driver(root, vf) or 'no driver')
            for vf in vfs if _driver(root, vf) != DFL_PCI]
    released = [p for p in card.ports if p.address != card.address]
    if held:
        raise _failed(address, 'the port is released to a VF; loading it '
                      'needs the card\'s SR-IOV disabled and its ports '
                      'assigned back to the PF (Intel OPAE guide 683857), '
                      'which would take away VF(s) %s: nothing was written'
                      % ', '.join(held))
    if any(p.number is None for p in released):
        raise _failed(address, 'a released port\'s id is unreadable: it '
                      'cannot be assigned back; nothing was written')
    count = sources.read_file(os.path.join(
        root, 'bus', 'pci', 'devices', card.address, 'sriov_numvfs'))
    if count is None or not count.isdigit():
        raise _failed(address, 'sriov_numvfs of %s is unreadable; nothing '
                      'was written' % card.address)
    count, dev_dir = int(count), conf.fpga.dfl_dev_dir
    numbers = [p.number for p in released]
    LOG.info('Programming %(addr)s: SR-IOV of %(pf)s disabled and port(s) '
             '%(ports)s of %(fme)s assigned back to the PF for the load, '
             'then released and %(count)d VF(s) enabled again',
             {'addr': address, 'pf': card.address, 'count': count,
              'fme': card.fme_name,
              'ports': ', '.join(map(str, numbers))})
    try:
        privileged.set_sriov_numvfs(root, card.address, 0)
    except (OSError, exception.InvalidArgument) as e:
        raise _failed(address, 'cannot disable SR-IOV of %s: %s; nothing '
                      'was written' % (card.address, programmers._reason(e)))
    assigned, failure = [], None
    try:
        for number in numbers:
            privileged.dfl_port_config(dev_dir, card.fme_name, number, True)
            assigned.append(number)
    except (OSError, exception.InvalidArgument) as e:
        failure = _failed(address, 'cannot assign port %d of %s back to '
                          'the PF: %s; nothing was written' % (
                              numbers[len(assigned)], card.fme_name,
                              programmers._reason(e)))
    if failure is None:
        try:
            yield
        except Exception as e:  # the load's: raised once given back
            failure = e
    left = _give_back(conf, card, assigned, count)
    if left:
        LOG.error('DFL card %s is left with its ports on the PF: %s',
                  card.address, '; '.join(left))
        raise _failed(address, '%s; and the card could not be given back '
                      'to its VFs: %s (release the port(s) with '
                      'DFL_FPGA_FME_PORT_RELEASE, then write %d to '
                      '%s/sriov_numvfs)' % (
                          failure or 'loaded', '; '.join(left), count,
                          card.address))
    if failure is not None:
        raise failure


def _give_back(conf, card, assigned, count):
    """Release ``assigned`` and enable ``count`` VFs; what failed."""
    left = []
    for number in assigned:
        try:
            privileged.dfl_port_config(conf.fpga.dfl_dev_dir, card.fme_name,
                                       number, False)
        except (OSError, exception.InvalidArgument) as e:
            left.append('release of port %d: %s'
                        % (number, programmers._reason(e)))
    if count and not left:
        try:
            privileged.set_sriov_numvfs(conf.sidecar.sysfs_root,
                                        card.address, count)
        except (OSError, exception.InvalidArgument) as e:
            left.append('sriov_numvfs %d: %s'
                        % (count, programmers._reason(e)))
    return left


def port_on_pf(conf, address, card, number):
    """``(card, port)``: port ``number`` of ``card`` now under its PF."""
    now = dfl.card(conf.sidecar.sysfs_root, card.address)
    ports = [p for p in (now.ports if now else ())
             if p.number == number and p.address == card.address]
    if len(ports) != 1:
        raise _failed(address, 'port %d of %s is not under the PF after '
                      'it was assigned back' % (number, card.fme_name))
    return now, ports[0]
