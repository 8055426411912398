import threading
from unittest import mock

import fixtures
import testtools

from sidecar import exception
from sidecar import model
from sidecar.program import journal
from sidecar.program import manager as program

PF = '0000:81:00.0'
VFS = ('0000:81:00.1', '0000:81:00.2')
CPID = {'cpid_type': 'PCI', 'cpid_info': {'domain': '0000', 'bus': '81',
                                          'device': '00', 'function': '0'}}
IMAGE_A = '8a5c2d4e-3b1f-4f7e-9a0d-1c2b3a4d5e6f'
IMAGE_B = '9b6d3e5f-4c2a-4a8f-8b1e-2d3c4b5e6f70'
FUNCTIONS = {IMAGE_A: 'AAAA1111', IMAGE_B: 'BBBB2222'}
TRAIT_A = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_AAAA1111'
TRAIT_B = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_BBBB2222'


def _device(function=None):
    traits = ('OWNER_CYBORG',)
    if function:
        traits += ('CUSTOM_FPGA_FUNCTION_ID_INTEL_%s' % function,)
    dep = model.Deployable(
        name=PF, resource_class='FPGA', num_accelerators=2, traits=traits,
        attach_handles=tuple(model.AttachHandle('PCI', a) for a in VFS),
        driver_name='intel')
    return model.Device('FPGA', '8086', '09c4', PF, (dep,))


class FakeFpga:
    """The inventory and the programmer of one simulated FPGA."""

    def __init__(self):
        self.function = None
        self.programmed = []
        self.driver_names = []
        self.fail = None
        self.in_program = threading.Event()
        self.release = None

    def device(self, address):
        return _device(self.function) if address == PF else None

    def refresh_device(self, address):
        return self.device(address)

    def devices(self):
        return [self.device(PF)]

    def program(self, address, path, driver_name=None):
        self.driver_names.append(driver_name)
        self.in_program.set()
        if self.release:
            self.release.wait(5)
        if self.fail:
            raise exception.ProgrammingFailed(address=address,
                                              reason=self.fail)
        with open(path) as f:
            self.function = f.read()
        self.programmed.append((address, self.function))


class FakeImages:
    def get_metadata(self, image_id):
        return {'id': image_id, 'accel:function_id': FUNCTIONS[image_id]}

    def function_id(self, metadata):
        return metadata.get('accel:function_id')

    def download(self, image_id, path, metadata=None):
        assert metadata['id'] == image_id
        with open(path, 'w') as f:
            f.write(FUNCTIONS[image_id])


RP = 'rp-compute1_' + PF


class FakePlacement:
    def __init__(self):
        self.reserved = {}
        self.history = []
        self.traits = {}
        self.allocated = {}
        self.down = False

    def _check_up(self):
        if self.down:
            raise exception.PlacementError(reason='Placement is unreachable')

    def find_provider(self, name):
        self._check_up()
        return 'rp-' + name

    def allocations(self, rp):
        self._check_up()
        return {c: {'FPGA': 1} for c in self.allocated.get(rp, ())}

    def read_provider(self, rp):
        self._check_up()
        return {}, set(self.traits.get(rp, ()))

    def reserve_all(self, rp):
        self.reserved[rp] = True
        self.history.append(('reserve', rp))
        return {'FPGA': 0}

    def restore_reserved(self, rp, previous):
        self.reserved[rp] = False
        self.history.append(('restore', rp, previous))

    def replace_traits_with_prefix(self, rp, prefix, traits):
        self.traits[rp] = list(traits)


PROFILES = {
    'dp-a': {'name': 'dp-a', 'groups': [
        {'resources:FPGA': '1', 'accel:bitstream_id': IMAGE_A}]},
    'dp-b': {'name': 'dp-b', 'groups': [
        {'resources:FPGA': '1', 'accel:bitstream_id': IMAGE_B}]},
    'dp-fn-b': {'name': 'dp-fn-b', 'groups': [
        {'resources:FPGA': '1', 'accel:function_id': 'bbbb2222'}]},
    'dp-trait-b': {'name': 'dp-trait-b', 'groups': [
        {'resources:FPGA': '1', 'trait:' + TRAIT_B: 'required'}]},
    'dp-any': {'name': 'dp-any', 'groups': [{'resources:FPGA': '1'}]},
}


