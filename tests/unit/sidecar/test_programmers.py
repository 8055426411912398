"""Programmers, against a generated sysfs tree and real commands."""

import importlib.metadata
import json
import os
import shlex
import sys
from unittest import mock

import fixtures
from oslo_config import cfg
from oslo_config import fixture as cfg_fixture
from stevedore import exception as stevedore_exc
import testtools

from sidecar import conf as sidecar_conf
from sidecar import exception
from sidecar import privileged
from sidecar.program import programmers
from tests.unit.sidecar import utils

ADDRESS = '0000:5e:00.0'
OTHER = '0000:5f:00.0'

# A vendor tool: records its arguments and the bitstream it was given.
TOOL = '''
import json, sys
args = sys.argv[2:]
bitstream = [a for a in args if a.startswith("--load=")][0][len("--load="):]
with open(sys.argv[1], "w") as f:
    json.dump({"argv": args, "data": open(bitstream).read()}, f)
'''


_write = utils.write
_read = utils.read


class Base(testtools.TestCase):

    def setUp(self):
        super().setUp()
        privileged.sidecar_pctxt.set_client_mode(False)
        self.addCleanup(privileged.sidecar_pctxt.set_client_mode, True)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(self.tmp, 'sys')
        conf = cfg.ConfigOpts()
        sidecar_conf.register_opts(conf)
        conf([])
        self.conf = self.useFixture(cfg_fixture.Config(conf))
        self.conf.config(sysfs_root=self.root, program_timeout=1,
                         group='sidecar')
        self.bitstream = os.path.join(self.tmp, 'image.bit')
        _write(self.bitstream, 'BITSTREAM')


class RemovedProgrammerTest(Base):
    """``fpga_manager`` is refused at start, saying what to use instead,
    from either option and through either way of building."""

    def _refused(self, func, option):
        exc = self.assertRaises(exception.InvalidArgument, func,
                                self.conf.conf)
        message = str(exc)
        self.assertIn(option, message)
        self.assertIn("the 'fpga_manager' programmer was removed", message)
        self.assertIn("Use 'dfl' for Intel DFL cards", message)
        self.assertIn("'command' with [fpga] program_command", message)
        return message

    def test_default_is_dfl(self):
        self.assertEqual('dfl', self.conf.conf.fpga.programmer)

    def test_programmer(self):
        self.conf.config(programmer='fpga_manager', group='fpga')
        built = []
        for build in (programmers.load, lambda conf: programmers.ByDriver(
                conf, loader=lambda conf, name: built.append(name))):
            self._refused(build, '[fpga] programmer')
        self.assertEqual([], built)

    def test_driver_programmers(self):
        self.conf.config(driver_programmers={'intel': 'fpga_manager'},
                         group='fpga')
        self._refused(programmers.ByDriver, '[fpga] driver_programmers')

    def test_no_entry_point(self):
        eps = importlib.metadata.entry_points(group=programmers.NAMESPACE)
        if not {ep.name for ep in eps}:
            self.skipTest('nova-cyborg entry points not installed')
        self.assertEqual({'command', 'dfl'}, {ep.name for ep in eps})


class CommandTest(Base):

    def setUp(self):
        super().setUp()
        self.tool = os.path.join(self.tmp, 'tool.py')
        _write(self.tool, TOOL)
        self.record = os.path.join(self.tmp, 'record.json')

    def _programmer(self, command):
        self.conf.config(program_command=command, group='fpga')
        return programmers.CommandProgrammer(self.conf.conf)

    def _tool_command(self, extra='--dev {address} --load={bitstream}'):
        return '%s %s %s %s' % (shlex.quote(sys.executable),
                                shlex.quote(self.tool),
                                shlex.quote(self.record), extra)

    def _recorded(self):
        with open(self.record) as f:
            return json.load(f)

    def test_program(self):
        self._programmer(self._tool_command()).program(ADDRESS,
                                                       self.bitstream)
        self.assertEqual(
            {'argv': ['--dev', ADDRESS, '--load=' + self.bitstream],
             'data': 'BITSTREAM'}, self._recorded())

    def test_values_are_never_split_or_interpreted(self):
        odd = os.path.join(self.tmp, 'a b;$(touch pwned) {address}.bit')
        _write(odd, 'ODD')
        self._programmer(self._tool_command(
            '--dev {address} "--load={bitstream}" {other} '
            '{address.__class__}')).program(ADDRESS, odd)
        self.assertEqual(
            {'argv': ['--dev', ADDRESS, '--load=' + odd, '{other}',
                      '{address.__class__}'], 'data': 'ODD'},
            self._recorded())

    def test_relative_bitstream_made_absolute(self):
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp)
        self._programmer(self._tool_command()).program(ADDRESS, 'image.bit')
        self.assertEqual('--load=' + self.bitstream,
                         self._recorded()['argv'][2])

    def test_failure_reports_stderr_tail(self):
        programmer = self._programmer(
            '%s -c "import sys; sys.stderr.write(\'x\' * 2000 + '
            '\'device busy\'); sys.exit(3)" {bitstream}'
            % shlex.quote(sys.executable))
        exc = self.assertRaises(exception.ProgrammingFailed,
                                programmer.program, ADDRESS, self.bitstream)
        msg = str(exc)
        self.assertIn('exited with code 3: ...', msg)
        self.assertTrue(msg.endswith('xxxdevice busy'), msg)
        self.assertLess(len(msg), 700)

    def test_timeout(self):
        programmer = self._programmer(
            '%s -c "import time; time.sleep(30)" {bitstream}'
            % shlex.quote(sys.executable))
        exc = self.assertRaises(exception.ProgrammingFailed,
                                programmer.program, ADDRESS, self.bitstream)
        self.assertIn('did not finish within 1 seconds ([sidecar] '
                      'program_timeout); it was killed', str(exc))

    def test_missing_tool(self):
        programmer = self._programmer(
            os.path.join(self.tmp, 'vendor-tool') + ' {bitstream}')
        exc = self.assertRaises(exception.ProgrammingFailed,
                                programmer.program, ADDRESS, self.bitstream)
        self.assertIn('cannot run %s' % os.path.join(self.tmp, 'vendor-tool'),
                      str(exc))

    def test_bad_address(self):
        programmer = self._programmer(self._tool_command())
        self.assertRaises(exception.InvalidArgument, programmer.program,
                          '--help', self.bitstream)
        self.assertFalse(os.path.exists(self.record))

    def test_bad_command_option(self):
        for command, words in ((None, 'must be set'),
                               ('', 'must be set'),
                               ('tool --dev {address}', 'no {bitstream}'),
                               ('tool "{bitstream}', 'No closing quotation'),
                               ('  ', 'it is empty')):
            self.conf.config(program_command=command, group='fpga')
            exc = self.assertRaises(exception.InvalidArgument,
                                    programmers.CommandProgrammer,
                                    self.conf.conf)
            self.assertIn(words, str(exc))


