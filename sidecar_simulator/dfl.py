"""Intel DFL FPGA cards (PAC A10, D5005, N3000, N6000) as the kernel shows
them, written from the kernel's ABI documents and drivers, not from what
the sidecar reads.

A card has 1 to 4 ports (``MAX_DFL_FPGA_PORT_NUM``, drivers/fpga/dfl.h;
the listed families ship one): each port has its own bridge, PR region
and ``afu_id``, and is programmed on its own (``port_id`` of
``DFL_FPGA_FME_PORT_PR``).

A card is data (:data:`PROFILES`, :class:`DflCard`); :class:`DflHost`
adds its PCI functions to a :class:`sidecar_simulator.host.SimulatedHost`
and writes, after the host's own tree, what the DFL drivers register.
Every path and value below names its source in the kernel tree
(torvalds/linux); :data:`SOURCES` maps each kind of path to it, and
:func:`written_paths` lists what a tree holds so a test can check that
nothing lacks a source. For a card with FME id ``n``, base region ``X``,
PR region ``Y``, manager ``fpgaM`` and port id ``m`` on PCI function
``P``::

    P/fpga_region/regionX/                    dfl.c: the base region
    P/fpga_region/regionX/dfl-fme.n/          dfl.c: FME, child of regionX
        errors/*, ports_num, bitstream_id ... sysfs-platform-dfl-fme
        dfl-fme-mgr.n/fpga_manager/fpgaM/     dfl-fme-pr.c, dfl-fme-mgr.c
        dfl-fme-br.K.auto/fpga_bridge/brK     dfl-fme-pr.c, fpga-bridge.c
        dfl-fme-region.K/fpga_region/regionY  dfl-fme-pr.c, dfl-fme-region.c
            compat_id                         sysfs-class-fpga-region
    P/fpga_region/regionX/dfl-port.m/         dfl.c: port, child of regionX
        id, afu_id, errors/*                  sysfs-platform-dfl-port
    /dev/dfl-fme.n, /dev/dfl-port.m           dfl.c (dfl_chrdevs), dfl.rst

With ``sriov`` every port is released (``DFL_FPGA_FME_PORT_RELEASE``,
include/uapi/linux/fpga-dfl.h): its platform device leaves the PF's
base region (dfl.c ``dfl_fpga_cdev_release_port``), ``sriov_numvfs``
equals the released ports (dfl.c ``dfl_fpga_cdev_config_ports_vf``),
and dfl-pci enumerates each VF's own feature list: a base region under
the VF with one port in it (dfl-pci.c ``cci_enumerate_feature_devs``,
Documentation/fpga/dfl.rst "Device Feature List (DFL) Framework
Overview" / "Add new FIUs support" / virtualization section). VF *i*
serves port *i* here.

The ``n6000-ofs`` and ``n6001-ofs`` profiles are the Intel N6000/N6001
as Open FPGA Stack (OFS) builds them, with no port release: PF0
(8086:bcce, subsystem 8086:1770 or 8086:1771: dfl-pci.c
``PCIE_DEVICE_ID_INTEL_DFL``, ``PCIE_SUBDEVICE_ID_INTEL_N6000``,
``PCIE_SUBDEVICE_ID_INTEL_N6001``) has the FME, the PR slot's one PR
region and the slot's port under its base region, as a card without
SR-IOV; its SR-IOV VFs (8086:bccf, ``PCIE_DEVICE_ID_INTEL_DFL_VF``, same
subsystem ids) carry the slot's AFU, each a part of it (the OFS FIM's
PF/VF mux: "FPGA Interface Manager Technical Reference Manual for Intel
Agilex PCIe Attach: Open FPGA Stack", Table 1-5 "PF/VF Mapping", from
the FIM's ``src/afu_top/mux/top_cfg_pkg.sv``: PF0-VF0 HE-MEM, PF0-VF1
HE-HSSI, PF0-VF2 HE-MEM-TG; renamed "Shell Technical Reference Manual:
OFS for Agilex 7 PCIe Attach FPGAs" from OFS 2024.1). A VF's BAR holds
those host exercisers, not an FME or a port, so no DFL and no base
region is enumerated under it (dfl-pci.c ``find_dfls_by_default``:
``-ENODEV``). OFS's "AFU Developer Guide: OFS for Agilex 7 FPGA PCIe
Attach FPGAs" (2025.1, section 3.2.3 "Set up host to interface with
example AFU") creates them with ``pci_device <PF0> vf 3`` and binds them
to ``vfio-pci`` with ``opae.io init``, whose output shows the VFs bound
from no driver (the PFs are unbound from ``dfl-pci`` first). They are
left unbound here.
"""

