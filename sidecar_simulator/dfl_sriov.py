"""The FME's port release and assign ioctls and a DFL PF's
``sriov_numvfs``, as the kernel answers them, from the kernel's sources
(torvalds/linux) and Intel's documented procedure, not from what the
sidecar does.

- :func:`fme_ioctl`: an ioctl on ``/dev/dfl-fme.N``:

  * ``DFL_FPGA_FME_PORT_RELEASE`` / ``_ASSIGN`` (include/uapi/linux/
    fpga-dfl.h ``_IOW(0xB6, 0x80 + 1 / + 2, int)``; the ``int`` port id
    read by drivers/fpga/dfl-fme-main.c ``fme_hdr_ioctl_release_port`` /
    ``_assign_port``): drivers/fpga/dfl.c ``dfl_fpga_cdev_release_port``
    (ENODEV no such port, EBUSY already released; the port's platform
    device leaves the PF's base region) and ``dfl_fpga_cdev_assign_port``
    (EBUSY already assigned; the port's platform device, with the id it
    kept, is under the PF again). The kernel's comment on assign: "a
    mandatory step after disable SRIOV support". The simulator refuses
    (EBUSY) an assign while the card's VFs are enabled: the kernel does
    not check it, but the port would then be reached by the PF and its VF
    at once, which no procedure of Intel's does and this model does not
    show. A card's assigned ports are shown under the PF once every port
    is (its ports are released and assigned together);
  * ``DFL_FPGA_FME_PORT_PR``: as :meth:`sidecar_simulator.dfl.DflHost.
    fme_pr`, but a port whose access mode is VF (released while SR-IOV
    is enabled) fails with ETIMEDOUT: the FME bridge disables the port
    through the PF's mapping (dfl-fme-br.c ``fme_bridge_enable_set`` →
    dfl-afu-main.c ``__afu_port_disable``, which polls
    ``PORT_CTRL_SFTRST_ACK`` and returns -ETIMEDOUT), and Intel's OPAE
    driver architecture guide (683857, "Partial Reconfiguration") asks
    the host to disable SR-IOV before a partial reconfiguration. Whether
    a real card answers so is to be confirmed on hardware; the model
    refuses rather than accept what Intel says not to do. A released
    port whose SR-IOV is disabled (access mode PF again, dfl.c
    ``dfl_fpga_cdev_config_ports_pf``) but not assigned has no platform
    device: ENODEV.

- :func:`sriov_numvfs_store`: a write to the PF's ``sriov_numvfs``
  (drivers/pci/iov.c ``sriov_numvfs_store``: the same count is a no-op,
  a non-zero count while VFs are enabled EBUSY; then dfl-pci.c
  ``cci_pci_sriov_configure``): 0 disables SR-IOV (the VFs and the ports
  their own enumeration had leave; released ports go back to PF access
  mode, ``dfl_fpga_cdev_config_ports_pf``); N enables N VFs only when N
  ports are released (dfl.c ``dfl_fpga_cdev_config_ports_vf``: EINVAL
  otherwise), each VF probed by dfl-pci with its port (new platform
  device ids, dfl.c ``dfl_id_alloc``), VF *i* serving port *i*.
"""

import errno
import os
import shutil
import struct

from sidecar_simulator import dfl as dfl_sim
from sidecar_simulator import host as simulator

#: include/uapi/linux/fpga-dfl.h, from the header's macros (not from the
#: sidecar's sidecar.dfl_abi): _IOW(0xB6, 0x81 / 0x82, int).
FME_PORT_RELEASE = (1 << 30) | (4 << 16) | (0xB6 << 8) | 0x81
FME_PORT_ASSIGN = (1 << 30) | (4 << 16) | (0xB6 << 8) | 0x82
_INT = struct.Struct('=i')


def _error(code):
    return OSError(code, os.strerror(code))


def _card(dfl_host, fme_name):
    card = next((c for c in dfl_host.cards
                 if 'dfl-fme.%d' % c.fme_id == fme_name), None)
    if card is None:
        raise _error(errno.ENODEV)
    return card


def _assigned(card):
    """The indexes of the ports under the PF now: all of them or none,
    but while some are released or assigned one by one (``partial``)."""
    partial = getattr(card, 'partial', None)
    if partial is not None:
        return set(partial)
    return set() if card.sriov else {p.index for p in card.ports}


def _set_assigned(card, assigned):
    whole = (not assigned or len(assigned) == len(card.ports))
    card.partial = None if whole else set(assigned)


