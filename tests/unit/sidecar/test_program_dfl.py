"""Seed 004's guarantees on Intel DFL cards: the real FPGA driver reads a
card the simulator writes from the kernel's ABI, the real programmers
write it (``dfl``: DFL_FPGA_FME_PORT_PR to a stand-in of the kernel's
fme_pr(); ``command``: the simulator's fpgaconf), and the programming
manager keeps its promises: a function a server relies on is never
replaced, the port's afu_id is checked after loading, the provider's
function trait is what the weigher of function affinity reads, and a job
in flight is journaled."""

import errno
import json
import os
import struct
import sys
from unittest import mock

import fixtures

from sidecar import dfl_abi
from sidecar import exception
from sidecar import privileged
from sidecar.discovery import inventory
from sidecar.drivers import fpga
from sidecar.program import gbs
from sidecar.program import journal
from sidecar.program import manager as program
from sidecar.program import programmers
from sidecar.sources import sysfs
from sidecar_simulator import dfl
from sidecar_simulator import dfl_health as sim_health
from sidecar_simulator import dfl_sriov
from sidecar_simulator import kernel
from sidecar_simulator.tools import fpgaconf
from tests.unit.sidecar import simhost
from tests.unit.sidecar import test_dfl_health
from tests.unit.sidecar import test_program

PF = '0000:81:00.0'
VF = '0000:81:00.1'
CPID = test_program.CPID
IMAGE_A, IMAGE_B = test_program.IMAGE_A, test_program.IMAGE_B
F_A = 'a1a1a1a1b2b2b2b2c3c3c3c3d4d4d4d4'
F_B = 'f0f0f0f01e1e1e1e2d2d2d2d3c3c3c3c'
FUNCTIONS = {IMAGE_A: F_A, IMAGE_B: F_B}
TRAIT_A = program.function_trait('intel', F_A)
TRAIT_B = program.function_trait('intel', F_B)


class GbsImages:
    """Glance's bitstreams: a GBS for the card's interface per image."""

    def __init__(self, compat_id=simhost.COMPAT_ID):
        self.compat_id = compat_id
        self.loads = {}   # image -> afu id its raw bitstream really loads
        self.clocks = {}  # image -> afu-image clock-frequency-high/low

    def get_metadata(self, image_id):
        return {'id': image_id, 'accel:function_id': FUNCTIONS[image_id]}

    def function_id(self, metadata):
        return metadata.get('accel:function_id')

    def download(self, image_id, path, metadata=None):
        function = FUNCTIONS[image_id]
        raw = b'PR:' + self.loads.get(image_id, function).encode()
        with open(path, 'wb') as f:
            f.write(gbs.build(self.compat_id, [function], raw,
                              clocks=self.clocks.get(image_id, (0, 0))))


