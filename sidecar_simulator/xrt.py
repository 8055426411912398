"""Xilinx Alveo cards (U200, U250, U280, U50, U55C) as XRT's drivers show
them, written from XRT's sources and documents, not from what the sidecar
reads.

A card is data (:data:`PROFILES`, :class:`AlveoCard`); :class:`XrtHost`
adds its two PCI functions to a :class:`sidecar_simulator.host.
SimulatedHost` and writes, after the host's own tree, what ``xclmgmt``
and ``xocl`` add. Every path and value names its source in Xilinx/XRT
(``src/runtime_src/...``) or the kernel; :data:`SOURCES` maps each kind
of path to it and :func:`source_of` finds the kind of a written path, so
a test can check that nothing lacks a source. For a card in slot ``S``::

    S.0/                                management PF (PF0)
        driver -> bus/pci/drivers/xclmgmt
        mgmt_pf, slot                   mgmtpf/mgmt-sysfs.c
    S.1/                                user PF (PF1)
        driver -> bus/pci/drivers/xocl
        user_pf, xclbinuuid, ready,     userpf/xocl_sysfs.c
        interface_uuids, logic_uuids
    bus/pci/drivers/{xclmgmt,xocl}/<bdf> -> the function

No ``fpga_region`` or ``fpga_manager`` is written: XRT registers no
region, and the manager ``xocl/subdev/fmgr.c`` may register is not how
an xclbin is loaded (``xrt-smi program``, :mod:`sidecar_simulator.tools.
xrt_smi`). :func:`make_xclbin` writes an xclbin header (``struct axlf``
of ``src/runtime_src/core/include/xclbin.h``) carrying a UUID.
"""

import dataclasses
import os
import re
import struct
from typing import Optional

from sidecar.sources import xrt as xrt_source
from sidecar_simulator import abi_sources
from sidecar_simulator import host as simulator

_DRIVER = 'src/runtime_src/core/pcie/driver/linux/xocl/'

#: kind of path -> its source.
SOURCES = {
    'pci': 'Documentation/ABI/testing/sysfs-bus-pci (vendor, device, '
           'class, numa_node); ids: XRT ' + _DRIVER + 'devices.h '
           '(XOCL_MGMT_PCI_IDS, XOCL_USER_XDMA_PCI_IDS); class 0x1200 '
           '"Processing accelerators": the lspci sample of XRT '
           'src/runtime_src/doc/toc/p2p.rst; PF0 management, PF1 user: '
           'XRT src/runtime_src/doc/toc/platforms.rst',
    'driver_link': 'drivers/base/dd.c driver_sysfs_add (the device\'s '
                   '"driver" link, the driver\'s link to the device); '
                   'Documentation/ABI/testing/sysfs-bus-pci '
                   '(/sys/bus/pci/drivers/.../bind); driver names: XRT '
                   + _DRIVER + 'userpf/xocl_drv.c ("xocl"), '
                   'mgmtpf/mgmt-core.c ("xclmgmt"); "vfio-pci": '
                   'drivers/vfio/pci/vfio_pci.c',
    'user_pf': 'XRT ' + _DRIVER + 'userpf/xocl_sysfs.c (user_pf: empty; '
               'xclbinuuid "%pUb\\n"; ready "0x%llx\\n"; interface_uuids '
               'and logic_uuids: the shell\'s, one a line)',
    'mgmt_pf': 'XRT ' + _DRIVER + 'mgmtpf/mgmt-sysfs.c (mgmt_pf: empty; '
               'slot "%d\\n" PCI_SLOT)',
}

