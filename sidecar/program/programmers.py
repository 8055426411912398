"""Writing a bitstream to an FPGA.

A programmer is chosen with ``[fpga] programmer`` and loaded by stevedore
from the ``nova_cyborg.sidecar.programmers`` namespace. Everything that
needs root goes through :mod:`sidecar.privileged`.
"""

import abc
import glob
import os
import re
import shlex
import subprocess
import time

from oslo_concurrency import processutils
from oslo_log import log as logging
from stevedore import driver
from stevedore import exception as stevedore_exc

from sidecar import exception
from sidecar import model
from sidecar import privileged

LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_cyborg.sidecar.programmers'
_PLACEHOLDER_RE = re.compile(
    r'\{(address|bitstream|segment|bus|device|function)\}')
_DRIVER_NAME_RE = re.compile(r'^[A-Za-z0-9_]{1,32}$')
_STDERR_TAIL = 500


def _check_address(address):
    try:
        model.parse_bdf(address)
        if address.endswith('\n'):  # model's pattern ends with '$'
            raise ValueError(address)
    except ValueError:
        raise exception.InvalidArgument(
            name='PCI address',
            reason='%r is not of the form dddd:bb:ss.f' % (address,))


class Programmer(metaclass=abc.ABCMeta):
    """Write a bitstream file to the FPGA at one PCI function."""

    def __init__(self, conf):
        self.conf = conf

    @abc.abstractmethod
    def program(self, address, bitstream_path):
        """Program the FPGA at PCI ``address`` with ``bitstream_path``.

        Returns once the FPGA runs the new bitstream. Raises
        InvalidArgument for a malformed address and ProgrammingFailed,
        whose message says why, for anything else.
        """

    def _check(self, address, bitstream_path):
        _check_address(address)
        if not os.path.isfile(bitstream_path):
            raise exception.ProgrammingFailed(
                address=address,
                reason='bitstream file %s does not exist' % bitstream_path)
        return os.path.abspath(bitstream_path)


class FpgaManagerProgrammer(Programmer):
    """The Linux FPGA manager (``/sys/class/fpga_manager``).

    The bitstream is installed in ``[fpga] firmware_path`` under a name
    derived from the PCI address, the name is written to the manager's
    ``firmware`` attribute and the manager's ``state`` is polled until it
    reads ``operating``.
    """

    #: seconds between two reads of the manager's state
    poll_interval = 0.5

    def program(self, address, bitstream_path):
        bitstream_path = self._check(address, bitstream_path)
        root = self.conf.sidecar.sysfs_root
        manager = self._find_manager(root, address)
        name = 'nova-cyborg-%s.bin' % address.replace(':', '_')
        try:
            privileged.install_firmware(bitstream_path,
                                        self.conf.fpga.firmware_path, name)
        except (OSError, exception.InvalidArgument) as e:
            raise exception.ProgrammingFailed(
                address=address,
                reason='cannot install the bitstream in %s: %s'
                % (self.conf.fpga.firmware_path, _reason(e)))
        relpath = os.path.join('class', 'fpga_manager', manager, 'firmware')
        LOG.info('Programming %(address)s through FPGA manager %(mgr)s '
                 'with %(name)s', {'address': address, 'mgr': manager,
                                   'name': name})
        try:
            privileged.write_sysfs(root, relpath, name)
        except (OSError, exception.InvalidArgument) as e:
            raise exception.ProgrammingFailed(
                address=address,
                reason='FPGA manager %s refused the bitstream: %s'
                % (manager, _reason(e)))
        self._wait_operating(root, manager, address)
        LOG.info('Programmed %s', address)

    def _find_manager(self, root, address):
        """The manager whose device is ``address`` or a child of it; for
        a VF without one (a region of a card with several), its PF's."""
        pattern = os.path.join(root, 'class', 'fpga_manager', '*')
        found = self._managers_of(pattern, address)
        physfn = os.path.join(root, 'bus', 'pci', 'devices', address,
                              'physfn')
        if not found and os.path.islink(physfn):
            found = self._managers_of(
                pattern, os.path.basename(os.readlink(physfn).rstrip('/')))
        if not found:
            raise exception.ProgrammingFailed(
                address=address,
                reason='no FPGA manager under %s belongs to this device'
                % os.path.dirname(pattern))
        if len(found) > 1:
            raise exception.ProgrammingFailed(
                address=address,
                reason='several FPGA managers belong to this device (%s)'
                % ', '.join(found))
        return found[0]

    @staticmethod
    def _managers_of(pattern, address):
        found = []
        for mgr_dir in sorted(glob.glob(pattern)):
            device = os.path.realpath(os.path.join(mgr_dir, 'device'))
            if _nearest_pci_function(device) == address:
                found.append(os.path.basename(mgr_dir))
        return found

    def _wait_operating(self, root, manager, address):
        mgr_dir = os.path.join(root, 'class', 'fpga_manager', manager)
        timeout = self.conf.sidecar.program_timeout
        deadline = time.monotonic() + timeout
        state = None
        while True:
            state = _read(os.path.join(mgr_dir, 'state'))
            if state == 'operating':
                return
            if state is not None and 'error' in state:
                status = _read(os.path.join(mgr_dir, 'status'))
                raise exception.ProgrammingFailed(
                    address=address,
                    reason='FPGA manager %s is in state "%s"%s'
                    % (manager, state,
                       ' (%s)' % status if status else ''))
            if time.monotonic() >= deadline:
                raise exception.ProgrammingFailed(
                    address=address,
                    reason='FPGA manager %s still in state "%s" after %d '
                    'seconds ([sidecar] program_timeout)'
                    % (manager, state, timeout))
            time.sleep(self.poll_interval)