class DflProgramBase(simhost.SimHostTestCase):
    """Subclasses set PROFILE, SRIOV and PORTS."""

    PROFILE = 'd5005'
    SRIOV = False
    PROGRAMMER = 'dfl'
    PORTS = 1

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatch(
            'sidecar.program.promises.SETTLE_SECONDS', 0))
        self.handle = VF if self.SRIOV else PF
        self.rp = 'rp-compute1_' + self.handle
        # fpgaconf logs beside the sysfs root.
        self.top, self.root = self.root, os.path.join(self.root, 'sys')
        self.config.config(sysfs_root=self.root, group='sidecar')
        self.sim = dfl.DflHost()
        self.card = self.sim.add_card(self.PROFILE, afu_id=F_A,
                                      sriov=self.SRIOV, address=PF,
                                      ports=self.PORTS)
        self.dev = os.path.join(self.top, 'dev')
        self.sim.write(self.root, self.dev)
        self.kernel = self.useFixture(
            test_dfl_health.KernelWrites(self.sim))
        self.requests = []
        self.ioctls = []
        self.during = None
        self.useFixture(fixtures.MockPatch(
            'sidecar.privileged.fcntl.ioctl', side_effect=self._fme_pr))
        self.config.config(dfl_dev_dir=self.dev, programmer=self.PROGRAMMER,
                           program_command=' '.join((
                               sys.executable, fpgaconf.__file__,
                               '--sysfs-root', self.root,
                               '--segment', '0x{segment}', '-B', '0x{bus}',
                               '-D', '0x{device}', '{bitstream}')),
                           group='fpga')
        self.inventory = inventory.Inventory(
            [fpga.FpgaDriver(self.conf, sysfs.SysfsSource(self.root))])
        self.inventory.discover()
        self.state = os.path.join(self.top, 'state')
        self.images = GbsImages()
        self.placement = test_program.FakePlacement()
        self.domains = test_program.FakeDomains()
        self.cyborg = test_program.FakeCyborg()
        self.manager = program.ProgramManager(
            'compute1', self.inventory, programmers.ByDriver(self.conf),
            self.images, self.placement, self.domains,
            journal.Journal(self.state), self.cyborg)

    def _fme_pr(self, fd, request, arg):
        """The simulated card's FME ioctls (sidecar_simulator.dfl_sriov:
        fme_pr(), port release and assign) on the /dev/dfl-fme.N the
        sidecar opened; ``requests`` the PRs, ``ioctls`` all;
        ``during`` runs while the card is being written."""
        name = os.path.basename(os.readlink('/proc/self/fd/%d' % fd))
        self.ioctls.append((request, arg))
        if request == dfl_abi.DFL_FPGA_FME_PORT_PR:
            self.requests.append(dfl_abi.unpack_port_pr(arg))
            if self.during:
                self.during()
        return dfl_sriov.fme_ioctl(self.sim, name, request, arg)

    def _afu_id(self):
        with open(os.path.join(self.sim.port_dir(self.card), 'afu_id')) as f:
            return f.read().strip()

    def _program(self, image):
        return self.manager.fpga_program(CPID, image, 'intel')

    def _allocate(self, consumer, profile):
        self.placement.allocated.setdefault(self.rp, []).append(consumer)
        self.cyborg.bind(consumer, profile, self.rp)


class DflProgramTest(DflProgramBase):

    def test_program_and_journal(self):
        seen = []

        def during():
            with open(os.path.join(self.state, 'programming.json')) as f:
                seen.append(json.load(f))
            seen.append(dict(self.placement.reserved))
        self.during = during
        self.assertTrue(self._program(IMAGE_B))
        self.assertEqual(F_B, self._afu_id())
        # While the card was written its job was journaled and its
        # provider fully reserved; afterwards neither.
        job = seen[0][PF]
        self.assertEqual((IMAGE_B, TRAIT_B, self.handle),
                         (job['image'], job['trait'], job['deployable']))
        self.assertEqual({self.rp: True}, seen[1])
        self.assertEqual({self.rp: False}, self.placement.reserved)
        with open(os.path.join(self.state, 'programming.json')) as f:
            self.assertEqual({}, json.load(f))
        # The trait the function affinity weigher reads is the new one.
        self.assertEqual([TRAIT_B], self.placement.traits[self.rp])
        # Nothing is left of the download or of the unwrapped bitstream.
        self.assertEqual(['programming.json'], sorted(os.listdir(self.state)))

    def test_same_function_kept_even_in_use(self):
        self.domains.users = {self.handle: 'instance-1'}
        self._allocate('server-1', 'dp-a')
        self.assertTrue(self._program(IMAGE_A))
        self.assertEqual([], self.requests)
        self.assertEqual(F_A, self._afu_id())

    def test_promise_refuses_another_function(self):
        # A server holds the card and its ARQ asks for F_A.
        self._allocate('server-1', 'dp-a')
        exc = self.assertRaises(exception.DeviceBusy, self._program,
                                IMAGE_B)
        self.assertIn(self.handle, str(exc))
        self.assertEqual([], self.requests)
        self.assertEqual(F_A, self._afu_id())
        self.assertEqual({}, self.placement.reserved)

    def test_domain_using_the_handle_refuses(self):
        self.domains.users = {self.handle: 'instance-1'}
        exc = self.assertRaises(exception.DeviceBusy, self._program,
                                IMAGE_B)
        self.assertIn('instance-1', str(exc))
        self.assertEqual(F_A, self._afu_id())

    def test_function_check_after_programming(self):
        # The bitstream does not hold what its metadata says.
        self.images.loads[IMAGE_B] = 'deadbeefdeadbeefdeadbeefdeadbeef'
        exc = self.assertRaises(exception.ProgrammingFailed, self._program,
                                IMAGE_B)
        self.assertIn('afu_id reads deadbeefdeadbeefdeadbeefdeadbeef, not '
                      'the bitstream\'s accelerator-type-uuid ' + F_B,
                      str(exc))
        self.assertNotIn(TRAIT_B, self.placement.traits.get(self.rp, ()))
        self.assertEqual({self.rp: False}, self.placement.reserved)
        with open(os.path.join(self.state, 'programming.json')) as f:
            self.assertEqual({}, json.load(f))

    def test_wrong_interface_is_never_written(self):
        self.images.compat_id = '0123456789abcdef0123456789abcdef'
        exc = self.assertRaises(exception.ProgrammingFailed, self._program,
                                IMAGE_B)
        self.assertIn('compat_id %s' % simhost.COMPAT_ID, str(exc))
        self.assertEqual([], self.requests)
        self.assertEqual(F_A, self._afu_id())
        self.assertEqual({self.rp: False}, self.placement.reserved)