class FakeCyborg:
    """Cyborg's ARQs and device profiles as the API shows them."""

    def __init__(self):
        self.arqs = {}
        self.down = False

    def bind(self, consumer, profile, rp=RP):
        self.arqs.setdefault(consumer, []).append({
            'uuid': 'arq-' + consumer, 'instance_uuid': consumer,
            'device_rp_uuid': rp, 'device_profile_name': profile,
            'device_profile_group_id': 0})

    def arqs_of(self, consumer):
        if self.down:
            raise exception.CyborgError(reason='Cyborg is unreachable')
        return list(self.arqs.get(consumer, ()))

    def device_profile(self, name):
        if self.down or name not in PROFILES:
            raise exception.CyborgError(reason='no profile %s' % name)
        return PROFILES[name]


class FakeDomains:
    def __init__(self):
        self.users = {}

    def devices_in_use(self):
        return dict(self.users)

    def devices_running(self):
        return dict(self.users)


class ProgramTestBase(testtools.TestCase):
    """One simulated FPGA, its providers, its consumers in Cyborg."""

    def setUp(self):
        super().setUp()
        self.state = self.useFixture(fixtures.TempDir()).path
        self.fpga = FakeFpga()
        self.placement = FakePlacement()
        self.domains = FakeDomains()
        self.cyborg = FakeCyborg()
        # A consumer without an ARQ for the card is refused at once.
        self.useFixture(fixtures.MockPatch(
            'sidecar.program.promises.SETTLE_SECONDS', 0))
        self.manager = self._manager()

    def _manager(self):
        return program.ProgramManager(
            'compute1', self.fpga, self.fpga, FakeImages(), self.placement,
            self.domains, journal.Journal(self.state), self.cyborg)

    def _allocate(self, consumer, profile=None, rp=RP):
        """``consumer`` holds an allocation on ``rp`` and, with a
        ``profile``, an ARQ of that profile bound to it."""
        self.placement.allocated.setdefault(rp, []).append(consumer)
        if profile:
            self.cyborg.bind(consumer, profile, rp)

    def _program(self, image=IMAGE_A, cpid=CPID, driver='intel'):
        return self.manager.fpga_program(cpid, image, driver)


