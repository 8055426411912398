"""What the kernel does to a simulated host's tree when a guest takes a
PCI function, gives it back, or the host reboots.

Each reaction is one function, and its docstring names the kernel (or
NVIDIA) source it follows. They change the host's description and, once
the host's tree is written, the tree alike:

- :func:`bind_vfio`: libvirt's ``<hostdev managed='yes'>`` at guest start
  or live attach (``virNodeDeviceDetachFlags``: ``driver_override`` then
  unbind and re-probe) leaves the function on ``vfio-pci``; what its old
  driver had registered under it goes with the old driver's ``remove``.
- :func:`release`: at guest stop or detach libvirt unbinds ``vfio-pci``
  and re-probes the function: its own driver enumerates its devices again.
- :func:`reboot`: what a host's boot leaves: SR-IOV off, no mdev, no
  ``driver_override``, NVIDIA vGPU 17 VFs untyped, DFL ports back to the
  PF, and on a cold boot each PR region with its card's default AFU.

A function's own driver is :attr:`SimFunction.driver` when the guest
takes it; :attr:`SimulatedHost.overridden` keeps it until :func:`release`.
"""

import os
import re
import shutil

from sidecar_simulator import abi_sources
from sidecar_simulator import dfl as dfl_sim
from sidecar_simulator import host as simulator
from sidecar_simulator import nvidia as nvidia_sim

VFIO = 'vfio-pci'
#: kind of path -> its source.
SOURCES = {
    'vfio': 'Documentation/ABI/testing/sysfs-bus-pci (driver link, '
            'driver_override) and drivers/base/bus.c; "vfio-pci": '
            'drivers/vfio/pci/vfio_pci.c vfio_pci_driver',
}
#: (pattern of a path relative to the sysfs root, SOURCES key).
_RULES = tuple((re.compile(pattern), kind) for pattern, kind in (
    (r'^bus/pci/drivers/vfio-pci(/[0-9a-f:.]+)?$', 'vfio'),
))


def source_of(relpath):
    """The :data:`SOURCES` key of a path this module writes, or None."""
    return abi_sources.source_of(_RULES, relpath)


def _drivers(host, *parts):
    return os.path.join(host.root, 'bus', 'pci', 'drivers', *parts)


def _relink(host, address, old, new):
    """The function's ``driver`` link (and the driver's link back) from
    ``old`` to ``new`` (None: unbound)."""
    if host.root is None:
        return
    if old:
        back = _drivers(host, old, address)
        if os.path.lexists(back):
            os.unlink(back)
    link = host._dir(address, 'driver')
    if os.path.lexists(link):
        os.unlink(link)
    if new:
        simulator._symlink(_drivers(host, new), link)
        simulator._symlink(host._dir(address), _drivers(host, new, address))


def _dev_nodes(dfl_host, names):
    if dfl_host.dev_dir:
        for name in names:
            path = os.path.join(dfl_host.dev_dir, name)
            if os.path.lexists(path):
                os.unlink(path)


def dfl_remove(host, address):
    """dfl-pci's ``remove`` of PCI function ``address``.

    drivers/fpga/dfl-pci.c ``cci_pci_remove``: on a PF, first
    ``cci_pci_sriov_configure(pcidev, 0)`` (``pci_disable_sriov``: the VFs
    go, drivers/pci/iov.c ``sriov_disable``; then
    ``dfl_fpga_cdev_config_ports_pf``: released ports are assigned back to
    the PF, drivers/fpga/dfl.c), then ``cci_remove_feature_devs`` →
    dfl.c ``dfl_fpga_feature_devs_remove``: the function's base
    ``fpga_region`` and every ``dfl-fme.N``/``dfl-port.M`` under it are
    unregistered (drivers/base/core.c ``device_del``: their class and
    platform links and ``/dev`` nodes go with them).
    """
    dfl_host = host.extensions.get('dfl')
    card = dfl_host and dfl_host.card_of(address)
    if card is None:
        return
    if host.root is not None:
        # The FPGA keeps what its ports loaded (a programmer may have
        # written it to the tree alone): the description takes it first.
        dfl_host.load_state(host.root)
    if address == card.pf:
        names = ['dfl-fme.%d' % card.fme_id] + [
            'dfl-port.%d' % p.port_id for p in card.ports
            if dfl_host._present(card, p)]
        if card.sriov:
            for port in card.ports:
                if port.vf in host.functions:
                    host.remove_function(port.vf)
            _ports_to_pf(dfl_host, card)
    else:
        port = card.ports[card.handles().index(address)]
        names = (['dfl-port.%d' % port.port_id]
                 if dfl_host._present(card, port) else [])
    if host.root is not None:
        region = host._dir(address, 'fpga_region')
        if os.path.isdir(region):
            shutil.rmtree(region)
        host.prune_class_links()
        _dev_nodes(dfl_host, names)