class FpgaconfStepsTest(DflProgramTest):
    """The steps fpgaconf takes around the load (opae-sdk
    libraries/plugins/xfpga/reconf.c): port errors cleared first, user
    clocks refused under the dfl programmer."""

    def _port_errors(self):
        with open(os.path.join(self.sim.port_dir(self.card), 'errors',
                               'errors')) as f:
            return f.read().strip()

    def test_port_errors_cleared_before_the_load(self):
        self.sim.set_error(self.card, 'port/errors', '0x10')
        self.sim.set_error(self.card, 'port/first_malformed_req', '0x5')
        seen = []
        self.during = lambda: seen.append(self._port_errors())
        self.assertTrue(self._program(IMAGE_B))
        self.assertEqual(['0x0'], seen)
        (relpath, value), = self.kernel.writes
        self.assertEqual('0x10', value)
        self.assertTrue(relpath.endswith('/errors/errors'))
        self.assertEqual(F_B, self._afu_id())

    def test_errors_that_do_not_clear_stop_the_job(self):
        self.sim.set_error(self.card, 'port/errors', '0x10')
        with mock.patch.object(sim_health, 'errors_store',
                               side_effect=OSError(16, 'Device or '
                                                   'resource busy')):
            exc = self.assertRaises(exception.ProgrammingFailed,
                                    self._program, IMAGE_B)
        self.assertIn('cannot clear the errors of dfl-port.', str(exc))
        self.assertIn('Device or resource busy', str(exc))
        self.assertEqual([], self.requests)
        self.assertEqual(F_A, self._afu_id())

    def test_user_clocks_are_refused(self):
        self.images.clocks[IMAGE_B] = (312, 156)
        exc = self.assertRaises(exception.ProgrammingFailed, self._program,
                                IMAGE_B)
        self.assertIn('AFU user clocks of 312 MHz (clock-frequency-high) '
                      'and 156 MHz', str(exc))
        self.assertIn('programmer = command with fpgaconf', str(exc))
        self.assertEqual([], self.requests)
        self.assertEqual([], self.kernel.writes)
        self.assertEqual(F_A, self._afu_id())


