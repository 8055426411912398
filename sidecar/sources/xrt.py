"""Xilinx Alveo cards (XRT) read from sysfs, as XRT's drivers show them.

Sources (Xilinx/XRT): ``src/runtime_src/doc/toc/platforms.rst`` (a card
has two physical functions of one PCI device: PF0, the *management PF*
bound to ``xclmgmt``, and PF1, the *user PF* bound to ``xocl``),
``src/runtime_src/core/pcie/driver/linux/xocl/userpf/xocl_sysfs.c``
(the user PF's ``user_pf``, ``xclbinuuid`` written ``"%pUb"``,
``ready`` written ``"0x%llx"``, ``interface_uuids``) and
``.../xocl/mgmtpf/mgmt-sysfs.c`` (the management PF's ``mgmt_pf``).
No ``fpga_region`` is registered: the loaded function is the user PF's
``xclbinuuid``, and an xclbin is loaded through the user PF
(``xrt-smi program --device <user bdf> --user <file>``).

The management PF is never given to a guest: only the user PF is
reported. While a guest has the user PF (bound to ``vfio-pci``), its
``xocl`` attributes are gone; the card is still found through the
management PF of its slot and XRT's table of user PF ids.

:func:`xclbin_header` reads the header of an xclbin file (``struct
axlf`` of ``src/runtime_src/core/include/xclbin.h``).
"""

import dataclasses
import os
import re
import struct
import uuid as uuidlib
from typing import Optional

from sidecar import model
from sidecar.sources import base

VENDOR_ID = '10ee'
USER_DRIVER = 'xocl'
MGMT_DRIVER = 'xclmgmt'
#: Card -> (management PF, user PF) product ids, from XRT's
#: ``xocl/devices.h`` (XOCL_MGMT_PCI_IDS, XOCL_USER_XDMA_PCI_IDS).
CARDS = {
    'u200': ('5000', '5001'),
    'u250': ('5004', '5005'),
    'u280': ('500c', '500d'),
    'u50': ('5020', '5021'),
    'u55c': ('505c', '505d'),
}
USER_PRODUCT_IDS = frozenset(user for _mgmt, user in CARDS.values())

_UUID = re.compile(r'^(?:0x)?([0-9a-f]{8})-?([0-9a-f]{4})-?([0-9a-f]{4})-?'
                   r'([0-9a-f]{4})-?([0-9a-f]{12})$')

# struct axlf (xclbin.h): m_magic[8], m_signature_length (int32),
# reserved[28], m_keyBlock[256], m_uniqueId (uint64), then struct
# axlf_header at 304: m_length, m_timeStamp, m_featureRomTimeStamp
# (uint64), m_versionPatch (uint16), m_versionMajor, m_versionMinor
# (uint8), m_mode, m_actionMask (uint16), m_interface_uuid[16] at 336,
# m_platformVBNV[64] at 352, uuid[16] at 416, m_debug_bin[16],
# m_numSections (uint32) at 448 (the header's 4 bytes of tail padding
# are not read).
XCLBIN_MAGIC = b'xclbin2\0'
XCLBIN_HEADER = struct.Struct('<8si28s256sQQQQHBBHH16s64s16s16sI')
_HEADER_AT = 304


class XclbinError(ValueError):
    """Not an xclbin this module can read."""


@dataclasses.dataclass(frozen=True)
class Xclbin:
    """What an xclbin's header says (ids: 32 lower-case hex digits)."""
    uuid: Optional[str]            # the xclbin's own: the function
    interface_uuid: Optional[str]  # the shell interface it is built for
    platform_vbnv: str
    length: int
    mode: int


def _hex_id(raw):
    value = raw.hex()
    return None if int(value, 16) == 0 else value


def xclbin_header(data, size=None):
    """The :class:`Xclbin` of ``data`` (the file's first bytes, at least
    :data:`XCLBIN_HEADER` ``.size``); ``size``: the whole file's length,
    checked against the header's ``m_length``.

    Raises XclbinError for anything but an ``xclbin2`` file.
    """
    if len(data) < XCLBIN_HEADER.size:
        raise XclbinError('%d bytes: shorter than an xclbin header (%d)'
                          % (len(data), XCLBIN_HEADER.size))
    fields = XCLBIN_HEADER.unpack_from(data)
    if fields[0] != XCLBIN_MAGIC:
        raise XclbinError('no xclbin2 magic (%r)' % fields[0][:8])
    length, mode = fields[5], fields[11]
    if length < XCLBIN_HEADER.size or (size is not None and length != size):
        raise XclbinError('header length %d, file %s bytes'
                          % (length, size))
    vbnv = fields[14].split(b'\0', 1)[0]
    try:
        vbnv = vbnv.decode('ascii')
    except UnicodeDecodeError:
        raise XclbinError('platform VBNV is not ASCII')
    if not vbnv.isprintable():
        raise XclbinError('platform VBNV %r is not printable' % vbnv)
    return Xclbin(uuid=_hex_id(fields[15]),
                  interface_uuid=_hex_id(fields[13]), platform_vbnv=vbnv,
                  length=length, mode=mode)