class ProgramManagerTest(ProgramTestBase):

    def test_program(self):
        self.assertTrue(self._program())
        self.assertEqual([(PF, 'AAAA1111')], self.fpga.programmed)
        # The card's driver picks the programmer ([fpga] driver_programmers).
        self.assertEqual(['intel'], self.fpga.driver_names)
        rp = 'rp-compute1_' + PF
        self.assertEqual([('reserve', rp), ('restore', rp, {'FPGA': 0})],
                         self.placement.history)
        self.assertEqual([TRAIT_A], self.placement.traits[rp])
        self.assertEqual([], journal.Journal(self.state).jobs.items())

    def test_reserved_while_programming(self):
        self.fpga.release = threading.Event()
        worker = threading.Thread(target=self._program)
        worker.start()
        self.assertTrue(self.fpga.in_program.wait(5))
        self.assertTrue(self.placement.reserved['rp-compute1_' + PF])
        self.fpga.release.set()
        worker.join(5)
        self.assertFalse(self.placement.reserved['rp-compute1_' + PF])

    def test_same_function_is_not_reprogrammed_even_in_use(self):
        self._program()
        self.domains.users = {VFS[0]: 'instance-1'}
        self.assertTrue(self._program())
        self.assertEqual(1, len(self.fpga.programmed))

    def test_refused_while_a_domain_uses_a_handle(self):
        self.fpga.function = 'AAAA1111'
        self.domains.users = {VFS[1]: 'instance-7'}
        ex = self.assertRaises(exception.DeviceBusy, self._program, IMAGE_B)
        self.assertIn('instance-7', str(ex))
        self.assertEqual([], self.fpga.programmed)
        self.assertEqual([], self.placement.history)

    def test_serialized(self):
        # Two requests for different functions at once: the second waits
        # for the first and then finds the device promised to the server
        # the first was for.
        self._allocate('server-a', 'dp-a')
        self._allocate('server-b', 'dp-b')
        self.fpga.release = threading.Event()
        errors = []

        def second():
            try:
                self._program(IMAGE_B)
            except exception.DeviceBusy as exc:
                errors.append(exc)

        first = threading.Thread(target=self._program)
        first.start()
        self.assertTrue(self.fpga.in_program.wait(5))
        other = threading.Thread(target=second)
        other.start()
        other.join(0.2)
        self.assertTrue(other.is_alive())
        self.fpga.release.set()
        first.join(5)
        other.join(5)
        self.assertEqual([(PF, 'AAAA1111')], self.fpga.programmed)
        self.assertEqual(1, len(errors))

    def test_failure_restores_reservation(self):
        self.fpga.fail = 'bad bitstream'
        self.assertRaises(exception.ProgrammingFailed, self._program)
        self.assertFalse(self.placement.reserved['rp-compute1_' + PF])
        self.assertEqual([], journal.Journal(self.state).jobs.items())

    def test_wrong_function_after_load(self):
        # The device does not report the function the image promised.
        images = FakeImages()
        images.download = (
            lambda image_id, path, metadata: open(path, 'w').write('FF'))
        self.manager._images = images
        ex = self.assertRaises(exception.ProgrammingFailed, self._program)
        self.assertIn('CUSTOM_FPGA_FUNCTION_ID_INTEL_FF', str(ex))

    def test_recover_after_kill(self):
        rp = 'rp-compute1_' + PF
        j = journal.Journal(self.state)
        j.jobs.put(PF, {'image': IMAGE_B, 'trait': TRAIT_B, 'started': 1,
                        'reserved': {rp: {'FPGA': 0}}})
        self.fpga.function = 'AAAA1111'
        self._manager().recover()
        self.assertEqual([('restore', rp, {'FPGA': 0})],
                         self.placement.history)
        self.assertEqual([TRAIT_A], self.placement.traits[rp])
        self.assertEqual([], journal.Journal(self.state).jobs.items())

    def test_failed_restore_is_retried_next_cycle(self):
        rp = 'rp-compute1_' + PF
        restore = self.placement.restore_reserved
        self.placement.restore_reserved = mock.Mock(
            side_effect=exception.PlacementError(reason='unreachable'))
        self.assertTrue(self._program())
        # Still journaled: the provider is still reserved.
        self.assertEqual([PF], [address for address, _ in
                                journal.Journal(self.state).jobs.items()])
        self.placement.restore_reserved = restore
        self.manager.recover()
        self.assertFalse(self.placement.reserved[rp])
        self.assertEqual([], journal.Journal(self.state).jobs.items())

    def test_recover_leaves_a_job_in_flight_alone(self):
        self.fpga.release = threading.Event()
        worker = threading.Thread(target=self._program)
        worker.start()
        self.assertTrue(self.fpga.in_program.wait(60))
        with self.manager.idle(PF) as idle:
            self.assertFalse(idle)
        self.manager.recover()
        rp = 'rp-compute1_' + PF
        self.assertTrue(self.placement.reserved[rp])
        self.fpga.release.set()
        worker.join(60)
        self.assertFalse(self.placement.reserved[rp])
        with self.manager.idle(PF) as idle:
            self.assertTrue(idle)

    def test_malformed_arguments(self):
        bad = [
            ('not-a-dict', IMAGE_A, 'intel'),
            (dict(CPID, cpid_type='USB'), IMAGE_A, 'intel'),
            (dict(CPID, cpid_info='0000:81:00.0'), IMAGE_A, 'intel'),
            (dict(CPID, cpid_info=dict(CPID['cpid_info'], bus='zz')),
             IMAGE_A, 'intel'),
            (dict(CPID, cpid_info=dict(CPID['cpid_info'], bus='1ff')),
             IMAGE_A, 'intel'),
            (dict(CPID, cpid_info=dict(CPID['cpid_info'], function='9')),
             IMAGE_A, 'intel'),
            (CPID, '../../etc/passwd', 'intel'),
            (CPID, IMAGE_A, 'intel; rm -rf /'),
            (CPID, IMAGE_A, 'xilinx'),
        ]
        for cpid, image, driver in bad:
            self.assertRaises(exception.SidecarError, self._program, image,
                              cpid, driver)
        self.assertEqual([], self.fpga.programmed)
        self.assertEqual([], self.placement.history)

    def test_unknown_device(self):
        cpid = dict(CPID, cpid_info=dict(CPID['cpid_info'], bus='82'))
        self.assertRaises(exception.UnknownDevice, self._program, IMAGE_A,
                          cpid)

    def test_function_trait_formula(self):
        # cyborg.objects.extarq.fpga_ext_arq.FPGAExtARQ._update_placement
        self.assertEqual('CUSTOM_FPGA_FUNCTION_ID_XILINX_ABC123',
                         program.function_trait('xilinx', 'abc123'))