def _ports_to_pf(dfl_host, card):
    """drivers/fpga/dfl.c ``dfl_fpga_cdev_config_ports_pf``: every
    released port is assigned back to the PF (``__fpga_port_assign``):
    its platform device, with the id it kept while released, is under the
    PF's base region again; no VF serves it."""
    card.sriov = False
    for port in card.ports:
        port.vf = port.vf_region = None
        port.port_id = port.pf_port_id


def bind_vfio(host, address):
    """``address`` bound to ``vfio-pci``, as libvirt leaves a managed
    hostdev (or ``virsh nodedev-detach``).

    libvirt src/util/virpci.c ``virPCIDeviceDetach``/
    ``virPCIDeviceBindToStub``: writes ``vfio-pci`` to the function's
    ``driver_override``, unbinds its driver and re-probes it
    (Documentation/ABI/testing/sysfs-bus-pci ``driver_override``,
    ``drivers/unbind``, ``drivers_probe``); the old driver's ``remove``
    runs (:func:`dfl_remove` for dfl-pci), then
    drivers/vfio/pci/vfio_pci.c ``vfio_pci_probe`` binds it: its
    ``driver`` link leads to ``bus/pci/drivers/vfio-pci``. A function on
    vfio-pci already: nothing changes (libvirt's detach is then a no-op).
    """
    function = host.functions[address]
    if function.driver == VFIO:
        return
    old = function.driver
    host.overridden[address] = old
    if old == dfl_sim.DRIVER:
        dfl_remove(host, address)
    function.driver = VFIO
    _relink(host, address, old, VFIO)


def release(host, address):
    """``address`` given back to its own driver, as libvirt does at guest
    stop or detach of a managed hostdev.

    libvirt src/util/virpci.c ``virPCIDeviceReattach``/
    ``virPCIDeviceUnbindFromStub``: clears ``driver_override``, unbinds
    ``vfio-pci`` (drivers/vfio/pci/vfio_pci.c ``vfio_pci_remove``) and
    re-probes (``drivers_probe``): the function's own driver probes it
    again. For dfl-pci that is drivers/fpga/dfl-pci.c ``cci_pci_probe`` →
    ``cci_enumerate_feature_devs``: the base region, FME and the ports
    assigned to this function now (all of them on a PF whose SR-IOV its
    remove disabled; on a VF its one released port) are registered again,
    each port's AFU as the FPGA kept it. Their ids are the ones they had:
    dfl.c ``dfl_id_alloc`` and fpga-region.c take the lowest free id.
    A function no guest took is left as it is.
    """
    if address not in host.overridden:
        return
    own = host.overridden.pop(address)
    function = host.functions.get(address)
    if function is None:  # a VF its PF's remove took away
        return
    function.driver = own
    _relink(host, address, VFIO, own)
    dfl_host = host.extensions.get('dfl')
    if own == dfl_sim.DRIVER and dfl_host and host.root is not None:
        card = dfl_host.card_of(address)
        if address == card.pf:
            dfl_host._write_card(card)
        else:
            port = card.ports[card.handles().index(address)]
            dfl_host._class_device(host._dir(address), 'fpga_region',
                                   'region%d' % port.vf_region, {})
            dfl_host._write_port(card, port)
            if dfl_host.dev_dir:
                simulator._write_files(dfl_host.dev_dir, {
                    'dfl-port.%d' % port.port_id: ''})


