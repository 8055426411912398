"""Writing a bitstream to an FPGA.

A programmer is chosen with ``[fpga] programmer`` (default ``dfl``) and
loaded by stevedore from the ``nova_cyborg.sidecar.programmers``
namespace. Everything that needs root goes through
:mod:`sidecar.privileged`.

``fpga_manager`` (the bitstream's name written to the FPGA manager's
``firmware`` file) is gone: upstream kernels have no such file
(Documentation/ABI/testing/sysfs-class-fpga-manager: ``name``, ``state``,
``status``); only Xilinx's downstream kernel for Zynq and Versal SoCs
has it. A configuration still naming it stops the daemon at start with
:data:`REMOVED`'s reason.
"""

import abc
import os
import re
import shlex
import subprocess

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
#: Programmer names no longer offered: what to use instead.
REMOVED = {
    'fpga_manager': (
        "the 'fpga_manager' programmer was removed: it wrote the FPGA "
        "manager's 'firmware' file, which no upstream kernel has (only "
        "Xilinx's downstream kernel for Zynq and Versal SoCs). Use 'dfl' "
        "for Intel DFL cards (PAC A10, D5005, N3000, N6000), or 'command' "
        "with [fpga] program_command for other cards (for example "
        "'xrt-smi program --device {address} --user {bitstream}' for "
        "Alveo)"),
}


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
        _refuse_removed('[fpga] programmer', self._default)
        for name in self._names.values():
            _refuse_removed('[fpga] driver_programmers', name)
        self._built = {name: loader(conf, name) for name in
                       {self._default} | set(self._names.values())}

    def for_driver(self, driver_name):
        """The programmer of FPGAs driven by ``driver_name``."""
        return self._built[self._names.get(driver_name, self._default)]

    def program(self, address, bitstream_path, driver_name=None):
        self.for_driver(driver_name).program(address, bitstream_path)


def _refuse_removed(option, name):
    if name in REMOVED:
        raise exception.InvalidArgument(name=option, reason=REMOVED[name])


def load(conf):
    """Return the programmer ``[fpga] programmer`` names, built on conf."""
    _refuse_removed('[fpga] programmer', conf.fpga.programmer)
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
