"""The sidecar's privileged operations, run in an oslo.privsep daemon.

These are the only things the sidecar does as root. Each entry point checks
its own arguments again, whatever its caller already checked: the privileged
daemon trusts nothing it is sent.

Errors cross the privsep channel as ``type(exc)(*exc.args)``, so every
exception raised here can be rebuilt from its ``args``: the sidecar's own
errors (the message is the only argument), ``OSError``,
``processutils.ProcessExecutionError`` and ``subprocess.TimeoutExpired``.
"""

import ctypes
import fcntl
import glob
import os
import re
import signal
import stat
import subprocess
import threading

from oslo_concurrency import processutils
from oslo_log import log as logging
from oslo_privsep import capabilities
from oslo_privsep import priv_context

from sidecar import dfl_abi
from sidecar import exception

LOG = logging.getLogger(__name__)

# CAP_DAC_OVERRIDE: write sysfs attributes and open /dev/dfl-fme.N, both
# root's only. CAP_SYS_ADMIN: what vendor programming tools need. Nothing
# is chowned, so no CAP_CHOWN. Operators can
# change the set with [sidecar_privsep] capabilities.
sidecar_pctxt = priv_context.PrivContext(
    'sidecar',
    cfg_section='sidecar_privsep',
    pypath=__name__ + '.sidecar_pctxt',
    capabilities=[capabilities.CAP_DAC_OVERRIDE,
                  capabilities.CAP_SYS_ADMIN],
)