def read_xclbin(path):
    """:func:`xclbin_header` of the file at ``path`` (OSError passes)."""
    with open(path, 'rb') as f:
        size = os.fstat(f.fileno()).st_size
        return xclbin_header(f.read(XCLBIN_HEADER.size), size)


def parse_uuid(value, what):
    """A UUID from sysfs (``%pUb`` or 32 hex digits): 32 lower-case hex
    digits, or None when all zero. Raises MalformedDevice otherwise."""
    match = _UUID.match((value or '').strip().lower())
    if not match:
        raise base.MalformedDevice('%s is %r, not a UUID' % (what, value))
    digits = ''.join(match.groups())
    return None if int(digits, 16) == 0 else digits


def format_uuid(digits):
    """32 hex digits as ``%pUb`` writes them (``8-4-4-4-12``)."""
    return str(uuidlib.UUID(hex=digits))


@dataclasses.dataclass(frozen=True)
class XrtCard:
    """One Alveo card: its user PF (reported) and management PF."""
    user: str                 # the user PF's address
    mgmt: str                 # the management PF's address
    path: str                 # the user PF's sysfs directory
    driver: Optional[str]     # the user PF's driver (xocl, or vfio-pci)

    @property
    def attached(self):
        """Whether XRT's user driver has the user PF (its attributes are
        readable): not while a guest has it."""
        return self.driver == USER_DRIVER

    def read(self, name):
        return base.read_file(os.path.join(self.path, name))

    def xclbin_uuid(self):
        """The loaded xclbin's UUID, None when none is; MalformedDevice
        when ``xclbinuuid`` is unreadable or not a UUID."""
        value = self.read('xclbinuuid')
        if value is None:
            raise base.MalformedDevice('xclbinuuid is missing')
        return parse_uuid(value, 'xclbinuuid')

    def interface_uuids(self):
        """The shell's interface UUIDs (one a line), an xclbin's
        ``m_interface_uuid`` must be one of."""
        value = self.read('interface_uuids') or ''
        return tuple(u for u in (parse_uuid(line, 'interface_uuids')
                                 for line in value.split()) if u)


def bound_driver(path):
    """The name of the driver bound to the PCI function at ``path``."""
    try:
        return os.path.basename(os.readlink(os.path.join(path, 'driver')))
    except OSError:
        return None


def _slot(address):
    return address.rsplit('.', 1)[0]


def cards(sysfs_root):
    """``({user PF address: XrtCard}, [(address, why skipped)])``.

    A function is a user PF when bound to ``xocl`` (or showing its
    ``user_pf``), a management PF when bound to ``xclmgmt`` (or showing
    ``mgmt_pf``). A user PF needs the management PF of its slot; a
    function of XRT's user ids bound to another driver is a user PF when
    its slot has a management PF.
    """
    devices = os.path.join(sysfs_root, 'bus', 'pci', 'devices')
    try:
        names = sorted(os.listdir(devices))
    except OSError:
        return {}, []
    users, others, mgmts = {}, {}, {}
    for name in names:
        try:
            model.parse_bdf(name)
        except ValueError:
            continue
        path = os.path.realpath(os.path.join(devices, name))
        driver = bound_driver(path)
        if driver == MGMT_DRIVER or os.path.exists(
                os.path.join(path, 'mgmt_pf')):
            mgmts.setdefault(_slot(name), []).append(name)
        elif driver == USER_DRIVER or os.path.exists(
                os.path.join(path, 'user_pf')):
            users[name] = (path, driver)
        elif base.read_file(os.path.join(path, 'vendor')) == '0x' + \
                VENDOR_ID and (base.read_file(os.path.join(
                    path, 'device')) or '')[2:] in USER_PRODUCT_IDS:
            others[name] = (path, driver)
    found, skipped = {}, []
    for name, (path, driver) in sorted(users.items()):
        mgmt = mgmts.get(_slot(name))
        if not mgmt:
            skipped.append((name, 'user PF (%s) with no management PF '
                            '(%s) in its slot: XRT cannot program it'
                            % (driver, MGMT_DRIVER)))
            continue
        found[name] = XrtCard(user=name, mgmt=mgmt[0], path=path,
                              driver=driver)
    for name, (path, driver) in sorted(others.items()):
        mgmt = mgmts.get(_slot(name))
        if mgmt:
            found[name] = XrtCard(user=name, mgmt=mgmt[0], path=path,
                                  driver=driver)
    paired = {_slot(card.user) for card in found.values()}
    for slot, names in sorted(mgmts.items()):
        if slot not in paired:
            skipped.append((names[0], 'management PF (%s) with no user PF '
                            '(%s) in its slot: nothing to offer (the '
                            'management PF is never given to a guest)'
                            % (MGMT_DRIVER, USER_DRIVER)))
    return found, skipped