import ctypes
import dataclasses
import errno
import os
import re
import struct
from typing import Optional

from sidecar_simulator import abi_sources
from sidecar_simulator import host as simulator

NO_AFU = '0' * 32
#: drivers/fpga/dfl-pci.c DRV_NAME: the driver of every card function.
DRIVER = 'dfl-pci'

#: kind of path -> its source in the kernel tree.
SOURCES = {
    'pci': 'Documentation/ABI/testing/sysfs-bus-pci; PCI ids: '
           'drivers/fpga/dfl-pci.c cci_pcie_id_tbl',
    'base_region': 'drivers/fpga/dfl.c dfl_fpga_feature_devs_enumerate '
                   '(fpga_region_register(info->dev)); '
                   'drivers/fpga/fpga-region.c (class fpga_region, '
                   'region%d); Documentation/fpga/dfl.rst',
    'fme': 'drivers/fpga/dfl.c build_info_create_dev (parent: the base '
           'region); Documentation/ABI/testing/sysfs-platform-dfl-fme '
           '(ports_num: 1 to MAX_DFL_FPGA_PORT_NUM 4, drivers/fpga/dfl.h)',
    'fme_errors': 'Documentation/ABI/testing/sysfs-platform-dfl-fme '
                  '(errors/*); drivers/fpga/dfl-fme-error.c',
    'manager': 'drivers/fpga/dfl-fme-pr.c dfl_fme_create_mgr '
               '(dfl-fme-mgr.<fme id>, child of the FME); '
               'drivers/fpga/dfl-fme-mgr.c (name "DFL FME FPGA Manager", '
               'state FPGA_MGR_STATE_UNKNOWN); '
               'Documentation/ABI/testing/sysfs-class-fpga-manager',
    'bridge': 'drivers/fpga/dfl-fme-pr.c dfl_fme_create_bridge '
              '(PLATFORM_DEVID_AUTO); drivers/fpga/fpga-bridge.c; '
              'Documentation/ABI/testing/sysfs-class-fpga-bridge',
    'pr_region': 'drivers/fpga/dfl-fme-pr.c pr_mgmt_init (a bridge and '
                 'a region for each implemented port) and '
                 'dfl_fme_create_region (dfl-fme-region.<bridge id>); '
                 'drivers/fpga/'
                 'dfl-fme-region.c (compat_id: the manager\'s); '
                 'Documentation/ABI/testing/sysfs-class-fpga-region',
    'port': 'drivers/fpga/dfl.c build_info_create_dev; released ports '
            'and VFs one to one: dfl.c dfl_fpga_cdev_config_ports_vf '
            '(released_port_num != num_vfs: -EINVAL), called by '
            'dfl-pci.c cci_pci_sriov_configure; '
            'Documentation/ABI/testing/sysfs-platform-dfl-port; '
            'drivers/fpga/dfl-afu-main.c (afu_id "%016llx%016llx")',
    'port_errors': 'Documentation/ABI/testing/sysfs-platform-dfl-port '
                   '(errors/*); drivers/fpga/dfl-afu-error.c',
    'platform_link': 'Documentation/ABI/testing/sysfs-platform-dfl-fme '
                     'and sysfs-platform-dfl-port (/sys/bus/platform/'
                     'devices/dfl-*)',
    'class_link': 'Documentation/ABI/testing/sysfs-class-fpga-region, '
                  'sysfs-class-fpga-manager, sysfs-class-fpga-bridge',
    'driver': 'Documentation/ABI/testing/sysfs-bus-pci and '
              'drivers/base/bus.c (the "driver" link to '
              'bus/pci/drivers/<name> and its link back); "dfl-pci": '
              'drivers/fpga/dfl-pci.c cci_pci_driver (.name DRV_NAME), '
              'its id table holding the PFs and the VFs',
    'ofs': 'drivers/fpga/dfl-pci.c cci_pcie_id_tbl (PCI_DEVICE_SUB of '
           'PCIE_DEVICE_ID_INTEL_DFL and PCIE_DEVICE_ID_INTEL_DFL_VF with '
           'PCI_VENDOR_ID_INTEL, PCIE_SUBDEVICE_ID_INTEL_N6000 and '
           'PCIE_SUBDEVICE_ID_INTEL_N6001); Documentation/ABI/testing/'
           'sysfs-bus-pci (subsystem_vendor, subsystem_device); the PR '
           'slot\'s VFs: OFS "FPGA Interface Manager Technical Reference '
           'Manual for Intel Agilex PCIe Attach: Open FPGA Stack" (Table '
           '1-5 "PF/VF Mapping"); left unbound: OFS "AFU Developer Guide: '
           'OFS for Agilex 7 FPGA PCIe Attach FPGAs" (3.2.3, opae.io init '
           'binds the VFs from no driver)',
    'dev_node': 'drivers/fpga/dfl.c dfl_chrdevs ("dfl-fme", "dfl-port"); '
                'Documentation/fpga/dfl.rst ("/dev/dfl-fme.n", '
                '"/dev/dfl-port.m")',
}