MAX_SYSFS_VALUE = 128
# Used with fullmatch: '$' would also match before a trailing newline.
_PCI_RE = re.compile(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]')
_MDEV_TYPE_RE = re.compile(r'[A-Za-z0-9_.:-]{1,64}')
_UUID_RE = re.compile(
    r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
_DFL_FME_RE = re.compile(r'dfl-fme\.[0-9]{1,6}')
MAX_PR_BITSTREAM = 1024 * 1024 * 1024  # buffer_size is a __u32


def _invalid(name, reason):
    return exception.InvalidArgument(name=name, reason=reason)


def _check_text(name, value):
    if not isinstance(value, str) or not value:
        raise _invalid(name, 'must be a non-empty string')
    if '\0' in value:
        raise _invalid(name, 'contains a NUL character')


def _check_abs_dir(name, path):
    _check_text(name, path)
    if not os.path.isabs(path):
        raise _invalid(name, '%r is not an absolute path' % path)
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise _invalid(name, '%r is not a directory' % path)
    return real


def _check_address(address):
    if not isinstance(address, str) or not _PCI_RE.fullmatch(address):
        raise _invalid('PCI address', '%r is not of the form dddd:bb:ss.f '
                       '(lower-case hex)' % (address,))


def _check_mdev_uuid(mdev_uuid):
    if not isinstance(mdev_uuid, str) or not _UUID_RE.fullmatch(mdev_uuid):
        raise _invalid('mdev UUID', '%r is not a canonical lower-case UUID'
                       % (mdev_uuid,))


def _check_mdev_type(mdev_type):
    if (not isinstance(mdev_type, str) or
            not _MDEV_TYPE_RE.fullmatch(mdev_type) or
            set(mdev_type) == {'.'}):
        raise _invalid('mdev type', '%r must be 1-64 characters among '
                       'A-Z a-z 0-9 _ . : - and not a dot path'
                       % (mdev_type,))


def _resolve_under(root, relpath):
    """Return the real path of ``root/relpath``, refusing any escape."""
    real_root = _check_abs_dir('sysfs root', root)
    _check_text('sysfs path', relpath)
    if os.path.isabs(relpath):
        raise _invalid('sysfs path', '%r is absolute; it must be relative '
                       'to the sysfs root' % relpath)
    target = os.path.realpath(os.path.join(real_root, relpath))
    if (target == real_root or
            os.path.commonpath([real_root, target]) != real_root):
        raise _invalid('sysfs path', '%r resolves to %s, outside %s'
                       % (relpath, target, real_root))
    return target


def _check_sysfs_value(value):
    """What a value written to a sysfs attribute must be: text, one line,
    at most :data:`MAX_SYSFS_VALUE` characters."""
    _check_text('sysfs value', value)
    if '\n' in value or '\r' in value:
        raise _invalid('sysfs value', 'contains a line break')
    if len(value) > MAX_SYSFS_VALUE:
        raise _invalid('sysfs value', 'longer than %d characters'
                       % MAX_SYSFS_VALUE)


def _write_sysfs(root, relpath, value):
    _check_sysfs_value(value)
    target = _resolve_under(root, relpath)
    # No O_CREAT: a sysfs attribute that is not there is an error, never a
    # file to make. O_NOFOLLOW: the path was resolved above.
    fd = os.open(target, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW |
                 os.O_CLOEXEC)
    try:
        data = value.encode('utf-8')
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(0, 'short write (%d of %d bytes) to %s'
                          % (written, len(data), target))
    finally:
        os.close(fd)
    LOG.info('Wrote %(value)r to %(path)s', {'value': value, 'path': target})


@sidecar_pctxt.entrypoint
def run_command(argv, timeout):
    """Run ``argv`` (no shell) and return ``(stdout, stderr)``.

    Raises processutils.ProcessExecutionError on a non-zero exit,
    subprocess.TimeoutExpired after ``timeout`` seconds (the command and its
    process group are killed first) and OSError when it cannot be started.
    """
    if (not isinstance(argv, (list, tuple)) or not argv or
            not all(isinstance(a, str) for a in argv)):
        raise _invalid('command', 'must be a non-empty list of strings')
    if not argv[0] or any('\0' in a for a in argv):
        raise _invalid('command', 'empty program name or NUL character')
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
            or timeout <= 0):
        raise _invalid('timeout', '%r is not a positive number of seconds'
                       % (timeout,))
    timed_out = []
    timers = []

    def start_timer(proc):
        # Not processutils' own timeout: it leaves the command running, and
        # under eventlet it raises a TimeoutExpired of another class.
        def kill():
            timed_out.append(True)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timers.append(timer)
        timer.start()

    def stop_timer(proc):
        for timer in timers:
            timer.cancel()

    try:
        return processutils.execute(*argv, preexec_fn=os.setsid,
                                    on_execute=start_timer,
                                    on_completion=stop_timer)
    except processutils.ProcessExecutionError:
        if timed_out:
            raise subprocess.TimeoutExpired(list(argv), timeout)
        raise
    finally:
        stop_timer(None)


def _mdev_error(mdev_uuid, address, err):
    reason = err.strerror or str(err)
    return exception.MdevError(uuid=mdev_uuid, address=address,
                               reason=reason)


@sidecar_pctxt.entrypoint
def create_mdev(root, parent_address, mdev_type, mdev_uuid):
    """Create mdev ``mdev_uuid`` of ``mdev_type`` on ``parent_address``.

    Raises InvalidArgument for a bad argument and MdevError when the kernel
    refuses (type not supported, no instance left, UUID in use).
    """
    _check_address(parent_address)
    _check_mdev_type(mdev_type)
    _check_mdev_uuid(mdev_uuid)
    relpath = os.path.join('class', 'mdev_bus', parent_address,
                           'mdev_supported_types', mdev_type, 'create')
    try:
        _write_sysfs(root, relpath, mdev_uuid)
    except FileNotFoundError:
        real_root = os.path.realpath(root)
        if not os.path.isdir(os.path.join(real_root, 'class', 'mdev_bus',
                                          parent_address)):
            reason = 'the device is not an mdev parent'
        else:
            reason = 'the device offers no mdev type %s' % mdev_type
        raise exception.MdevError(uuid=mdev_uuid, address=parent_address,
                                  reason=reason)
    except OSError as e:
        raise _mdev_error(mdev_uuid, parent_address, e)


