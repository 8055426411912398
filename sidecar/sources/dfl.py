"""Intel DFL FPGA cards read from sysfs, as the kernel registers them.

Sources (torvalds/linux): ``Documentation/fpga/dfl.rst``,
``Documentation/ABI/testing/sysfs-platform-dfl-{fme,port}``,
``sysfs-class-fpga-{region,manager}``, ``drivers/fpga/dfl.c``,
``dfl-fme-pr.c``, ``dfl-fme-region.c``, ``dfl-fme-mgr.c``,
``dfl-afu-main.c``. A DFL card's PCI function (the PF, and each VF after
a port was released for SR-IOV) has a *base* region
``<bdf>/fpga_region/regionX``, whose children are the platform devices
``dfl-fme.N`` (the PF only) and ``dfl-port.M`` (a port not released).
Under the FME:

- ``dfl-fme-mgr.N/fpga_manager/fpgaK``: the FPGA manager; its ``state``
  is always ``unknown`` (``dfl-fme-mgr.c`` ``fme_mgr_state``);
- ``dfl-fme-region.P/fpga_region/regionY``: one PR region per port, the
  only region with a ``compat_id`` (the interface id a bitstream must
  match);
- ``errors/*``: the FME's error registers.

``dfl-port.M/afu_id`` is the function loaded in that port's AFU, and
``dfl-port.M/errors/*`` its errors. The FME is programmed with the
``DFL_FPGA_FME_PORT_PR`` ioctl on ``/dev/dfl-fme.N``.
"""

import dataclasses
import os
import re
from typing import Optional

from sidecar import model
from sidecar.sources import base

_FME = re.compile(r'^dfl-fme\.([0-9]+)$')
_PORT = re.compile(r'^dfl-port\.([0-9]+)$')
_FME_REGION = re.compile(r'^dfl-fme-region\.([0-9]+)$')
_FME_MGR = re.compile(r'^dfl-fme-mgr\.([0-9]+)$')
#: Error files that are no fault when non-zero: ``inject_errors`` shows
#: what a test injected (sysfs-platform-dfl-fme).
_NOT_FAULTS = frozenset(('inject_errors',))


@dataclasses.dataclass(frozen=True)
class DflPort:
    """``dfl-port.M`` under the base region of PCI function ``address``."""
    name: str
    path: str
    address: str
    number: Optional[int]  # its ``id``: the port's number on the card


@dataclasses.dataclass(frozen=True)
class DflCard:
    """A DFL card: its PF and FME, manager, PR regions and ports."""
    address: str
    fme: str                 # the FME's sysfs directory
    fme_name: str            # dfl-fme.N: also /dev/dfl-fme.N
    manager: Optional[str]   # .../fpga_manager/fpgaK
    pr_regions: tuple = ()   # .../fpga_region/regionY, in dfl-fme-region order
    ports: tuple = ()        # DflPort, in the order of their number

    def pr_region(self, port):
        """The PR region of ``port`` (a :class:`DflPort`), or None.

        dfl-fme-pr.c creates one bridge and region per implemented port,
        in port order, and the regions take the bridges' increasing ids:
        the n-th region (by ``dfl-fme-region.P``) is port n's.
        """
        index = port.number if port.number is not None else 0
        if 0 <= index < len(self.pr_regions):
            return self.pr_regions[index]
        return None


def _natural(name):
    return [int(part) if part.isdigit() else part
            for part in re.split(r'([0-9]+)', name)]


def _children(path, pattern):
    try:
        names = os.listdir(path)
    except OSError:
        return []
    return sorted((n for n in names if pattern.match(n)), key=_natural)


def _only_dir(path):
    """The one entry of ``path`` (``.../fpga_region/regionY``), or None."""
    try:
        names = sorted(os.listdir(path), key=_natural)
    except OSError:
        return None
    return os.path.join(path, names[0]) if names else None


def _pci_function(path):
    """The PCI address ``path`` (a real directory) is, or None."""
    try:
        model.parse_bdf(os.path.basename(path))
    except ValueError:
        return None
    return os.path.basename(path)


def is_dfl(region_path):
    """Whether a ``class/fpga_region`` entry is one the DFL drivers
    registered: a base region with ``dfl-fme``/``dfl-port`` children or
    an FME's PR region."""
    real = os.path.realpath(region_path)
    parent = os.path.basename(os.path.dirname(os.path.dirname(real)))
    return bool(_FME_REGION.match(parent) or _children(real, _FME) or
                _children(real, _PORT))


