"""programmer = dfl: the DFL_FPGA_FME_PORT_PR ioctl on the simulated card's
/dev/dfl-fme.N, answered by a stand-in of the kernel's fme_pr() that reads
the request as drivers/fpga/dfl-fme-pr.c does and changes the port's
afu_id; the FPGA driver reads the new function back from the port."""

import os
from unittest import mock

import fixtures

from sidecar import dfl_abi
from sidecar import exception
from sidecar import privileged
from sidecar.drivers import fpga
from sidecar.program import dfl_programmer
from sidecar.program import gbs
from sidecar.program import programmers
from sidecar.sources import sysfs
from sidecar_simulator import dfl
from sidecar_simulator import dfl_sriov
from tests.unit.sidecar import simhost
from tests.unit.sidecar import test_dfl_health

PF = '0000:81:00.0'
VF = '0000:81:00.1'
NEW = 'c000c9660d824272b5d6d4a8a9d2c4b1'


class DflProgrammerTest(simhost.SimHostTestCase):

    def _card(self, profile, sriov=False):
        self.dev = os.path.join(self.root, 'dev')
        self.sys = self.root
        self.sim = dfl.DflHost()
        self.card = self.sim.add_card(profile, afu_id=simhost.FUNCTION_ID,
                                      sriov=sriov, address=PF)
        self.sim.write(self.sys, self.dev)
        # sriov_numvfs and the error files answered as the kernel does.
        self.useFixture(test_dfl_health.KernelWrites(self.sim))
        self.config.config(dfl_dev_dir=self.dev, programmer='dfl',
                           group='fpga')
        self.requests = []
        self.useFixture(fixtures.MockPatch(
            'sidecar.privileged.fcntl.ioctl', side_effect=self._fme_pr))
        self.driver = fpga.FpgaDriver(self.conf,
                                      sysfs.SysfsSource(self.sys))
        self.driver.discover()
        self.programmer = dfl_programmer.DflProgrammer(self.conf)
        self.bitstream = os.path.join(self.root, 'afu.bit')

    def _fme_pr(self, fd, request, arg):
        """The simulated card's FME ioctls (sidecar_simulator.dfl_sriov:
        fme_pr(), port release and assign), given the request as the
        kernel is: on /dev/dfl-fme.N; each PR unpacked by the sidecar's
        ABI module for the test to see."""
        device = os.path.basename(os.readlink('/proc/self/fd/%d' % fd))
        if request == dfl_abi.DFL_FPGA_FME_PORT_PR:
            self.requests.append((device, dfl_abi.unpack_port_pr(arg)))
        return dfl_sriov.fme_ioctl(self.sim, device, request, arg)

    def _write(self, data):
        with open(self.bitstream, 'wb') as f:
            f.write(data)

    def test_program_the_pf_port(self):
        self._card('d5005')
        self._write(b'PR:' + NEW.encode())
        self.programmer.program(PF, self.bitstream)
        self.assertEqual([('dfl-fme.0', {
            'argsz': 24, 'flags': 0, 'port_id': 0, 'buffer_size': 35,
            'buffer_address': mock.ANY})], self.requests)
        self.assertEqual(NEW, self.driver.loaded_function(PF))

    def test_program_the_port_of_a_vf(self):
        self._card('n6000', sriov=True)
        self._write(b'PR:' + NEW.encode())
        self.programmer.program(VF, self.bitstream)
        self.assertEqual(['dfl-fme.0'], [r[0] for r in self.requests])
        self.assertEqual(0, self.requests[0][1]['port_id'])
        # SR-IOV was enabled again: dfl-pci enumerated the VF's port anew
        # (a new dfl-port.M), which a discovery reads, as the programming
        # manager's refresh does.
        self.driver.discover()
        self.assertEqual(NEW, self.driver.loaded_function(VF))

    def test_program_one_port_of_several(self):
        self._card('n6000', sriov=True)
        card = self.sim.add_card('n6000', sriov=True, ports=3,
                                 address='0000:82:00.0')
        self.sim.write(self.sys, self.dev)
        self.driver.discover()
        self._write(b'PR:' + NEW.encode())
        self.programmer.program('0000:82:00.3', self.bitstream)
        self.assertEqual([('dfl-fme.1', 2)], [
            (r[0], r[1]['port_id']) for r in self.requests])
        self.assertEqual([None, None, NEW], [p.afu_id for p in card.ports])
        self.driver.discover()
        self.assertEqual(NEW, self.driver.loaded_function('0000:82:00.3'))
        self.assertIsNone(self.driver.loaded_function('0000:82:00.1'))

    def test_hardware_error_names_the_manager_status(self):
        self._card('d5005')
        self._write(b'garbage')
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, PF, self.bitstream)
        self.assertIn('dfl-fme.0 refused the partial reconfiguration of '
                      'port 0: Input/output error (FPGA manager status: '
                      'empty)', str(exc))
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(PF))

    def test_not_a_dfl_port(self):
        self._card('d5005')
        self._write(b'PR:' + NEW.encode())
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, '0000:82:00.0',
                                self.bitstream)
        self.assertIn('no port of a DFL card', str(exc))
        self.assertEqual([], self.requests)

    # -- OPAE's .gbs container ----------------------------------------

    def _gbs(self, afu_id=NEW, compat_id=simhost.COMPAT_ID, loads=None):
        """A GBS for ``compat_id`` naming ``afu_id``, whose raw bitstream
        loads ``loads`` (default ``afu_id``)."""
        raw = b'PR:' + (loads or afu_id).encode()
        self._write(gbs.build(compat_id, [afu_id], raw))
        return raw

    def _leftovers(self):
        return sorted(n for n in os.listdir(self.root) if n.startswith('.'))

    def test_gbs_is_unwrapped_and_checked(self):
        for profile, sriov, address in (('d5005', False, PF),
                                        ('n6000', True, VF)):
            self.root = self.useFixture(fixtures.TempDir()).path
            self.config.config(sysfs_root=self.root, group='sidecar')
            self._card(profile, sriov=sriov)
            raw = self._gbs()
            self.programmer.program(address, self.bitstream)
            # The kernel was given the bitstream behind the metadata only.
            (request,) = self.requests
            self.assertEqual(len(raw), request[1]['buffer_size'])
            self.driver.discover()
            self.assertEqual(NEW, self.driver.loaded_function(address))
            self.assertEqual([], self._leftovers())

    def test_gbs_for_another_interface_is_refused_before_writing(self):
        self._card('d5005')
        other = '0123456789abcdef0123456789abcdef'
        self._gbs(compat_id=other)
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, PF, self.bitstream)
        self.assertIn('built for FPGA interface %s (its interface-uuid), '
                      'but the PR region region1 of dfl-port.0 has '
                      'compat_id %s; nothing was written'
                      % (other, simhost.COMPAT_ID), str(exc))
        self.assertEqual([], self.requests)
        self.assertEqual(simhost.FUNCTION_ID,
                         self.driver.loaded_function(PF))

    def test_afu_id_read_back_from_the_port(self):
        self._card('n6000', sriov=True)
        other = 'deadbeefdeadbeefdeadbeefdeadbeef'
        self._gbs(loads=other)
        exc = self.assertRaises(exception.ProgrammingFailed,
                                self.programmer.program, VF, self.bitstream)
        # Read while the port is the PF's (dfl-port.0), before its
        # release back to the VF.
        self.assertIn('after programming, dfl-port.0/afu_id reads %s, not '
                      'the bitstream\'s accelerator-type-uuid %s'
                      % (other, NEW), str(exc))
        self.assertEqual([], self._leftovers())

    def test_hostile_gbs_is_refused_before_writing(self):
        self._card('d5005')
        good = gbs.build(simhost.COMPAT_ID, [NEW], b'PR:' + NEW.encode())
        for data, reason in (
                (good[:30], 'runs past the end'),
                (good[:20] + b'<' + good[21:], 'not JSON'),
                (gbs.build(simhost.COMPAT_ID, [NEW], b''),
                 'holds no bitstream after its metadata'),
                (gbs.GBS_GUID.bytes + b'\xff' * 5, 'runs past the end')):
            self._write(data)
            exc = self.assertRaises(exception.ProgrammingFailed,
                                    self.programmer.program, PF,
                                    self.bitstream)
            self.assertIn(reason, str(exc))
        self.assertEqual([], self.requests)
        self.assertEqual([], self._leftovers())

    def test_privileged_offset_is_checked(self):
        self._card('d5005')
        self._write(b'PR:' + NEW.encode())
        for offset in (-1, True, 2 ** 31, '3'):
            exc = self.assertRaises(exception.InvalidArgument,
                                    privileged.dfl_port_pr, self.dev,
                                    'dfl-fme.0', 0, self.bitstream, offset)
            self.assertIn('bitstream offset', str(exc))
        # Behind the offset, nothing: refused before the ioctl.
        self.assertRaises(exception.InvalidArgument, privileged.dfl_port_pr,
                          self.dev, 'dfl-fme.0', 0, self.bitstream, 35)
        self.assertEqual([], self.requests)

    def test_loaded_by_name(self):
        self._card('d5005')
        self.assertIsInstance(programmers.load_named(self.conf, 'dfl'),
                              dfl_programmer.DflProgrammer)