@sidecar_pctxt.entrypoint
def remove_mdev(root, mdev_uuid):
    """Remove the mdev ``mdev_uuid``; MdevError if it does not exist."""
    real_root = _check_abs_dir('sysfs root', root)
    _check_mdev_uuid(mdev_uuid)
    device = os.path.join('bus', 'mdev', 'devices', mdev_uuid)
    parent = os.path.basename(os.path.dirname(
        os.path.realpath(os.path.join(real_root, device))))
    if not _PCI_RE.fullmatch(parent):
        parent = 'its parent device'
    try:
        _write_sysfs(root, os.path.join(device, 'remove'), '1')
    except FileNotFoundError:
        raise exception.MdevError(uuid=mdev_uuid, address=parent,
                                  reason='no such mdev')
    except OSError as e:
        raise _mdev_error(mdev_uuid, parent, e)


@sidecar_pctxt.entrypoint
def dfl_port_pr(dev_dir, fme_name, port_id, bitstream_path, offset=0):
    """Partially reconfigure port ``port_id`` of the DFL card whose FME is
    ``<dev_dir>/<fme_name>`` (``/dev/dfl-fme.N``) with the raw bitstream
    in ``bitstream_path`` from byte ``offset`` on (behind an OPAE GBS
    header): the ``DFL_FPGA_FME_PORT_PR`` ioctl (:mod:`sidecar.dfl_abi`).
    Raises OSError as the kernel answers (EIO: the hardware reported an
    error, see the FME manager's ``status``).
    """
    dev_dir = _check_abs_dir('DFL device directory', dev_dir)
    if not isinstance(fme_name, str) or not _DFL_FME_RE.fullmatch(fme_name):
        raise _invalid('FME', '%r is not dfl-fme.N' % (fme_name,))
    if isinstance(port_id, bool) or not isinstance(port_id, int) or \
            not 0 <= port_id < 8:
        raise _invalid('port id', '%r is not 0 to 7' % (port_id,))
    _check_text('bitstream', bitstream_path)
    if not os.path.isabs(bitstream_path):
        raise _invalid('bitstream', '%r is not absolute' % bitstream_path)
    if isinstance(offset, bool) or not isinstance(offset, int) or \
            not 0 <= offset <= MAX_PR_BITSTREAM:
        raise _invalid('bitstream offset', '%r is not 0 to %d'
                       % (offset, MAX_PR_BITSTREAM))
    with open(bitstream_path, 'rb') as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise _invalid('bitstream', 'not a regular file')
        f.seek(offset)
        data = f.read(MAX_PR_BITSTREAM + 1)
    if not data or len(data) > MAX_PR_BITSTREAM:
        raise _invalid('bitstream', 'empty or larger than %d bytes'
                       % MAX_PR_BITSTREAM)
    buf = ctypes.create_string_buffer(data, len(data))
    request = dfl_abi.pack_port_pr(port_id, ctypes.addressof(buf),
                                   len(data))
    fd = os.open(os.path.join(dev_dir, fme_name), os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, dfl_abi.DFL_FPGA_FME_PORT_PR, request)
    finally:
        os.close(fd)
        del buf


def _fme_device(dev_dir, fme_name):
    dev_dir = _check_abs_dir('DFL device directory', dev_dir)
    if not isinstance(fme_name, str) or not _DFL_FME_RE.fullmatch(fme_name):
        raise _invalid('FME', '%r is not dfl-fme.N' % (fme_name,))
    return os.path.join(dev_dir, fme_name)