class SriovDflProgramTest(DflProgramTest):
    """N6000 after its port's release: the AFU is reached through the VF,
    which is the deployable, its provider and its attach handle."""

    PROFILE = 'n6000'
    SRIOV = True

    def _numvfs(self):
        return [v for r, v in self.kernel.writes
                if r.endswith('/sriov_numvfs')]

    def test_sriov_disabled_and_port_assigned_around_the_load(self):
        seen = []

        def during():
            # While the card is written its port is the PF's, no VF is.
            seen.append((sorted(self.sim.host.functions),
                         os.path.isdir(self.sim.port_dir(self.card))))
        self.during = during
        self.assertTrue(self._program(IMAGE_B))
        self.assertEqual([([PF], True)], seen)
        self.assertEqual(
            [dfl_sriov.FME_PORT_ASSIGN, dfl_abi.DFL_FPGA_FME_PORT_PR,
             dfl_sriov.FME_PORT_RELEASE], [r for r, _a in self.ioctls])
        self.assertEqual([dfl_abi.pack_port_id(0)] * 2,
                         [a for r, a in self.ioctls if r != self.ioctls[1][0]])
        self.assertEqual(['0', '1'], self._numvfs())
        # The VF is back on dfl-pci with its port, which holds F_B.
        self.assertTrue(self.sim.bound(VF))
        self.assertEqual(F_B, self._afu_id())

    def test_refused_while_a_vf_is_not_on_dfl_pci(self):
        # A guest took the VF (the inventory still has the card).
        kernel.bind_vfio(self.sim.host, VF)
        exc = self.assertRaises(exception.ProgrammingFailed, self._program,
                                IMAGE_B)
        # vfio-pci took the port with dfl-pci's remove: nothing to load.
        self.assertIn('no port of a DFL card is under this PCI function',
                      str(exc))
        self.assertEqual(([], []), (self.ioctls, self._numvfs()))

    def test_load_failure_still_gives_the_port_back(self):
        self.images.loads[IMAGE_B] = 'garbage'
        exc = self.assertRaises(exception.ProgrammingFailed, self._program,
                                IMAGE_B)
        self.assertIn('refused the partial reconfiguration of port 0',
                      str(exc))
        self.assertEqual(dfl_sriov.FME_PORT_RELEASE, self.ioctls[-1][0])
        self.assertEqual(['0', '1'], self._numvfs())
        self.assertTrue(self.sim.bound(VF))
        self.assertEqual(F_A, self._afu_id())

    def test_kernel_refuses_pr_of_a_port_in_vf_mode(self):
        # What programming without the assign meets (dfl_sriov's model).
        path = os.path.join(self.top, 'raw')
        with open(path, 'wb') as f:
            f.write(b'PR:' + F_B.encode())
        err = self.assertRaises(OSError, privileged.dfl_port_pr, self.dev,
                                'dfl-fme.0', 0, path)
        self.assertEqual(errno.ETIMEDOUT, err.errno)
        self.assertEqual(F_A, self._afu_id())


class PrivilegedArgumentsTest(DflProgramBase):
    """The privileged side checks the SR-IOV steps' arguments again."""

    def test_refusals(self):
        for args in ((self.dev, 'dfl-fme.0; x', 0, True),
                     (self.dev, 'dfl-fme.0', 8, True),
                     (self.dev, 'dfl-fme.0', True, True),
                     (self.dev, 'dfl-fme.0', 0, 'yes'),
                     ('dev', 'dfl-fme.0', 0, True)):
            self.assertRaises(exception.InvalidArgument,
                              privileged.dfl_port_config, *args)
        for args in ((self.root, '0000:81:00.0/..', 0),
                     (self.root, PF, -1), (self.root, PF, 257),
                     (self.root, PF, '1')):
            self.assertRaises(exception.InvalidArgument,
                              privileged.set_sriov_numvfs, *args)
        self.assertEqual(([], []), (self.ioctls, self.kernel.writes))


class PacA10SriovTest(SriovDflProgramTest):
    """The same on a PAC A10 (09c4, its VF 09c5) with its port released."""

    PROFILE = 'pac-a10'


class D5005SriovTest(SriovDflProgramTest):
    PROFILE = 'd5005'


class N3000ProgramTest(DflProgramTest):
    """An N3000: its VF is not dfl-pci's, so its port stays on the PF."""

    PROFILE = 'n3000'