#: include/uapi/linux/fpga-dfl.h: DFL_FPGA_FME_PORT_PR is
#: _IO(DFL_FPGA_MAGIC 0xB6, DFL_FME_BASE 0x80 + 0), taking
#: struct dfl_fpga_fme_port_pr {__u32 argsz, flags, port_id, buffer_size;
#: __u64 buffer_address;}. Written here from the header, not from the
#: sidecar's sidecar.dfl_abi.
FME_PORT_PR = (0xB6 << 8) | (0x80 + 0)
PORT_PR = struct.Struct('=IIIIQ')
#: What the simulated PR engine loads: a bitstream ``PR:<afu id>``.
_PR_BITSTREAM = re.compile(rb'PR:([0-9a-f]{32})')

#: Card family -> PF and VF product ids (vendor 8086), from
#: drivers/fpga/dfl-pci.c. The N3000's VF (0b31) is not in dfl-pci's id
#: table, so no DFL is enumerated on it: no SR-IOV shape for it here.
#: ``subsystem_device`` (subsystem vendor 8086): dfl-pci.c
#: ``PCIE_SUBDEVICE_ID_INTEL_N6000``/``_N6001``; ``ofs_vfs``: the VFs of
#: an OFS card's PR slot (module docstring).
PROFILES = {
    'pac-a10': {'product_id': '09c4', 'vf_product_id': '09c5'},
    'd5005': {'product_id': '0b2b', 'vf_product_id': '0b2c'},
    'n3000': {'product_id': '0b30', 'vf_product_id': None},
    # Not the N6000's shape: an N6000 (OFS) releases no port, several
    # VFs serve its one PR slot (``n6000-ofs``). This is a generic DFL
    # card with dfl-pci's PCIE_DEVICE_ID_INTEL_DFL / _DFL_VF ids (no
    # subsystem ids) in the port-release shape of a PAC (D5005, PAC A10),
    # kept under this name for the tests and documents that use it.
    'n6000': {'product_id': 'bcce', 'vf_product_id': 'bccf'},
    'n6000-ofs': {'product_id': 'bcce', 'vf_product_id': 'bccf',
                  'subsystem_device': '1770', 'ofs_vfs': 3},
    'n6001-ofs': {'product_id': 'bcce', 'vf_product_id': 'bccf',
                  'subsystem_device': '1771', 'ofs_vfs': 3},
}
#: PCI_VENDOR_ID_INTEL: the subsystem vendor of the OFS cards.
SUBSYSTEM_VENDOR = '8086'
#: PCI class 0x12 "processing accelerator" (PCI Code and ID Assignment
#: Specification; include/linux/pci_ids.h PCI_BASE_CLASS_ACCELERATOR).
ACCELERATOR_CLASS = '120000'
FME_ERRORS = ('pcie0_errors', 'pcie1_errors', 'nonfatal_errors',
              'catfatal_errors', 'inject_errors', 'fme_errors',
              'first_error', 'next_error')
PORT_ERRORS = ('errors', 'first_error', 'first_malformed_req')
#: drivers/fpga/dfl.h MAX_DFL_FPGA_PORT_NUM: the ports one FME may have.
MAX_PORTS = 4