@sidecar_pctxt.entrypoint
def dfl_port_config(dev_dir, fme_name, port_id, assign):
    """Assign port ``port_id`` of the card whose FME is
    ``<dev_dir>/<fme_name>`` back to the PF (``assign`` True:
    ``DFL_FPGA_FME_PORT_ASSIGN``) or release it for a VF
    (``DFL_FPGA_FME_PORT_RELEASE``), :mod:`sidecar.dfl_abi`. Raises
    OSError as the kernel answers (EBUSY: already so, or open; ENODEV: no
    such port)."""
    path = _fme_device(dev_dir, fme_name)
    if isinstance(port_id, bool) or not isinstance(port_id, int) or \
            not 0 <= port_id < 8:
        raise _invalid('port id', '%r is not 0 to 7' % (port_id,))
    if not isinstance(assign, bool):
        raise _invalid('assign', 'not a boolean')
    request = (dfl_abi.DFL_FPGA_FME_PORT_ASSIGN if assign
               else dfl_abi.DFL_FPGA_FME_PORT_RELEASE)
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, request, dfl_abi.pack_port_id(port_id))
    finally:
        os.close(fd)
    LOG.info('%s port %d of %s', 'Assigned' if assign else 'Released',
             port_id, fme_name)


@sidecar_pctxt.entrypoint
def set_sriov_numvfs(root, address, count):
    """Write ``count`` (0 to 256) to ``sriov_numvfs`` of PF ``address``
    (Documentation/ABI/testing/sysfs-bus-pci; drivers/pci/iov.c
    ``sriov_numvfs_store``: EBUSY while VFs are enabled and ``count`` is
    not 0). Raises InvalidArgument, or OSError as the kernel answers."""
    _check_address(address)
    if isinstance(count, bool) or not isinstance(count, int) or \
            not 0 <= count <= 256:
        raise _invalid('VF count', '%r is not 0 to 256' % (count,))
    _write_sysfs(root, os.path.join('bus', 'pci', 'devices', address,
                                    'sriov_numvfs'), str(count))


@sidecar_pctxt.entrypoint
def qat_heartbeat(root, address):
    """``[(debugfs directory, status)]`` of the QAT device ``address``:
    each ``<root>/kernel/debug/qat_<device>_<address>/heartbeat/status``
    (Documentation/ABI/testing/debugfs-driver-qat: 0 healthy, -1
    unresponsive; reading it polls the device). debugfs is root's only
    (mode 0700), hence here. Nothing when debugfs does not show it."""
    real_root = _check_abs_dir('sysfs root', root)
    _check_address(address)
    found = []
    for path in sorted(glob.glob(os.path.join(
            real_root, 'kernel', 'debug', 'qat_*_' + address, 'heartbeat',
            'status'))):
        real = os.path.realpath(path)
        if os.path.commonpath([real_root, real]) != real_root:
            continue
        with open(real) as f:
            found.append((os.path.basename(os.path.dirname(
                os.path.dirname(path))), f.read(64).strip()))
    return found


#: The DFL error files the kernel clears when their value is written
#: back (sysfs-platform-dfl-fme: fme_errors, pcie0_errors, pcie1_errors;
#: sysfs-platform-dfl-port: errors).
_DFL_ERRORS_RE = re.compile(
    r'(.*/)?(dfl-fme\.[0-9]{1,6}/errors/(fme|pcie0|pcie1)_errors|'
    r'dfl-port\.[0-9]{1,6}/errors/errors)')
_DFL_ERROR_VALUE_RE = re.compile(r'0x[0-9a-f]{1,16}')