#: Card -> the platform it is flashed with (AMD's Alveo platform names)
#: and a simulated shell interface UUID (a real shell's is in its
#: partition metadata; ``interface_uuids`` shows it).
PROFILES = {
    'u200': ('xilinx_u200_gen3x16_xdma_2_202110_1',
             '15fe0d1f6e6a1c1e5d4a2f8e3b7c9a01'),
    'u250': ('xilinx_u250_gen3x16_xdma_4_1_202210_1',
             '25fe0d1f6e6a1c1e5d4a2f8e3b7c9a02'),
    'u280': ('xilinx_u280_gen3x16_xdma_1_202211_1',
             '35fe0d1f6e6a1c1e5d4a2f8e3b7c9a03'),
    'u50': ('xilinx_u50_gen3x16_xdma_5_202210_1',
            '45fe0d1f6e6a1c1e5d4a2f8e3b7c9a04'),
    'u55c': ('xilinx_u55c_gen3x16_xdma_3_202210_1',
             '55fe0d1f6e6a1c1e5d4a2f8e3b7c9a05'),
}
#: PCI class 0x12 "processing accelerator" (include/linux/pci_ids.h).
ACCELERATOR_CLASS = '120000'
NO_XCLBIN = '00000000-0000-0000-0000-000000000000'
#: enum XCLBIN_MODE (xclbin.h): a partial reconfiguration of the user
#: region, as xclbins for these shells are.
XCLBIN_PR = 1


@dataclasses.dataclass
class AlveoCard:
    profile: str
    mgmt: str
    user: str
    xclbin_uuid: Optional[str] = None   # 32 hex digits, None: none
    interface_uuid: str = ''
    ready: bool = True
    user_driver: str = xrt_source.USER_DRIVER

    @property
    def platform_vbnv(self):
        return PROFILES[self.profile][0]


class XrtHost:
    """Alveo cards on a :class:`SimulatedHost`."""

    def __init__(self, host=None):
        """``host``: the :class:`SimulatedHost` the cards are added to;
        it writes them with its own tree (one XrtHost a host)."""
        self.host = host or simulator.SimulatedHost()
        if 'xrt' in self.host.extensions:
            raise ValueError('the host has its Alveo cards already')
        self.host.extensions['xrt'] = self
        self.cards = []
        self.root = None

    def add_card(self, profile, xclbin_uuid=None, address=None,
                 numa_node=None, interface_uuid=None):
        """A card whose management PF is ``address`` (function 0)."""
        mgmt_id, user_id = xrt_source.CARDS[profile]
        mgmt = self.host.add_pf(xrt_source.VENDOR_ID, mgmt_id,
                                ACCELERATOR_CLASS, address,
                                numa_node=numa_node)
        if not mgmt.address.endswith('.0'):
            raise ValueError('the management PF is function 0')
        user = self.host.add_pf(xrt_source.VENDOR_ID, user_id,
                                ACCELERATOR_CLASS, mgmt.address[:-1] + '1',
                                numa_node=numa_node)
        card = AlveoCard(profile=profile, mgmt=mgmt.address,
                         user=user.address, xclbin_uuid=xclbin_uuid,
                         interface_uuid=(interface_uuid or
                                         PROFILES[profile][1]))
        self.cards.append(card)
        return card

    def write(self, root):
        """Write the host's tree, with what XRT's drivers add."""
        return self.host.write(root)

    def write_devices(self, root):
        """What XRT's drivers add, after the host's PCI tree."""
        self.root = root
        for card in self.cards:
            if {card.mgmt, card.user} <= set(self.host.functions):
                self._write_card(card)
        return root

    def load_state(self, root):
        """Each user PF's loaded xclbin as a tree written before holds it
        (the card keeps it while the services restart)."""
        for card in self.cards:
            path = os.path.join(self.host._dir(card.user), 'xclbinuuid')
            value = simulator._read(path)
            if value is not None:
                value = value.replace('-', '')
                card.xclbin_uuid = (None if value == '0' * 32
                                    else value)

    def _pci(self, address, *parts):
        return self.host._dir(address, *parts)

    def _bind(self, address, driver):
        # SOURCES['driver_link']
        drivers = os.path.join(self.root, 'bus', 'pci', 'drivers')
        simulator._symlink(os.path.join(drivers, driver),
                           self._pci(address, 'driver'))
        simulator._symlink(self._pci(address),
                           os.path.join(drivers, driver, address))

    def _write_card(self, card):
        slot = int(card.mgmt.rsplit(':', 1)[1].split('.')[0], 16)
        self._bind(card.mgmt, xrt_source.MGMT_DRIVER)
        # SOURCES['mgmt_pf']
        simulator._write_files(self._pci(card.mgmt), {'mgmt_pf': '',
                                                      'slot': slot})
        self._write_user(card)

    def _write_user(self, card):
        user = self._pci(card.user)
        drivers = os.path.join(self.root, 'bus', 'pci', 'drivers')
        stale = [os.path.join(user, name) for name in (
            'user_pf', 'xclbinuuid', 'ready', 'interface_uuids',
            'logic_uuids', 'driver')] + [
            os.path.join(drivers, name, card.user)
            for name in (xrt_source.USER_DRIVER, 'vfio-pci')]
        for path in stale:
            if os.path.lexists(path):
                os.unlink(path)
        if card.user_driver != xrt_source.USER_DRIVER:
            # Bound elsewhere (vfio-pci: a guest has it): xocl's
            # attributes are gone.
            self._bind(card.user, card.user_driver)
            return
        self._bind(card.user, xrt_source.USER_DRIVER)
        # SOURCES['user_pf']
        simulator._write_files(user, {
            'user_pf': '',
            'xclbinuuid': (xrt_source.format_uuid(card.xclbin_uuid)
                           if card.xclbin_uuid else NO_XCLBIN),
            'ready': '0x1' if card.ready else '0x0',
            'interface_uuids': card.interface_uuid,
            'logic_uuids': card.interface_uuid[::-1]})

    # -- mutating ---------------------------------------------------------

    def set_xclbin(self, card, xclbin_uuid):
        """What loading an xclbin leaves: the user PF's new xclbinuuid."""
        card.xclbin_uuid = xclbin_uuid
        if self.root is not None:
            self._write_user(card)

    def bind_user(self, card, driver):
        """The user PF bound to ``driver`` (``vfio-pci``: given to a
        guest; ``xocl``: back)."""
        card.user_driver = driver
        if self.root is not None:
            self._write_user(card)

    def set_ready(self, card, ready):
        card.ready = ready
        if self.root is not None:
            self._write_user(card)