@dataclasses.dataclass
class DflPortSim:
    """One port of a card: ``index`` is its number on the card (the
    port's ``id``, dfl-afu-main.c id_show), ``port_id`` its platform
    device's id (``dfl-port.<port_id>``)."""
    index: int
    afu_id: Optional[str] = None
    port_id: int = 0
    pr_region: int = 0
    bridge: int = 0
    vf: Optional[str] = None
    vf_region: Optional[int] = None
    #: What the PR region holds after the card is powered on (the
    #: default AFU its flash image loads; None: blank).
    default_afu_id: Optional[str] = None
    #: The id its platform device has under the PF (released: kept for
    #: when it is assigned back, dfl.c dfl_fpga_cdev_config_ports_pf).
    pf_port_id: int = 0


@dataclasses.dataclass
class DflCard:
    """One DFL card with ``len(ports)`` ports (1 to
    :data:`MAX_PORTS`). The attributes ``afu_id``, ``port_id``,
    ``pr_region``, ``bridge``, ``vf`` and ``vf_region`` are port 0's."""
    profile: str
    pf: str
    compat_id: str
    sriov: bool = False
    fme_id: int = 0
    base_region: int = 0
    manager: int = 0
    ports: list = dataclasses.field(default_factory=list)
    errors: dict = dataclasses.field(default_factory=dict)  # relpath: val
    #: An OFS card's subsystem device id and its PR slot's VFs.
    subsystem_device: Optional[str] = None
    ofs_vfs: list = dataclasses.field(default_factory=list)

    afu_id = property(lambda self: self.ports[0].afu_id)
    port_id = property(lambda self: self.ports[0].port_id)
    pr_region = property(lambda self: self.ports[0].pr_region)
    bridge = property(lambda self: self.ports[0].bridge)
    vf = property(lambda self: self.ports[0].vf)
    vf_region = property(lambda self: self.ports[0].vf_region)

    def port(self, index=0):
        return self.ports[index]

    def port_parent(self, index=0):
        """``(function, base region)`` port ``index`` is under now."""
        port = self.ports[index]
        if self.sriov:
            return port.vf, port.vf_region
        return self.pf, self.base_region

    def handles(self):
        """The PCI function each port is reached through, in port order:
        the PF (one port, no SR-IOV) or the VF serving it."""
        return [self.port_parent(p.index)[0] for p in self.ports]