class CommandProgrammer(Programmer):
    """A vendor command, ``[fpga] program_command``.

    The command is split with shlex; in each resulting argument
    ``{address}`` and ``{bitstream}`` are replaced by the PCI address and
    the absolute path of the bitstream, and ``{segment}``, ``{bus}``,
    ``{device}`` and ``{function}`` by the address's parts in hex (as
    OPAE's ``fpgaconf --segment 0x{segment} -B 0x{bus} -D 0x{device}``
    takes them); nothing else is interpreted.
    """

    def __init__(self, conf):
        super().__init__(conf)
        command = conf.fpga.program_command
        if not command:
            raise exception.InvalidArgument(
                name='[fpga] program_command',
                reason='it must be set when [fpga] programmer = command')
        try:
            self.template = shlex.split(command)
        except ValueError as e:
            raise exception.InvalidArgument(
                name='[fpga] program_command', reason=str(e))
        if not self.template:
            raise exception.InvalidArgument(
                name='[fpga] program_command', reason='it is empty')
        if not any('{bitstream}' in arg for arg in self.template):
            raise exception.InvalidArgument(
                name='[fpga] program_command',
                reason='it has no {bitstream} placeholder')

    def argv(self, address, bitstream_path):
        values = dict(zip(('segment', 'bus', 'device', 'function'),
                          model.parse_bdf(address)),
                      address=address, bitstream=bitstream_path)
        return [_PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], arg)
                for arg in self.template]

    def program(self, address, bitstream_path):
        bitstream_path = self._check(address, bitstream_path)
        argv = self.argv(address, bitstream_path)
        timeout = self.conf.sidecar.program_timeout
        LOG.info('Programming %(address)s: %(cmd)s',
                 {'address': address, 'cmd': ' '.join(map(shlex.quote,
                                                          argv))})
        try:
            stdout, stderr = privileged.run_command(argv, timeout)
        except processutils.ProcessExecutionError as e:
            raise exception.ProgrammingFailed(
                address=address,
                reason='%s exited with code %s: %s'
                % (argv[0], e.exit_code, _tail(e.stderr) or _tail(e.stdout)
                   or 'no output'))
        except subprocess.TimeoutExpired:
            raise exception.ProgrammingFailed(
                address=address,
                reason='%s did not finish within %d seconds ([sidecar] '
                'program_timeout); it was killed' % (argv[0], timeout))
        except (OSError, exception.InvalidArgument) as e:
            raise exception.ProgrammingFailed(
                address=address,
                reason='cannot run %s: %s' % (argv[0], _reason(e)))
        LOG.info('Programmed %(address)s; %(tool)s said: %(out)s',
                 {'address': address, 'tool': argv[0],
                  'out': _tail(stdout) or _tail(stderr) or 'nothing'})


def _nearest_pci_function(path):
    """The last PCI address among the components of ``path``, or None."""
    for part in reversed(path.split(os.sep)):
        try:
            model.parse_bdf(part)
        except ValueError:
            continue
        return part
    return None


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _reason(err):
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err)


def _tail(text):
    text = (text or '').strip()
    if len(text) > _STDERR_TAIL:
        text = '...' + text[-_STDERR_TAIL:]
    return text


class ByDriver:
    """One programmer per FPGA driver (``[fpga] driver_programmers``,
    ``[fpga] programmer`` for the others), all built at start so that a
    configuration error stops the daemon instead of a bind."""

    def __init__(self, conf, loader=None):
        loader = loader or load_named
        self._default = conf.fpga.programmer
        self._names = dict(conf.fpga.driver_programmers or {})
        for driver_name in self._names:
            if not _DRIVER_NAME_RE.match(driver_name):
                raise exception.InvalidArgument(
                    name='[fpga] driver_programmers',
                    reason='%r is not a driver name' % driver_name)
        self._built = {name: loader(conf, name) for name in
                       {self._default} | set(self._names.values())}

    def for_driver(self, driver_name):
        """The programmer of FPGAs driven by ``driver_name``."""
        return self._built[self._names.get(driver_name, self._default)]

    def program(self, address, bitstream_path, driver_name=None):
        self.for_driver(driver_name).program(address, bitstream_path)


def load(conf):
    """Return the programmer ``[fpga] programmer`` names, built on conf."""
    return load_named(conf, conf.fpga.programmer)


def load_named(conf, name):
    """Return the programmer entry point ``name``, built on conf."""
    try:
        return driver.DriverManager(
            namespace=NAMESPACE, name=name, invoke_on_load=True,
            invoke_args=(conf,)).driver
    except stevedore_exc.NoMatches:
        raise exception.InvalidArgument(
            name='[fpga] programmer',
            reason='no programmer %r in the %s entry points (is '
            'nova-cyborg installed?)' % (name, NAMESPACE))
