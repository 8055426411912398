import os

import fixtures
import testtools

from sidecar import exception
from sidecar import model
from sidecar import privileged
from sidecar.program import mdev

GPU = '0000:3b:00.0'
UUID = 'b5b1c7e2-4b5b-4e8c-9f61-0f5b2b5c2d11'


#: An SR-IOV GPU (vGPU 16 and earlier): its VFs are the mdev parents.
A100, A100_VF = '0000:82:00.0', '0000:82:00.1'


class FakeInventory:
    def devices(self):
        handles = tuple(model.AttachHandle('MDEV', GPU, 'nvidia-35', i)
                        for i in range(2))
        dep = model.Deployable(GPU, 'VGPU', 2, attach_handles=handles)
        vf_handles = (model.AttachHandle('MDEV', A100_VF, 'nvidia-474'),)
        a100 = model.Deployable(A100, 'VGPU', 1, attach_handles=vf_handles)
        return [model.Device('GPU', '10de', '1eb8', GPU, (dep,)),
                model.Device('GPU', '10de', '20f1', A100, (a100,))]

    def device(self, address):
        return next((d for d in self.devices() if d.address == address),
                    None)


class FakeDomains:
    users = {}
    #: Those of ``users`` that are shut off.
    stopped = ()

    def devices_in_use(self):
        return dict(self.users)

    def devices_running(self):
        return {d: n for d, n in self.users.items() if d not in self.stopped}


class MdevManagerTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.calls = []
        self.useFixture(fixtures.MockPatchObject(
            privileged, 'create_mdev',
            lambda *a: self.calls.append(('create',) + a)))
        self.useFixture(fixtures.MockPatchObject(
            privileged, 'remove_mdev',
            lambda *a: self.calls.append(('remove',) + a)))
        self.domains = FakeDomains()
        self.manager = mdev.MdevManager(self.root, FakeInventory(),
                                        self.domains)

    def test_create(self):
        self.manager.create(GPU, 'nvidia-35', UUID.upper())
        self.assertEqual([('create', self.root, GPU, 'nvidia-35', UUID)],
                         self.calls)

    def test_create_on_a_vf_of_an_sriov_gpu(self):
        # cyborg-conductor asks for the handle's address: the VF.
        self.manager.create(A100_VF, 'nvidia-474', UUID)
        self.assertEqual([('create', self.root, A100_VF, 'nvidia-474',
                           UUID)], self.calls)
        # Not on its PF, which hosts none, nor in a type the VF lacks.
        for args in ((A100, 'nvidia-474', UUID),
                     (A100_VF, 'nvidia-35', UUID)):
            self.assertRaises(exception.SidecarError, self.manager.create,
                              *args)

    def test_create_existing_is_a_no_op(self):
        os.makedirs(os.path.join(self.root, 'bus/mdev/devices', UUID))
        self.manager.create(GPU, 'nvidia-35', UUID)
        self.assertEqual([], self.calls)

    def test_malformed_arguments_change_nothing(self):
        malformed = [('0000:3b:00.0\n', 'nvidia-35', UUID),
                     ('../../x', 'nvidia-35', UUID),
                     (GPU, 'nvidia-99', UUID),
                     (GPU, '../nvidia-35', UUID),
                     (GPU, 'nvidia-35', 'not-a-uuid'),
                     ('0000:3c:00.0', 'nvidia-35', UUID)]
        for args in malformed:
            self.assertRaises(exception.SidecarError, self.manager.create,
                              *args)
        # Remove checks them all only for an mdev that exists.
        os.makedirs(os.path.join(self.root, 'bus/mdev/devices', UUID))
        for args in malformed:
            self.assertRaises(exception.SidecarError, self.manager.remove,
                              *args)
        self.assertEqual([], self.calls)

    def test_remove_of_a_missing_mdev_needs_only_its_uuid(self):
        # Cyborg unbinding an ARQ whose create was refused: nothing to do.
        self.manager.remove(GPU, '../nvidia-35', UUID)
        self.manager.remove('../../x', '<xml/>', UUID)
        self.assertRaises(exception.SidecarError, self.manager.remove,
                          GPU, 'nvidia-35', '../' + UUID)
        self.assertEqual([], self.calls)

    def test_remove(self):
        os.makedirs(os.path.join(self.root, 'bus/mdev/devices', UUID))
        self.manager.remove(GPU, 'nvidia-35', UUID)
        self.assertEqual([('remove', self.root, UUID)], self.calls)

    def test_remove_missing_is_a_no_op(self):
        self.manager.remove(GPU, 'nvidia-35', UUID)
        self.assertEqual([], self.calls)

    def test_remove_in_use_is_refused(self):
        os.makedirs(os.path.join(self.root, 'bus/mdev/devices', UUID))
        self.domains.users = {UUID: 'instance-3'}
        ex = self.assertRaises(exception.DeviceBusy, self.manager.remove,
                               GPU, 'nvidia-35', UUID)
        self.assertIn('instance-3', str(ex))
        self.assertEqual([], self.calls)

    def test_remove_of_a_shut_off_domain(self):
        # The source of a cold migration: powered off, still defined, its
        # ARQ unbound.
        os.makedirs(os.path.join(self.root, 'bus/mdev/devices', UUID))
        self.domains.users = {UUID: 'instance-3'}
        self.domains.stopped = (UUID,)
        self.manager.remove(GPU, 'nvidia-35', UUID)
        self.assertEqual([('remove', self.root, UUID)], self.calls)


