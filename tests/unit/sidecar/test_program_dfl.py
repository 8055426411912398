"""Seed 004's guarantees on Intel DFL cards: the real FPGA driver reads a
card the simulator writes from the kernel's ABI, the real programmers
write it (``dfl``: DFL_FPGA_FME_PORT_PR to a stand-in of the kernel's
fme_pr(); ``command``: the simulator's fpgaconf), and the programming
manager keeps its promises: a function a server relies on is never
replaced, the port's afu_id is checked after loading, the provider's
function trait is what the weigher of function affinity reads, and a job
in flight is journaled."""

import json
import os
import sys
from unittest import mock

import fixtures

from sidecar import dfl_abi
from sidecar import exception
from sidecar.discovery import inventory
from sidecar.drivers import fpga
from sidecar.program import gbs
from sidecar.program import journal
from sidecar.program import manager as program
from sidecar.program import programmers
from sidecar.sources import sysfs
from sidecar_simulator import dfl
from sidecar_simulator import dfl_health as sim_health
from sidecar_simulator.tools import fpgaconf
from tests.unit.sidecar import simhost
from tests.unit.sidecar import test_privileged
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


class DflProgramTest(simhost.SimHostTestCase):
    """Subclasses set PROFILE and SRIOV."""

    PROFILE = 'd5005'
    SRIOV = False
    PROGRAMMER = 'dfl'

    def setUp(self):
        super().setUp()
        self.useFixture(test_privileged.InProcess())
        self.useFixture(fixtures.MockPatch(
            'sidecar.program.promises.SETTLE_SECONDS', 0))
        self.handle = VF if self.SRIOV else PF
        self.rp = 'rp-compute1_' + self.handle
        # fpgaconf logs beside the sysfs root.
        self.top, self.root = self.root, os.path.join(self.root, 'sys')
        self.config.config(sysfs_root=self.root, group='sidecar')
        self.sim = dfl.DflHost()
        self.card = self.sim.add_card(self.PROFILE, afu_id=F_A,
                                      sriov=self.SRIOV, address=PF)
        self.dev = os.path.join(self.top, 'dev')
        self.sim.write(self.root, self.dev)
        self.requests = []
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
        """The simulated card's fme_pr() (sidecar_simulator.dfl) on the
        /dev/dfl-fme.N the sidecar opened; ``during`` runs while the card
        is being written."""
        self.requests.append(dfl_abi.unpack_port_pr(arg))
        if self.during:
            self.during()
        return self.sim.fme_pr(
            os.path.basename(os.readlink('/proc/self/fd/%d' % fd)),
            request, arg)

    def _afu_id(self):
        with open(os.path.join(self.sim.port_dir(self.card), 'afu_id')) as f:
            return f.read().strip()

    def _program(self, image):
        return self.manager.fpga_program(CPID, image, 'intel')

    def _allocate(self, consumer, profile):
        self.placement.allocated.setdefault(self.rp, []).append(consumer)
        self.cyborg.bind(consumer, profile, self.rp)

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

    def setUp(self):
        super().setUp()
        from tests.unit.sidecar import test_dfl_health
        self.kernel = self.useFixture(test_dfl_health.KernelWrites())

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
