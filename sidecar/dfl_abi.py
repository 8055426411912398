"""The DFL ioctl ABI the sidecar uses, from the kernel's
``include/uapi/linux/fpga-dfl.h`` (checked byte for byte against the
system's header by tests/unit/sidecar/test_dfl_abi.py).

``DFL_FPGA_FME_PORT_PR`` (``_IO(DFL_FPGA_MAGIC, DFL_FME_BASE + 0)``) on
``/dev/dfl-fme.N`` reconfigures port ``port_id`` with the buffer given::

    struct dfl_fpga_fme_port_pr {
        __u32 argsz;          /* Structure length */
        __u32 flags;          /* Zero for now */
        __u32 port_id;
        __u32 buffer_size;
        __u64 buffer_address; /* Userspace address to the buffer for PR */
    };

``DFL_FPGA_FME_PORT_RELEASE`` and ``DFL_FPGA_FME_PORT_ASSIGN``
(``_IOW(DFL_FPGA_MAGIC, DFL_FME_BASE + 1 / + 2, int)``) on the same
device take a pointer to an ``int`` port id (drivers/fpga/dfl-fme-main.c
``fme_hdr_ioctl_release_port`` / ``_assign_port``: ``get_user(port_id,
(int __user *)arg)``, then drivers/fpga/dfl.c
``dfl_fpga_cdev_release_port`` / ``dfl_fpga_cdev_assign_port``: ENODEV
for no such port, EBUSY when it is already released / assigned or, for
a release, open). The kernel's comment on the assign: "This is a
mandatory step after disable SRIOV support".

The kernel (drivers/fpga/dfl-fme-pr.c ``fme_pr``) refuses ``argsz``
below the structure's size or non-zero ``flags`` (EINVAL), a port id
beyond the card's ports (EINVAL), and returns EIO when the hardware
reported an error (the FME manager's ``status`` then says which).
"""

import struct

DFL_FPGA_MAGIC = 0xB6
DFL_FME_BASE = 0x80
# _IO(type, nr) = (type << _IOC_TYPESHIFT) | (nr << _IOC_NRSHIFT), no size
# and no direction (include/uapi/asm-generic/ioctl.h).
_IOC_TYPESHIFT = 8
DFL_FPGA_FME_PORT_PR = (DFL_FPGA_MAGIC << _IOC_TYPESHIFT) | (DFL_FME_BASE + 0)
#: Native alignment: u32 x4 then u64 at offset 16, 24 bytes, no padding.
PORT_PR_FORMAT = '=IIIIQ'
PORT_PR_SIZE = struct.calcsize(PORT_PR_FORMAT)
PORT_PR_FIELDS = ('argsz', 'flags', 'port_id', 'buffer_size',
                  'buffer_address')


# _IOW(type, nr, size) (include/uapi/asm-generic/ioctl.h): direction
# _IOC_WRITE (1) at bit 30, the argument's size at bit 16.
_IOC_SIZESHIFT = 16
_IOC_DIRSHIFT = 30
_IOC_WRITE = 1
#: The argument of RELEASE and ASSIGN: one C ``int``.
PORT_ID_FORMAT = '=i'


def _iow(nr, size):
    return ((_IOC_WRITE << _IOC_DIRSHIFT) | (size << _IOC_SIZESHIFT) |
            (DFL_FPGA_MAGIC << _IOC_TYPESHIFT) | nr)


DFL_FPGA_FME_PORT_RELEASE = _iow(DFL_FME_BASE + 1,
                                 struct.calcsize(PORT_ID_FORMAT))
DFL_FPGA_FME_PORT_ASSIGN = _iow(DFL_FME_BASE + 2,
                                struct.calcsize(PORT_ID_FORMAT))


def pack_port_id(port_id):
    """The ``int`` RELEASE and ASSIGN read."""
    return struct.pack(PORT_ID_FORMAT, port_id)


def pack_port_pr(port_id, buffer_address, buffer_size):
    """The bytes of a ``struct dfl_fpga_fme_port_pr``."""
    return struct.pack(PORT_PR_FORMAT, PORT_PR_SIZE, 0, port_id,
                       buffer_size, buffer_address)


def unpack_port_pr(data):
    """``{field: value}`` of a packed request (what the kernel reads)."""
    return dict(zip(PORT_PR_FIELDS, struct.unpack(
        PORT_PR_FORMAT, data[:PORT_PR_SIZE])))


def field_offsets():
    """``{field: (offset, size)}`` as :data:`PORT_PR_FORMAT` lays them."""
    result, offset = {}, 0
    for name, code in zip(PORT_PR_FIELDS, PORT_PR_FORMAT[1:]):
        size = struct.calcsize('=' + code)
        result[name] = (offset, size)
        offset += size
    return result