class FakeCyborg:
    def __init__(self, arqs=(), error=None):
        self.arqs = list(arqs)
        self.error = error
        self.calls = 0

    def all_arqs(self):
        self.calls += 1
        if self.error:
            raise self.error
        return self.arqs


def _arq(uuid, host='compute1', state='Bound', kind='MDEV',
         address=GPU, asked_type='nvidia-35'):
    domain, bus, rest = address.split(':')
    device, function = rest.split('.')
    return {'uuid': 'arq-' + uuid[:8], 'state': state, 'hostname': host,
            'attach_handle_type': kind, 'attach_handle_uuid': uuid.upper(),
            'attach_handle_info': {'domain': domain, 'bus': bus,
                                   'device': device, 'function': function,
                                   'asked_type': asked_type}}


class MdevRestoreTest(testtools.TestCase):
    """A host reboot removes every mdev; the sidecar creates those of its
    host's Bound ARQs again before it reports."""

    OTHER = 'a3f1c7e2-4b5b-4e8c-9f61-0f5b2b5c2d12'

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.calls = []
        self.refuse = False

        def create(*args):
            if self.refuse:
                raise exception.MdevError(uuid=args[3], address=args[1],
                                          reason='no instance available')
            self.calls.append(args)
        self.useFixture(fixtures.MockPatchObject(privileged, 'create_mdev',
                                                 create))

    def manager(self, cyborg):
        return mdev.MdevManager(self.root, FakeInventory(), FakeDomains(),
                                host='compute1', cyborg=cyborg)

    def test_mdevs_of_bound_arqs_created_again_once(self):
        cyborg = FakeCyborg([
            _arq(UUID), _arq(self.OTHER, address=A100_VF,
                             asked_type='nvidia-474'),
            # Not this host's, not Bound, not an mdev: left alone.
            _arq('c3f1c7e2-4b5b-4e8c-9f61-0f5b2b5c2d13', host='compute2'),
            _arq('d3f1c7e2-4b5b-4e8c-9f61-0f5b2b5c2d14', state='Unbound'),
            _arq('e3f1c7e2-4b5b-4e8c-9f61-0f5b2b5c2d15', kind='PCI')])
        manager = self.manager(cyborg)
        manager.housekeeping()
        self.assertEqual([(self.root, GPU, 'nvidia-35', UUID),
                          (self.root, A100_VF, 'nvidia-474', self.OTHER)],
                         self.calls)
        # Once done, the ARQs are not read again.
        manager.housekeeping()
        self.assertEqual(1, cyborg.calls)
        self.assertEqual(2, len(self.calls))

    def test_existing_mdev_left_as_it_is(self):
        os.makedirs(os.path.join(self.root, 'bus/mdev/devices', UUID))
        self.assertTrue(self.manager(FakeCyborg([_arq(UUID)])).restore_bound())
        self.assertEqual([], self.calls)

    def test_refused_or_unreadable_tried_again_next_cycle(self):
        cyborg = FakeCyborg(error=exception.CyborgError(reason='down'))
        manager = self.manager(cyborg)
        manager.housekeeping()
        self.assertEqual([], self.calls)
        cyborg.error = None
        cyborg.arqs = [_arq(UUID)]
        self.refuse = True
        manager.housekeeping()
        self.assertEqual([], self.calls)
        self.refuse = False
        manager.housekeeping()
        self.assertEqual([(self.root, GPU, 'nvidia-35', UUID)], self.calls)
        self.assertEqual(3, cyborg.calls)

    def test_without_cyborg_nothing_is_restored(self):
        mdev.MdevManager(self.root, FakeInventory(),
                         FakeDomains()).housekeeping()
        self.assertEqual([], self.calls)
