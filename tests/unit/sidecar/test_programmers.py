"""Programmers, against a generated sysfs tree and real commands."""

import importlib.metadata
import itertools
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
from sidecar import programmers
from tests.unit.sidecar import utils

ADDRESS = '0000:5e:00.0'
OTHER = '0000:5f:00.0'
FW_NAME = 'nova-cyborg-0000_5e_00.0.bin'

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
        self.firmware = os.path.join(self.tmp, 'firmware')
        os.makedirs(self.firmware)
        conf = cfg.ConfigOpts()
        sidecar_conf.register_opts(conf)
        conf([])
        self.conf = self.useFixture(cfg_fixture.Config(conf))
        self.conf.config(sysfs_root=self.root, program_timeout=1,
                         group='sidecar')
        self.conf.config(firmware_path=self.firmware, group='fpga')
        self.bitstream = os.path.join(self.tmp, 'image.bit')
        _write(self.bitstream, 'BITSTREAM')


class FpgaManagerTest(Base):

    def setUp(self):
        super().setUp()
        self.mgr = self._manager('fpga0', 'pci0000:5d/' + ADDRESS)
        self._manager('fpga1', 'pci0000:5d/' + OTHER)
        self.programmer = programmers.FpgaManagerProgrammer(self.conf.conf)
        self.programmer.poll_interval = 0

    def _manager(self, name, device, state='operating'):
        device_dir = os.path.join(self.root, 'devices', device)
        os.makedirs(device_dir, exist_ok=True)
        mgr = os.path.join(self.root, 'class', 'fpga_manager', name)
        _write(os.path.join(mgr, 'firmware'))
        _write(os.path.join(mgr, 'state'), state + '\n')
        os.symlink(device_dir, os.path.join(mgr, 'device'))
        return mgr

    def test_program(self):
        self.programmer.program(ADDRESS, self.bitstream)
        self.assertEqual('BITSTREAM',
                         _read(os.path.join(self.firmware, FW_NAME)))
        self.assertEqual(FW_NAME, _read(os.path.join(self.mgr, 'firmware')))
        other = os.path.join(self.root, 'class', 'fpga_manager', 'fpga1')
        self.assertEqual('', _read(os.path.join(other, 'firmware')))

    def test_region_of_a_vf_without_its_own_manager(self):
        # A card with several regions: the region on VF 5e:00.1 is loaded
        # through its PF's manager.
        vf = '0000:5e:00.1'
        vf_dir = os.path.join(self.root, 'bus', 'pci', 'devices', vf)
        os.makedirs(vf_dir)
        os.symlink('../' + ADDRESS, os.path.join(vf_dir, 'physfn'))
        self.programmer.program(vf, self.bitstream)
        self.assertEqual('nova-cyborg-0000_5e_00.1.bin',
                         _read(os.path.join(self.mgr, 'firmware')))

    def test_waits_for_operating(self):
        _write(os.path.join(self.mgr, 'state'), 'write\n')
        polls = []

        def sleep(seconds):
            polls.append(seconds)
            if len(polls) == 3:
                _write(os.path.join(self.mgr, 'state'), 'operating\n')

        self.useFixture(fixtures.MockPatch(
            'sidecar.programmers.time.sleep', side_effect=sleep))
        self.programmer.program(ADDRESS, self.bitstream)
        self.assertEqual(3, len(polls))

    def test_error_state(self):
        _write(os.path.join(self.mgr, 'state'), 'write error\n')
        _write(os.path.join(self.mgr, 'status'), 'reconfig operation error')
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, ADDRESS,
                                self.bitstream)
        self.assertEqual(
            'Programming %s failed: FPGA manager fpga0 is in state "write '
            'error" (reconfig operation error)' % ADDRESS, str(exc))

    def test_timeout(self):
        _write(os.path.join(self.mgr, 'state'), 'write\n')
        self.useFixture(fixtures.MockPatch('sidecar.programmers.time.sleep'))
        self.useFixture(fixtures.MockPatch(
            'sidecar.programmers.time.monotonic',
            side_effect=itertools.count(100, 0.3)))
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, ADDRESS,
                                self.bitstream)
        self.assertIn('still in state "write" after 1 seconds', str(exc))

    def test_manager_of_a_child_device(self):
        # Intel DFL: the manager's device is a child of the PCI function.
        mgr = self._manager('fpga2', 'pci0000:80/0000:80:01.0/0000:81:00.0/'
                            'dfl-fme.0')
        self.programmer.program('0000:81:00.0', self.bitstream)
        self.assertEqual('nova-cyborg-0000_81_00.0.bin',
                         _read(os.path.join(mgr, 'firmware')))

    def test_bridge_does_not_own_the_manager_below_it(self):
        self._manager('fpga2', 'pci0000:80/0000:80:01.0/0000:81:00.0')
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, '0000:80:01.0',
                                self.bitstream)
        self.assertIn('no FPGA manager', str(exc))

    def test_no_manager(self):
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, '0000:99:00.0',
                                self.bitstream)
        self.assertIn('no FPGA manager under %s' % os.path.join(
            self.root, 'class', 'fpga_manager'), str(exc))
        self.assertEqual([], os.listdir(self.firmware))

    def test_two_managers(self):
        self._manager('fpga9', 'pci0000:5d/%s/region0' % ADDRESS)
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, ADDRESS,
                                self.bitstream)
        self.assertIn('several FPGA managers belong to this device (fpga0, '
                      'fpga9)', str(exc))

    def test_kernel_without_firmware_attribute(self):
        os.unlink(os.path.join(self.mgr, 'firmware'))
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, ADDRESS,
                                self.bitstream)
        self.assertIn('FPGA manager fpga0 refused the bitstream: No such '
                      'file or directory', str(exc))

    def test_firmware_path_missing(self):
        self.conf.config(firmware_path=os.path.join(self.tmp, 'nope'),
                         group='fpga')
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, ADDRESS,
                                self.bitstream)
        self.assertIn('cannot install the bitstream', str(exc))
        self.assertEqual('', _read(os.path.join(self.mgr, 'firmware')))

    def test_missing_bitstream(self):
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, ADDRESS,
                                os.path.join(self.tmp, 'missing.bit'))
        self.assertIn('does not exist', str(exc))

    def test_bad_address(self):
        for address in ('0000:5E:00.0', ADDRESS + '\n', '../../x', None):
            self.assertRaises(exception.InvalidArgument,
                              self.programmer.program, address,
                              self.bitstream)
        self.assertEqual('', _read(os.path.join(self.mgr, 'firmware')))


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
        return {ep.name for ep in eps} >= {'fpga_manager', 'command'}

    def test_load_real_entry_points(self):
        if not self._installed():
            self.skipTest('nova-cyborg entry points not installed; run '
                          'pip install -e .')
        self.assertIsInstance(programmers.load(self.conf.conf),
                              programmers.FpgaManagerProgrammer)
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
        self.assertIn("no programmer 'fpga_manager'", str(exc))


class ByDriverTest(Base):
    """[fpga] driver_programmers: one programmer per FPGA driver."""

    def _loader(self, built):
        def load(conf, name):
            built.append(name)
            return mock.Mock(name=name)
        return load

    def test_each_driver_its_programmer_and_the_default_for_others(self):
        self.conf.config(programmer='fpga_manager',
                         driver_programmers={'xilinx': 'command'},
                         group='fpga')
        built = []
        by_driver = programmers.ByDriver(self.conf.conf,
                                         loader=self._loader(built))
        self.assertEqual(['command', 'fpga_manager'], sorted(built))
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