class DflHost:
    """DFL cards on a :class:`SimulatedHost`; ``dev_dir`` stands in for
    ``/dev`` (regular files, not device nodes)."""

    def __init__(self, host=None):
        """``host``: the :class:`SimulatedHost` the cards are added to;
        it writes them with its own tree (one DflHost a host)."""
        self.host = host or simulator.SimulatedHost()
        if 'dfl' in self.host.extensions:
            raise ValueError('the host has its DFL cards already')
        self.host.extensions['dfl'] = self
        self.cards = []
        self._ids = {'fme': 0, 'port': 0, 'region': 0, 'manager': 0,
                     'bridge': 0}
        self.root = self.dev_dir = None

    def _next(self, kind):
        value = self._ids[kind]
        self._ids[kind] += 1
        return value

    def add_card(self, profile, compat_id=simulator.DEFAULT_COMPAT_ID,
                 afu_id=None, sriov=False, address=None, numa_node=None,
                 ports=1):
        """A card of ``profile`` with ``ports`` ports (SOURCES['ports']),
        each loaded with ``afu_id`` (one id for all, or a list with one
        per port). With ``sriov`` every port is released and served by
        its own VF: VF *i* serves port *i*."""
        ids = PROFILES[profile]
        if sriov and not ids['vf_product_id']:
            raise ValueError('%s: no VF is enumerated by dfl-pci' % profile)
        ofs_vfs = ids.get('ofs_vfs', 0)
        if ofs_vfs and (sriov or ports != 1):
            raise ValueError('%s: one PR slot, no port release' % profile)
        if not 1 <= ports <= MAX_PORTS:
            raise ValueError('a DFL card has 1 to %d ports, not %r'
                             % (MAX_PORTS, ports))
        afu_ids = (list(afu_id) if isinstance(afu_id, (list, tuple))
                   else [afu_id] * ports)
        if len(afu_ids) != ports:
            raise ValueError('%d afu ids for %d ports' % (len(afu_ids),
                                                          ports))
        pf = self.host.add_pf('8086', ids['product_id'], ACCELERATOR_CLASS,
                              address, ports if sriov else ofs_vfs,
                              ids['vf_product_id'], numa_node)
        # Probe order: the PF's base region (dfl.c), then the FME's manager
        # and, port by port, a bridge and a PR region (dfl-fme-pr.c
        # pr_mgmt_init), then the ports; the VFs are enumerated when
        # SR-IOV is enabled, after the release.
        card = DflCard(profile=profile, pf=pf.address, compat_id=compat_id,
                       sriov=sriov, base_region=self._next('region'),
                       fme_id=self._next('fme'),
                       manager=self._next('manager'),
                       subsystem_device=ids.get('subsystem_device'),
                       ofs_vfs=[pf.virtfns[i] for i in range(ofs_vfs)])
        pf.driver = DRIVER
        for index in range(ports):
            card.ports.append(DflPortSim(
                index=index, afu_id=afu_ids[index],
                default_afu_id=afu_ids[index],
                bridge=self._next('bridge'), pr_region=self._next('region')))
        for port in card.ports:
            port.port_id = port.pf_port_id = self._next('port')
        if sriov:
            # The released ports' platform devices keep their ids (dfl.c
            # dfl_id_alloc): the VFs' ports take the next ones.
            for port in card.ports:
                port.port_id = self._next('port')
                port.vf = pf.virtfns[port.index]
                port.vf_region = self._next('region')
                self.host.functions[port.vf].driver = DRIVER
        self.cards.append(card)
        return card

    # -- writing ----------------------------------------------------------

    def _pci(self, address, *parts):
        return self.host._dir(address, *parts)

    def write(self, root, dev_dir=None):
        """Write the host's tree, with each card's DFL devices."""
        self.dev_dir = dev_dir
        return self.host.write(root)

    def write_devices(self, root):
        """What the DFL drivers register, after the host's PCI tree. A
        function removed from the host (hot unplug) takes its devices
        with it."""
        self.root = root
        for card in self.cards:
            self._write_subsystem(card)
            if self.bound(card.pf):
                self._write_card(card)
        return root

    def _write_subsystem(self, card):
        """SOURCES['ofs']: an OFS card's functions' subsystem ids."""
        if not card.subsystem_device:
            return
        for address in [card.pf] + card.ofs_vfs:
            if address in self.host.functions:
                simulator._write_files(self._pci(address), {
                    'subsystem_vendor': '0x' + SUBSYSTEM_VENDOR,
                    'subsystem_device': '0x' + card.subsystem_device})

    def load_state(self, root):
        """Each port's afu_id as a tree written before holds it."""
        saved, self.root = self.root, root
        try:
            for card in self.cards:
                for port in card.ports:
                    if not self._present(card, port):
                        continue
                    path = os.path.join(self.port_dir(card, port.index),
                                        'afu_id')
                    afu_id = simulator._read(path)
                    if afu_id is not None:
                        port.afu_id = None if afu_id == NO_AFU else afu_id
        finally:
            self.root = saved

    def bound(self, address):
        """Whether ``address`` is a function of this host that dfl-pci
        has (its devices are enumerated under it: dfl-pci.c
        cci_pci_probe); another driver (vfio-pci) or none: they are not.
        """
        function = self.host.functions.get(address)
        return function is not None and function.driver == DRIVER

    def _present(self, card, port):
        """Whether port ``port``'s devices are in the tree now."""
        return (self.bound(card.pf) and
                (not card.sriov or self.bound(port.vf)))

    def card_of(self, address):
        """The card whose PF, or a port's VF, is ``address``; or None."""
        return next((c for c in self.cards
                     if address == c.pf or address in c.handles()), None)

    def fme_dir(self, card):
        return self._pci(card.pf, 'fpga_region', 'region%d'
                         % card.base_region, 'dfl-fme.%d' % card.fme_id)

    def port_dir(self, card, index=0):
        function, region = card.port_parent(index)
        return self._pci(function, 'fpga_region', 'region%d' % region,
                         'dfl-port.%d' % card.ports[index].port_id)

    def _class_device(self, parent, kind, name, files):
        """``parent/<kind>/<name>`` with ``device`` -> parent and the
        ``class/<kind>/<name>`` link (drivers/base/core.c)."""
        path = os.path.join(parent, kind, name)
        simulator._write_files(path, files)
        simulator._link('../..', os.path.join(path, 'device'))
        simulator._symlink(path, os.path.join(self.root, 'class', kind,
                                              name))
        return path

    def _platform(self, path):
        simulator._symlink(path, os.path.join(
            self.root, 'bus', 'platform', 'devices', os.path.basename(path)))

    def _write_card(self, card):
        pf_dir = self._pci(card.pf)
        # SOURCES['base_region']: fpga_region_register(info->dev), no
        # compat_id (fpga-region.c compat_id_show gives -ENOENT: absent).
        base = self._class_device(pf_dir, 'fpga_region',
                                  'region%d' % card.base_region, {})
        # SOURCES['fme']
        fme = os.path.join(base, 'dfl-fme.%d' % card.fme_id)
        simulator._write_files(fme, {
            'ports_num': len(card.ports), 'bitstream_id': '0x0',
            'bitstream_metadata': '0x0', 'cache_size': 0,
            'fabric_version': 0, 'socket_id': 0})
        self._platform(fme)
        # SOURCES['fme_errors']: "0x%llx"
        simulator._write_files(os.path.join(fme, 'errors'), {
            name: card.errors.get('fme/' + name, '0x0')
            for name in FME_ERRORS})
        # SOURCES['manager']
        mgr_dev = os.path.join(fme, 'dfl-fme-mgr.%d' % card.fme_id)
        self._platform(mgr_dev)
        self._class_device(mgr_dev, 'fpga_manager', 'fpga%d' % card.manager,
                           {'name': 'DFL FME FPGA Manager',
                            'state': 'unknown', 'status': ''})
        for port in card.ports:
            self._write_pr(card, fme, port)
        for port in card.ports:
            if not self._present(card, port):
                continue
            if card.sriov:
                # SOURCES['pci'] / ['base_region']: the VF's own base
                # region.
                self._class_device(self._pci(port.vf), 'fpga_region',
                                   'region%d' % port.vf_region, {})
            self._write_port(card, port)
        if self.dev_dir:
            # SOURCES['dev_node']
            for name in ['dfl-fme.%d' % card.fme_id] + [
                    'dfl-port.%d' % p.port_id for p in card.ports
                    if self._present(card, p)]:
                simulator._write_files(self.dev_dir, {name: ''})

    def _write_pr(self, card, fme, port):
        """Port ``port``'s bridge and PR region under the FME."""
        # SOURCES['bridge']
        br_dev = os.path.join(fme, 'dfl-fme-br.%d.auto' % port.bridge)
        self._platform(br_dev)
        self._class_device(br_dev, 'fpga_bridge', 'br%d' % port.bridge,
                           {'name': 'DFL FPGA FME Bridge',
                            'state': 'enabled'})
        # SOURCES['pr_region']: "%016llx%016llx" of the manager's compat
        # id, the same for every port of the card.
        region_dev = os.path.join(fme, 'dfl-fme-region.%d' % port.bridge)
        self._platform(region_dev)
        self._class_device(region_dev, 'fpga_region',
                           'region%d' % port.pr_region,
                           {'compat_id': card.compat_id})

    def _write_port(self, card, port):
        path = self.port_dir(card, port.index)
        # SOURCES['port']
        # ``id`` is the port's number on its card (dfl-afu-main.c id_show,
        # PORT_CAP_PORT_NUM), not the platform device's id.
        simulator._write_files(path, {
            'id': port.index, 'afu_id': port.afu_id or NO_AFU,
            'power_state': 0, 'ltr': 0})
        self._platform(path)
        # SOURCES['port_errors']
        simulator._write_files(os.path.join(path, 'errors'), {
            name: card.errors.get(self._error_key(port, 'port/' + name),
                                  '0x0')
            for name in PORT_ERRORS})

    @staticmethod
    def _error_key(port, relpath):
        """Port 0's errors keep the key ``port/<file>``."""
        if port.index and relpath.startswith('port/'):
            return 'port%d/%s' % (port.index, relpath[len('port/'):])
        return relpath

    # -- mutating ---------------------------------------------------------

    def set_afu_id(self, card, afu_id, index=0):
        """What a partial reconfiguration leaves: port ``index``'s new
        afu_id."""
        card.ports[index].afu_id = afu_id
        if (self.root is not None and
                self._present(card, card.ports[index])):
            simulator._write(os.path.join(self.port_dir(card, index),
                                          'afu_id'),
                             (afu_id or NO_AFU) + '\n')

    def find_port(self, address):
        """``(card, port index)`` of the port reached through the PCI
        function ``address``; KeyError if none is."""
        for card in self.cards:
            for index, handle in enumerate(card.handles()):
                if handle == address:
                    return card, index
        raise KeyError('no DFL port is reached through %s' % address)

    def fme_pr(self, fme_name, request, arg):
        """An ioctl on ``/dev/<fme_name>`` as drivers/fpga/dfl-fme-pr.c
        ``fme_pr()`` answers DFL_FPGA_FME_PORT_PR: ``arg`` (the request's
        bytes; its buffer address is read in this process) is checked
        (argsz at least the struct, flags 0, port_id below the FME's
        ports), then the PR engine loads the bitstream into that port:
        one reading ``PR:<afu id>`` sets the port's afu_id, anything else
        is a hardware error (EIO). Raises OSError as the kernel would."""
        card = next((c for c in self.cards
                     if 'dfl-fme.%d' % c.fme_id == fme_name), None)
        if card is None:
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))
        if request != FME_PORT_PR:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        argsz, flags, port_id, size, address = PORT_PR.unpack_from(arg)
        if argsz < PORT_PR.size or flags or port_id >= len(card.ports):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        match = _PR_BITSTREAM.fullmatch(ctypes.string_at(address, size))
        if not match:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.set_afu_id(card, match.group(1).decode(), port_id)
        return 0

    def set_error(self, card, relpath, value):
        """``relpath`` ``fme/<file>``, ``port/<file>`` (port 0) or
        ``port<i>/<file>`` (port *i*) (errors/*)."""
        card.errors[relpath] = value
        if self.root is not None:
            kind, name = relpath.split('/')
            if kind == 'fme':
                base = self.fme_dir(card)
            else:
                index = int(kind[len('port'):] or 0)
                base = self.port_dir(card, index)
            simulator._write(os.path.join(base, 'errors', name),
                             value + '\n')