def _vfs_on(dfl_host, card):
    return card.sriov and any(
        p.vf in dfl_host.host.functions for p in card.ports)


def fme_ioctl(dfl_host, fme_name, request, arg):
    """The kernel's answer to an ioctl on ``/dev/<fme_name>``; raises
    OSError as it would."""
    card = _card(dfl_host, fme_name)
    if request == dfl_sim.FME_PORT_PR:
        port_id = dfl_sim.PORT_PR.unpack_from(arg)[2]
        if port_id < len(card.ports) and port_id not in _assigned(card):
            raise _error(errno.ETIMEDOUT if _vfs_on(dfl_host, card)
                         else errno.ENODEV)
        return dfl_host.fme_pr(fme_name, request, arg)
    if request not in (FME_PORT_RELEASE, FME_PORT_ASSIGN):
        raise _error(errno.EINVAL)
    (port_id,) = _INT.unpack_from(arg)
    if not 0 <= port_id < len(card.ports):
        raise _error(errno.ENODEV)
    assigned = _assigned(card)
    if request == FME_PORT_ASSIGN:
        if port_id in assigned or _vfs_on(dfl_host, card):
            raise _error(errno.EBUSY)
        assigned.add(port_id)
        _set_assigned(card, assigned)
        if len(assigned) == len(card.ports):
            _to_pf(dfl_host, card)
        return 0
    if port_id not in assigned:
        raise _error(errno.EBUSY)
    assigned.discard(port_id)
    _set_assigned(card, assigned)
    port = card.ports[port_id]
    if dfl_host.root is not None:
        shutil.rmtree(dfl_host.port_dir(card, port_id), ignore_errors=True)
        _unlink_nodes(dfl_host, ['dfl-port.%d' % port.port_id])
        dfl_host.host.prune_class_links()
    if not assigned:
        card.sriov = True
        for p in card.ports:
            p.vf = p.vf_region = None
    return 0


def _to_pf(dfl_host, card):
    """Every port under the PF again, with the id it kept."""
    card.sriov = False
    for port in card.ports:
        port.vf = port.vf_region = None
        port.port_id = port.pf_port_id
        if dfl_host.root is not None:
            dfl_host._write_port(card, port)
            if dfl_host.dev_dir:
                simulator._write_files(dfl_host.dev_dir, {
                    'dfl-port.%d' % port.port_id: ''})


def _unlink_nodes(dfl_host, names):
    for name in names:
        path = os.path.join(dfl_host.dev_dir or '', name)
        if dfl_host.dev_dir and os.path.lexists(path):
            os.unlink(path)


def sriov_numvfs_store(dfl_host, pf, value):
    """The kernel's answer to ``value`` written to ``sriov_numvfs`` of
    the DFL card whose PF is ``pf``; raises OSError as it would."""
    card = dfl_host.card_of(pf)
    host = dfl_host.host
    try:
        count = int(value.strip(), 0)
    except ValueError:
        raise _error(errno.EINVAL)
    function = host.functions[pf]
    current = len(function.virtfns)
    if count == current:
        return
    if count and current:
        raise _error(errno.EBUSY)
    if count == 0:
        names = ['dfl-port.%d' % p.port_id for p in card.ports
                 if p.vf in host.functions]
        for port in card.ports:
            if port.vf in host.functions:
                host.remove_function(port.vf)
        _unlink_nodes(dfl_host, names)
        return
    released = [p for p in card.ports if p.index not in _assigned(card)]
    if len(released) != count or count > function.total_vfs:
        raise _error(errno.EINVAL)
    product_id = dfl_sim.PROFILES[card.profile]['vf_product_id']
    for port in released:
        vf = host._new_vf(function, product_id, port.index)
        vf.driver = dfl_sim.DRIVER
        port.vf = vf.address
        port.vf_region = dfl_host._next('region')
        port.port_id = dfl_host._next('port')
        if host.root is not None:
            host._write_function(vf)
            simulator._link('../' + vf.address, host._dir(
                pf, 'virtfn%d' % port.index))
            dfl_host._class_device(host._dir(vf.address), 'fpga_region',
                                   'region%d' % port.vf_region, {})
            dfl_host._write_port(card, port)
            if dfl_host.dev_dir:
                simulator._write_files(dfl_host.dev_dir, {
                    'dfl-port.%d' % port.port_id: ''})
    if host.root is not None:
        host._write_sriov(function)