@sidecar_pctxt.entrypoint
def dfl_clear_errors(root, relpath, value):
    """Clear DFL errors: write ``value`` (``0x...``, the value read) to
    the error file ``relpath`` under the sysfs root, as the kernel's ABI
    asks (drivers/fpga/dfl-fme-error.c ``fme_errors_store``,
    ``pcie0_errors_store``, ``pcie1_errors_store``; dfl-afu-error.c
    ``errors_store``: ``kstrtou64(buf, 0)``, cleared only when the value
    matches, else EINVAL). Only those four files, resolved under the
    root, are written. Raises InvalidArgument, or OSError as the kernel
    answers (EBUSY: the port is in a low power state; ETIMEDOUT)."""
    _check_text('DFL error value', value)
    if not _DFL_ERROR_VALUE_RE.fullmatch(value) or int(value, 16) == 0:
        raise _invalid('DFL error value', '%r is not a non-zero 0x... '
                       'value' % (value,))
    target = _resolve_under(root, relpath)
    if not _DFL_ERRORS_RE.fullmatch(target):
        raise _invalid('DFL error file', '%r is no DFL error file the '
                       'kernel clears' % (relpath,))
    _write_sysfs(root, os.path.relpath(target, os.path.realpath(root)),
                 value)


_VGPU_TYPE_ID_RE = re.compile(r'[1-9][0-9]{0,8}')
_VGPU_TYPE_LINE_RE = re.compile(r'\s*([0-9]{1,9})\s*:.*')


@sidecar_pctxt.entrypoint
def set_vgpu_type(root, address, type_id):
    """Write vGPU type ``type_id`` into ``nvidia/current_vgpu_type`` of VF
    ``address`` (NVIDIA vGPU 17+, vgpu-device-manager
    ``pkg/vgpu/vfio/sysfs.go``).

    The path is built from the checked address alone; ``type_id`` must be
    a positive decimal that the VF's ``nvidia/creatable_vgpu_types`` lists
    now, and the VF must have no type (its current type 0): a type is
    never replaced here. Raises InvalidArgument, DeviceBusy, or OSError
    from the write (the driver answers EINVAL for a type it cannot host).
    """
    _check_address(address)
    if (not isinstance(type_id, str) or
            not _VGPU_TYPE_ID_RE.fullmatch(type_id)):
        raise _invalid('vGPU type id', '%r is not a positive decimal type '
                       'id' % (type_id,))
    vf_dir = os.path.join('bus', 'pci', 'devices', address, 'nvidia')
    creatable_path = _resolve_under(
        root, os.path.join(vf_dir, 'creatable_vgpu_types'))
    current_path = _resolve_under(
        root, os.path.join(vf_dir, 'current_vgpu_type'))
    with open(creatable_path) as f:
        listed = {str(int(m.group(1))) for m in
                  (_VGPU_TYPE_LINE_RE.fullmatch(line.rstrip('\n'))
                   for line in f.read(65536).splitlines()) if m}
    if type_id not in listed:
        raise _invalid('vGPU type id', '%s is not in the creatable_vgpu_types '
                       'of %s now' % (type_id, address))
    with open(current_path) as f:
        current = f.read(64).strip()
    if current != '0':
        raise exception.DeviceBusy(
            address=address, reason='it holds vGPU type %s; a type is never '
                                    'replaced' % current)
    _write_sysfs(root, os.path.relpath(current_path,
                                       os.path.realpath(root)), type_id)


@sidecar_pctxt.entrypoint
def clear_vgpu_type(root, address, type_id):
    """Write ``0`` into ``nvidia/current_vgpu_type`` of VF ``address``,
    which removes its vGPU (vgpu-device-manager ``pkg/vgpu/vfio/sysfs.go``),
    only while it holds ``type_id``: the type the caller set and checked
    nobody uses. Returns False (nothing written) when it holds another
    type or none. Raises InvalidArgument, or OSError from the write.
    """
    _check_address(address)
    if (not isinstance(type_id, str) or
            not _VGPU_TYPE_ID_RE.fullmatch(type_id)):
        raise _invalid('vGPU type id', '%r is not a positive decimal type '
                       'id' % (type_id,))
    current_path = _resolve_under(root, os.path.join(
        'bus', 'pci', 'devices', address, 'nvidia', 'current_vgpu_type'))
    with open(current_path) as f:
        current = f.read(64).strip()
    if current != type_id:
        return False
    _write_sysfs(root, os.path.relpath(current_path,
                                       os.path.realpath(root)), '0')
    return True