def is_dfl_manager(manager_path):
    real = os.path.realpath(manager_path)
    return bool(_FME_MGR.match(os.path.basename(
        os.path.dirname(os.path.dirname(real)))))


def _port(path, address):
    number = base.read_file(os.path.join(path, 'id'))
    return DflPort(name=os.path.basename(path), path=path, address=address,
                   number=int(number) if number and number.isdigit()
                   else None)


def _base(real, address, found, vf_ports):
    """Read the base region ``real`` (a real path) of PCI function
    ``address``: a card into ``found`` if it holds an FME, else its
    ports (released to a VF) into ``vf_ports``."""
    ports = [_port(os.path.join(real, p), address)
             for p in _children(real, _PORT)]
    fmes = _children(real, _FME)
    if not fmes:
        vf_ports.extend(ports)
        return
    fme = os.path.join(real, fmes[0])
    mgrs = _children(fme, _FME_MGR)
    manager = (_only_dir(os.path.join(fme, mgrs[0], 'fpga_manager'))
               if mgrs else None)
    regions = [_only_dir(os.path.join(fme, r, 'fpga_region'))
               for r in _children(fme, _FME_REGION)]
    found[address] = DflCard(
        address=address, fme=fme, fme_name=fmes[0], manager=manager,
        pr_regions=tuple(r for r in regions if r), ports=tuple(ports))


def _joined(sysfs_root, found, vf_ports):
    """``found`` with the VFs' ports joined to their PF's card (the VF's
    ``physfn``), each card's ports in the order of their number."""
    for port in vf_ports:
        physfn = os.path.join(sysfs_root, 'bus', 'pci', 'devices',
                              port.address, 'physfn')
        try:
            pf = os.path.basename(os.readlink(physfn).rstrip('/'))
        except OSError:
            continue
        card = found.get(pf)
        if card is not None:
            found[pf] = dataclasses.replace(card, ports=card.ports + (port,))
    return {address: dataclasses.replace(card, ports=tuple(sorted(
        card.ports, key=lambda p: (p.number is None, p.number or 0,
                                   p.address))))
            for address, card in found.items()}


def cards(sysfs_root):
    """All DFL cards, by PF address; ports found on VFs (released for
    SR-IOV) join the card of their PF (the VF's ``physfn``)."""
    class_dir = os.path.join(sysfs_root, 'class', 'fpga_region')
    try:
        names = sorted(os.listdir(class_dir), key=_natural)
    except OSError:
        return {}
    found, vf_ports = {}, []
    for name in names:
        real = os.path.realpath(os.path.join(class_dir, name))
        address = _pci_function(os.path.dirname(os.path.dirname(real)))
        if address is not None:  # else a PR region or another driver's
            _base(real, address, found, vf_ports)
    return _joined(sysfs_root, found, vf_ports)


def card(sysfs_root, address):
    """The DFL card whose PF is ``address``, as :func:`cards` gives it,
    or None; reads only the base regions of that PF and of its VFs
    (``virtfnN``), so that a check of one card does not read them all."""
    devices = os.path.join(sysfs_root, 'bus', 'pci', 'devices')
    functions = [address] + [
        os.path.basename(os.readlink(os.path.join(devices, address, link)))
        for link in _children(os.path.join(devices, address),
                              re.compile(r'^virtfn[0-9]+$'))]
    found, vf_ports = {}, []
    for function in functions:
        region_dir = os.path.join(devices, function, 'fpga_region')
        for name in _children(region_dir, re.compile(r'^region[0-9]+$')):
            real = os.path.realpath(os.path.join(region_dir, name))
            if _pci_function(os.path.dirname(os.path.dirname(real))) == \
                    function:
                _base(real, function, found, vf_ports)
    return _joined(sysfs_root, found, vf_ports).get(address)


def errors(directory, label):
    """``['<label>/errors/<file> is <value>', ...]`` for every non-zero
    error file in ``directory/errors`` (unreadable ones are said so)."""
    problems = []
    errors_dir = os.path.join(directory, 'errors')
    try:
        names = sorted(os.listdir(errors_dir))
    except OSError:
        return problems
    for name in names:
        if name in _NOT_FAULTS:
            continue
        value = base.read_file(os.path.join(errors_dir, name))
        if value is None:
            problems.append('%s/errors/%s is unreadable' % (label, name))
            continue
        try:
            nonzero = int(value, 16) != 0
        except ValueError:
            nonzero = True
        if nonzero:
            problems.append('%s/errors/%s is %s' % (label, name, value))
    return problems