class TwoPortSriovTest(DflProgramBase):
    """A card with two ports released to two VFs: both are assigned back
    and given back around the load of one (the programmer alone)."""

    PROFILE = 'd5005'
    SRIOV = True
    PORTS = 2

    def _program(self, image):
        path = os.path.join(self.top, 'image.gbs')
        self.images.download(image, path)
        programmers.ByDriver(self.conf).program(VF, path, 'intel')
        return True

    def test_other_vf_in_a_guest_refuses(self):
        kernel.bind_vfio(self.sim.host, '0000:81:00.2')
        exc = self.assertRaises(exception.ProgrammingFailed, self._program,
                                IMAGE_B)
        self.assertIn('0000:81:00.2 (vfio-pci)', str(exc))
        self.assertEqual([], self.ioctls)

    def test_both_ports_assigned_and_released(self):
        self.assertTrue(self._program(IMAGE_B))
        self.assertEqual(
            [(dfl_sriov.FME_PORT_ASSIGN, 0), (dfl_sriov.FME_PORT_ASSIGN, 1),
             (dfl_abi.DFL_FPGA_FME_PORT_PR, 0),
             (dfl_sriov.FME_PORT_RELEASE, 0),
             (dfl_sriov.FME_PORT_RELEASE, 1)],
            [(r, struct.unpack_from('=i', a, 8 if len(a) > 4 else 0)[0])
             for r, a in self.ioctls])
        self.assertEqual(F_B, self._afu_id())
        with open(os.path.join(self.sim.port_dir(self.card, 1),
                               'afu_id')) as f:
            self.assertEqual(F_A, f.read().strip())


class FpgaconfProgramTest(DflProgramTest):
    """``programmer = command`` with (the simulator's) OPAE fpgaconf, the
    card chosen by the deployable's segment, bus and device (the same for
    the VF of a released port as for its PF, which holds the FME): the
    manager reads the function back from the port's afu_id."""

    PROGRAMMER = 'command'

    def setUp(self):
        super().setUp()
        # fpgaconf runs in its own process: no ioctl stand-in there, and
        # nothing observable while it runs.
        self.requests = None

    def test_program_and_journal(self):
        self.assertTrue(self._program(IMAGE_B))
        self.assertEqual(F_B, self._afu_id())
        self.assertEqual([TRAIT_B], self.placement.traits[self.rp])
        self.assertEqual({self.rp: False}, self.placement.reserved)
        with open(os.path.join(self.top, 'programmed.log')) as f:
            self.assertEqual([self.handle, F_B], f.read().split()[1:])

    def test_function_check_after_programming(self):
        self.images.loads[IMAGE_B] = 'deadbeefdeadbeefdeadbeefdeadbeef'
        exc = self.assertRaises(exception.ProgrammingFailed, self._program,
                                IMAGE_B)
        self.assertIn('the device reports CUSTOM_FPGA_FUNCTION_ID_INTEL_'
                      'DEADBEEFDEADBEEFDEADBEEFDEADBEEF after loading '
                      + TRAIT_B, str(exc))
        self.assertEqual({self.rp: False}, self.placement.reserved)

    def test_wrong_interface_is_never_written(self):
        self.images.compat_id = '0123456789abcdef0123456789abcdef'
        exc = self.assertRaises(exception.ProgrammingFailed, self._program,
                                IMAGE_B)
        self.assertIn('exited with code 4: No suitable slots found.',
                      str(exc))
        self.assertEqual(F_A, self._afu_id())

    def test_same_function_kept_even_in_use(self):
        self.domains.users = {self.handle: 'instance-1'}
        self._allocate('server-1', 'dp-a')
        self.assertTrue(self._program(IMAGE_A))
        self.assertEqual(F_A, self._afu_id())

    def test_promise_refuses_another_function(self):
        self._allocate('server-1', 'dp-a')
        self.assertRaises(exception.DeviceBusy, self._program, IMAGE_B)
        self.assertEqual(F_A, self._afu_id())


class SriovFpgaconfProgramTest(FpgaconfProgramTest):
    PROFILE = 'n6000'
    SRIOV = True