#: (pattern of a path relative to the sysfs root, SOURCES key); first match.
_RULES = tuple((re.compile(pattern), kind) for pattern, kind in (
    (r'^devices/pci[0-9a-f]{4}:00/[0-9a-f:.]+/subsystem_(vendor|device)$',
     'ofs'),
    (r'/dfl-fme\.\d+/errors(/|$)', 'fme_errors'),
    (r'/dfl-port\.\d+/errors(/|$)', 'port_errors'),
    (r'/dfl-fme-mgr\.\d+(/|$)', 'manager'),
    (r'/dfl-fme-br\.\d+\.auto(/|$)', 'bridge'),
    (r'/dfl-fme-region\.\d+(/|$)', 'pr_region'),
    (r'/dfl-fme\.\d+(/|$)', 'fme'),
    (r'/dfl-port\.\d+(/|$)', 'port'),
    (r'^bus/platform/devices/dfl-', 'platform_link'),
    (r'^devices/pci[0-9a-f]{4}:00/[0-9a-f:.]+/driver$', 'driver'),
    (r'^bus/pci/drivers(/dfl-pci(/[0-9a-f:.]+)?)?$', 'driver'),
    (r'^class/fpga_(region|manager|bridge)(/(region|fpga|br)\d+)?$',
     'class_link'),
    (r'^devices/pci[0-9a-f]{4}:00/[0-9a-f:.]+/fpga_region'
     r'(/region\d+(/device)?)?$', 'base_region'),
    (r'^(devices(/pci[0-9a-f]{4}:00(/[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}'
     r'\.[0-7](/(vendor|device|class|numa_node|sriov_totalvfs|'
     r'sriov_numvfs|physfn|virtfn\d+))?)?)?|bus(/pci(/devices(/[^/]+)?)?)?|'
     r'bus/platform(/devices)?|class)$', 'pci'),
))


def source_of(relpath):
    """The :data:`SOURCES` key of a path this module writes, or None."""
    return abi_sources.source_of(_RULES, relpath)


written_paths = abi_sources.written_paths