class LoadTest(Base):

    def _installed(self):
        eps = importlib.metadata.entry_points(group=programmers.NAMESPACE)
        return {ep.name for ep in eps} >= {'dfl', 'command'}

    def test_load_real_entry_points(self):
        if not self._installed():
            self.skipTest('nova-cyborg entry points not installed; run '
                          'pip install -e .')
        from sidecar.program import dfl_programmer
        self.assertIsInstance(programmers.load(self.conf.conf),
                              dfl_programmer.DflProgrammer)
        self.conf.config(programmer='command', program_command='t {bitstream}',
                         group='fpga')
        self.assertIsInstance(programmers.load(self.conf.conf),
                              programmers.CommandProgrammer)

    def test_load_uses_the_configured_name(self):
        self.conf.config(programmer='command', group='fpga')
        with mock.patch.object(programmers.driver,
                               'DriverManager') as manager:
            result = programmers.load(self.conf.conf)
        manager.assert_called_once_with(
            namespace='nova_cyborg.sidecar.programmers', name='command',
            invoke_on_load=True, invoke_args=(self.conf.conf,))
        self.assertIs(manager.return_value.driver, result)

    def test_load_missing(self):
        with mock.patch.object(programmers.driver, 'DriverManager',
                               side_effect=stevedore_exc.NoMatches('x')):
            exc = self.assertRaises(exception.InvalidArgument,
                                    programmers.load, self.conf.conf)
        self.assertIn("no programmer 'dfl'", str(exc))


class ByDriverTest(Base):
    """[fpga] driver_programmers: one programmer per FPGA driver."""

    def _loader(self, built):
        def load(conf, name):
            built.append(name)
            return mock.Mock(name=name)
        return load

    def test_each_driver_its_programmer_and_the_default_for_others(self):
        self.conf.config(programmer='dfl',
                         driver_programmers={'xilinx': 'command'},
                         group='fpga')
        built = []
        by_driver = programmers.ByDriver(self.conf.conf,
                                         loader=self._loader(built))
        self.assertEqual(['command', 'dfl'], sorted(built))
        xilinx = by_driver.for_driver('xilinx')
        intel = by_driver.for_driver('intel')
        self.assertIsNot(xilinx, intel)
        self.assertIs(intel, by_driver.for_driver('10ee_unknown'))
        by_driver.program(ADDRESS, 'b.bit', driver_name='xilinx')
        xilinx.program.assert_called_once_with(ADDRESS, 'b.bit')
        intel.program.assert_not_called()

    def test_built_at_start(self):
        # A misconfigured programmer stops the daemon at start, not a bind.
        self.conf.config(driver_programmers={'xilinx': 'command'},
                         program_command=None, group='fpga')
        exc = self.assertRaises(exception.InvalidArgument,
                                programmers.ByDriver, self.conf.conf,
                                loader=programmers.load_named)
        self.assertIn('must be set', str(exc))

    def test_bad_driver_name(self):
        self.conf.config(driver_programmers={'bad name': 'command'},
                         group='fpga')
        exc = self.assertRaises(exception.InvalidArgument,
                                programmers.ByDriver, self.conf.conf,
                                loader=self._loader([]))
        self.assertIn("'bad name' is not a driver name", str(exc))


class DaemonStartTest(testtools.TestCase):
    """nova-cyborg-sidecar with ``programmer = fpga_manager``: one ERROR
    saying what to use, exit code 1, before it connects anywhere."""

    def test_refused_at_start(self):
        from sidecar.cmd import daemon
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'sidecar.conf')
        _write(path, '[fpga]\nprogrammer = fpga_manager\n')
        self.useFixture(fixtures.MockPatchObject(cfg, 'CONF',
                                                 cfg.ConfigOpts()))
        self.useFixture(fixtures.MockPatch('sidecar.cmd.daemon.logging.'
                                           'setup'))
        transport = self.useFixture(fixtures.MockPatch(
            'sidecar.daemon.rpc.get_transport')).mock
        logger = self.useFixture(fixtures.FakeLogger(level='ERROR'))
        self.assertEqual(1, daemon.main(['--config-file', path]))
        lines = logger.output.strip().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('nova-cyborg-sidecar cannot start', lines[0])
        self.assertIn("[fpga] programmer", lines[0])
        self.assertIn("Use 'dfl' for Intel DFL cards", lines[0])
        transport.assert_not_called()