def reboot(host, cold=True, reenable=()):
    """The host's tree as its next boot leaves it; returns the root.

    - No ``driver_override`` survives (it is a sysfs write:
      Documentation/ABI/testing/sysfs-bus-pci): every function is on its
      own driver again.
    - ``sriov_numvfs`` is 0 on every PF: VFs exist only after a write to
      it (drivers/pci/iov.c ``sriov_numvfs_store``), so every VF is gone;
      the PFs in ``reenable`` get theirs back, fresh, as a boot-time unit
      (NVIDIA's ``sriov-manage -e``, a NIC's udev rule) writes it again.
    - No mdev survives (Documentation/driver-api/vfio-mediated-device.rst:
      an mdev is created by a write to ``create``); each type gets back
      the instances its mdevs held.
    - NVIDIA vGPU 17: every VF reads ``current_vgpu_type`` 0 (NVIDIA
      vgpu-device-manager ``pkg/vgpu/vfio/sysfs.go``: the type is set at
      run time, so the tool applies its config at every boot): the
      host's :class:`sidecar_simulator.nvidia.NvidiaHost`, if it has one.
    - DFL: no port is released at boot (drivers/fpga/dfl.c
      ``dfl_fpga_feature_devs_enumerate``: ports are under the PF until
      ``DFL_FPGA_FME_PORT_RELEASE``), and the ids are taken again in probe
      order. ``cold`` (power cycled): the FPGA configures from its flash,
      so each port's PR region holds its card's default AFU and the error
      registers are clear (Intel PAC D5005 / N3000 user guides: the FPGA
      image loads from flash at power on); a warm reboot keeps what the
      FPGA had loaded.
    """
    dfl_host = host.extensions.get('dfl')
    nvidia = nvidia_sim.of(host)
    for pf in reenable:
        if dfl_host and dfl_host.card_of(pf):
            raise ValueError('%s: a DFL card\'s ports are released again '
                             'with DFL_FPGA_FME_PORT_RELEASE before its '
                             'SR-IOV, not by a boot-time sriov_numvfs' % pf)
    for address, own in list(host.overridden.items()):
        if address in host.functions:
            host.functions[address].driver = own
    host.overridden.clear()
    for pf in [f for f in host.functions.values() if f.virtfns]:
        product_id = host.functions[pf.virtfns[min(pf.virtfns)]].product_id
        count = len(pf.virtfns)
        for vf in list(pf.virtfns.values()):
            _forget(host, vf)
        if pf.address in reenable:
            for index in range(count):
                host._new_vf(pf, product_id, index).driver = pf.driver
    for function in host.functions.values():
        for mdev_type in function.mdev_types:
            mdev_type.available_instances += len(mdev_type.mdevs)
            mdev_type.mdevs = []
    if nvidia is not None:
        _nvidia_boot(host, nvidia)
    if dfl_host is not None:
        _dfl_boot(host, dfl_host, cold)
    root = host.root
    if root is None:
        return None
    shutil.rmtree(root)
    if dfl_host is not None and dfl_host.dev_dir:
        for name in os.listdir(dfl_host.dev_dir):
            if name.startswith(('dfl-fme.', 'dfl-port.')):
                os.unlink(os.path.join(dfl_host.dev_dir, name))
    return host.write(root)


def _forget(host, address):
    """A VF leaves the description (the tree is rewritten after)."""
    function = host.functions.pop(address)
    pf = host.functions[function.physfn]
    for index, vf in list(pf.virtfns.items()):
        if vf == address:
            del pf.virtfns[index]


def _nvidia_boot(host, nvidia):
    for card in nvidia.cards:
        pf = host.functions[card.pf]
        card.vfs = [pf.virtfns[i] for i in sorted(pf.virtfns)]
        for vf in card.vfs:
            nvidia._group(host.functions[vf], pf.driver)
        if card.shape == 'vfio-vgpu':
            card.current = {vf: '0' for vf in card.vfs}
        elif card.shape == 'mdev':
            for vf in card.vfs:
                host.functions[vf].mdev_types = [
                    simulator.SimMdevType(t.type_id, t.name, 0)
                    for t in card.gpu.mdev_types]
            nvidia._mdev_capacity(card)


def _dfl_boot(host, dfl_host, cold):
    dfl_host._ids = dict.fromkeys(dfl_host._ids, 0)
    for card in dfl_host.cards:
        card.sriov = False
        card.base_region = dfl_host._next('region')
        card.fme_id = dfl_host._next('fme')
        card.manager = dfl_host._next('manager')
        for port in card.ports:
            port.vf = port.vf_region = None
            port.bridge = dfl_host._next('bridge')
            port.pr_region = dfl_host._next('region')
            if cold:
                port.afu_id = port.default_afu_id
        for port in card.ports:
            port.port_id = port.pf_port_id = dfl_host._next('port')
        if cold:
            card.errors = {}
