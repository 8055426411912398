"""The xrt-smi stand-in (sidecar_simulator.tools.xrt_smi): XRT's command
line and checks, then the user PF's xclbinuuid changes; and the sidecar's
command programmer running it as ``[fpga] program_command``."""

import io
import os
import sys

import fixtures

from sidecar import exception
from sidecar import privileged
from sidecar.program import programmers
from sidecar_simulator import xrt
from sidecar_simulator.tools import xrt_smi
from tests.unit.sidecar import simhost

USER = '0000:81:00.1'
OTHER = 'a1a1a1a1b2b2b2b2c3c3c3c3d4d4d4d4'


class _Card(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sys = os.path.join(self.root, 'sys')
        self.sim = xrt.XrtHost()
        self.card = self.sim.add_card('u55c', address='0000:81:00.0',
                                      xclbin_uuid=simhost.FUNCTION_ID)
        self.sim.write(self.sys)

    def _file(self, data):
        path = os.path.join(self.root, 'f.xclbin')
        with open(path, 'wb') as f:
            f.write(data)
        return path

    def _xclbin(self, uuid=OTHER, shell=None):
        return self._file(xrt.make_xclbin(
            uuid, shell or xrt.PROFILES['u55c'][1], 'xilinx_u55c'))

    def _loaded(self):
        with open(os.path.join(self.sys, 'bus/pci/devices', USER,
                               'xclbinuuid')) as f:
            return f.read().strip().replace('-', '')


class XrtSmiTest(_Card):

    def setUp(self):
        super().setUp()
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', self.stderr))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', self.stderr))

    def _run(self, *argv):
        return xrt_smi.main(['--sysfs-root', self.sys] + list(argv))

    def test_program(self):
        path = self._xclbin()
        self.assertEqual(0, self._run('program', '--device', '81:00.1',
                                      '--user', path))
        self.assertEqual(OTHER, self._loaded())
        self.assertEqual(0, self._run('program', '-d', USER, '-u',
                                      self._xclbin(simhost.FUNCTION_ID)))
        self.assertEqual(simhost.FUNCTION_ID, self._loaded())
        with open(os.path.join(self.root, 'programmed.log')) as f:
            self.assertEqual([[USER, OTHER], [USER, simhost.FUNCTION_ID]],
                             [line.split()[1:] for line in f])

    def assertRefused(self, fragment, *argv):
        self.assertEqual(1, self._run(*argv))
        self.assertIn(fragment, self.stderr.getvalue())
        self.assertEqual(simhost.FUNCTION_ID, self._loaded())

    def test_refusals_load_nothing(self):
        self.assertRefused('interface uuids do not match', 'program', '-d',
                           USER, '-u', self._xclbin(
                               shell=xrt.PROFILES['u250'][1]))
        self.assertRefused('not a valid xclbin: no xclbin2 magic',
                           'program', '-d', USER, '-u',
                           self._file(b'x' * 1000))
        self.assertRefused('carries no xclbin UUID', 'program', '-d', USER,
                           '-u', self._xclbin(uuid='0' * 32))
        self.assertRefused('0000:81:00.0 is not a user PF', 'program', '-d',
                           '0000:81:00.0', '-u', self._xclbin())
        self.assertRefused('no device 0000:82:00.1', 'program', '-d',
                           '82:00.1', '-u', self._xclbin())
        self.assertRefused('cannot read', 'program', '-d', USER, '-u',
                           os.path.join(self.root, 'missing'))
        self.sim.set_ready(self.card, False)
        self.assertRefused('is not ready', 'program', '-d', USER, '-u',
                           self._xclbin())

    def test_device_optional_with_one_card(self):
        self.assertEqual(0, self._run('program', '-u', self._xclbin()))
        self.assertEqual(OTHER, self._loaded())


class CommandProgrammerTest(_Card):
    """``[fpga] program_command`` as the Alveo section of the sidecar's
    guide writes it, with the stand-in for xrt-smi."""

    def setUp(self):
        super().setUp()
        privileged.sidecar_pctxt.set_client_mode(False)
        self.addCleanup(privileged.sidecar_pctxt.set_client_mode, True)
        xrt_smi_path = os.path.join(self.root, 'xrt-smi')
        with open(xrt_smi_path, 'w') as f:
            f.write('#!/bin/sh\nexec %s %s --sysfs-root %s "$@"\n'
                    % (sys.executable, xrt_smi.__file__, self.sys))
        os.chmod(xrt_smi_path, 0o755)
        self.config.config(
            group='fpga', programmer='command',
            program_command=xrt_smi_path + ' program --device {address} '
            '--user {bitstream}')
        self.programmer = programmers.load(self.conf)

    def test_programs_and_refuses(self):
        self.programmer.program(USER, self._xclbin())
        self.assertEqual(OTHER, self._loaded())
        exc = self.assertRaises(
            exception.ProgrammingFailed, self.programmer.program, USER,
            self._xclbin(simhost.FUNCTION_ID, xrt.PROFILES['u50'][1]))
        self.assertIn('interface uuids do not match', str(exc))
        self.assertEqual(OTHER, self._loaded())