def make_xclbin(xclbin_uuid, interface_uuid, platform_vbnv, payload=b'',
                magic=xrt_source.XCLBIN_MAGIC):
    """The bytes of an xclbin (``struct axlf``, no section) carrying
    ``xclbin_uuid`` for the shell ``interface_uuid`` (hex digits)."""
    header = xrt_source.XCLBIN_HEADER
    size = header.size + 4 + len(payload)   # the header's tail padding
    data = header.pack(
        magic, -1, b'\xff' * 28, b'\xff' * 256, 0, size, 0, 0,
        0, 2, 1, XCLBIN_PR, 0, bytes.fromhex(interface_uuid),
        platform_vbnv.encode('ascii'), bytes.fromhex(xclbin_uuid),
        b'', 0)
    return data + struct.pack('<I', 0) + payload


#: (pattern of a path relative to the sysfs root, SOURCES key); first match.
_RULES = tuple((re.compile(pattern), kind) for pattern, kind in (
    (r'/[0-9a-f:.]+/(user_pf|xclbinuuid|ready|interface_uuids|'
     r'logic_uuids)$', 'user_pf'),
    (r'/[0-9a-f:.]+/(mgmt_pf|slot)$', 'mgmt_pf'),
    (r'^devices/pci[0-9a-f]{4}:00/[0-9a-f:.]+/driver$', 'driver_link'),
    (r'^bus/pci/drivers(/(xocl|xclmgmt|vfio-pci)(/[0-9a-f:.]+)?)?$',
     'driver_link'),
    (r'^(devices(/pci[0-9a-f]{4}:00(/[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}'
     r'\.[0-7](/(vendor|device|class|numa_node))?)?)?|'
     r'bus(/pci(/devices(/[^/]+)?)?)?)$', 'pci'),
))


def source_of(relpath):
    """The :data:`SOURCES` key of a path this module writes, or None."""
    return abi_sources.source_of(_RULES, relpath)


written_paths = abi_sources.written_paths
