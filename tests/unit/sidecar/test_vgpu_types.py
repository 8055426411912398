"""A vGPU 17 type set on an idle VF at bind (sidecar.program.vgpu_types),
under seed 004's promise rules, on the simulator's H100 (the driver side
of a type write: sidecar_simulator.nvidia.NvidiaHost.kernel_write)."""

import threading

import fixtures

from sidecar import exception
from sidecar import privileged
from sidecar.discovery import inventory as inventory_mod
from sidecar.drivers import gpu
from sidecar.drivers import gpu_vfio
from sidecar.program import journal
from sidecar.program import vgpu_types
from sidecar.sources import sysfs
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost
from tests.unit.sidecar import test_privileged
from tests.unit.sidecar import test_program as fakes

H100_4C, H100_8C = 'NVIDIA H100-4C', 'NVIDIA H100-8C'
TRAIT_4C = 'CUSTOM_NVIDIA_2331_H100_4C'
TRAIT_8C = 'CUSTOM_NVIDIA_2331_H100_8C'
fakes.PROFILES.update({
    'dp-4c': {'name': 'dp-4c', 'groups': [
        {'resources:VGPU': '1', 'trait:' + TRAIT_4C: 'required',
         'trait:CUSTOM_NUMA_NODE_0': 'required'}]},
    'dp-8c': {'name': 'dp-8c', 'groups': [
        {'resources:VGPU': '1', 'trait:' + TRAIT_8C: 'required'}]},
    'dp-any-gpu': {'name': 'dp-any-gpu', 'groups': [
        {'resources:VGPU': '1'}]},
})


class _Base(simhost.SimHostTestCase):
    """An H100 with four VFs, VF 0 given H100-4C by the operator; the
    other three idle, offered for H100-8C (first) or H100-4C."""

    offers = ['2331:' + H100_8C, '2331:' + H100_4C]

    def setUp(self):
        super().setUp()
        self.useFixture(test_privileged.InProcess())
        self.state = self.useFixture(fixtures.TempDir()).path
        self.config.config(state_path=self.state, group='sidecar')
        self.sim = nvidia.NvidiaHost()
        self.card = self.sim.add_vfio_vgpu_card(num_vfs=4,
                                                types={0: H100_4C})
        self.vfs = self.card.vfs
        self.sim.write(self.root)
        self.config.config(group='gpu', device_selector=['10de:*'],
                           vfio_vgpu_types=self.offers)
        self.inventory = inventory_mod.Inventory(
            [gpu.GpuDriver(self.conf, sysfs.SysfsSource(self.root))])
        self.inventory.discover()
        self.writes = []

        def write(root, relpath, value):
            target = privileged._resolve_under(root, relpath)
            self.writes.append((target.rsplit('/', 3)[-3], value))
            self.before_write(target, value)
            self.sim.kernel_write(target, value)
        self.useFixture(fixtures.MockPatch(
            'sidecar.privileged._write_sysfs', side_effect=write))
        self.placement = fakes.FakePlacement()
        self.cyborg = fakes.FakeCyborg()
        self.domains = fakes.FakeDomains()
        self.useFixture(fixtures.MockPatch(
            'sidecar.program.promises.SETTLE_SECONDS', 0))
        self.setter = vgpu_types.VgpuTypeSetter(
            'compute1', self.root, self.inventory, self.placement,
            self.domains, journal.Journal(self.state), self.cyborg,
            gpu_vfio.parse_offers(self.offers))

    def before_write(self, target, value):
        pass

    def rp(self, vf):
        return 'rp-compute1_' + vf

    def bind(self, consumer, profile, vf):
        """``consumer`` is scheduled to ``vf`` and its ARQ bound there."""
        self.placement.allocated.setdefault(self.rp(vf), []).append(consumer)
        self.cyborg.bind(consumer, profile, self.rp(vf))

    def current(self, vf):
        return gpu_vfio.read_state(self.root, vf)[1]

    def offered(self, device):
        """``{deployable name: (count, type traits, [VFs])}``."""
        return {d.name: (d.num_accelerators,
                         [t for t in d.traits if t.startswith('CUSTOM_')],
                         [h.address for h in d.attach_handles])
                for d in device.deployables}


class OfferTest(_Base):

    def test_idle_vfs_offered_for_the_type_the_card_holds(self):
        (device,) = self.inventory.devices()
        # VF 0 holds 4C; the card runs one type at a time, so its idle VFs
        # are offered for 4C only, whatever the option lists first: one
        # provider of the card for the type, 20 fit an H100 (one is VF
        # 0's), one vGPU per VF.
        self.assertEqual({
            self.vfs[0]: (1, [TRAIT_4C], [self.vfs[0]]),
            self.card.pf + '_H100_4C': (3, [TRAIT_4C], self.vfs[1:])},
            self.offered(device))
        self.assertEqual({'no'}, {h.managed for d in device.deployables
                                  for h in d.attach_handles})

    def test_blank_card_offers_every_type_of_the_option(self):
        self.sim.set_vgpu_type(self.card, self.vfs[0], '0')
        (device,) = self.inventory.discover()
        self.assertEqual({
            self.card.pf + '_H100_8C': (4, [TRAIT_8C], self.vfs),
            self.card.pf + '_H100_4C': (4, [TRAIT_4C], self.vfs)},
            self.offered(device))

    def test_idle_vfs_have_a_vendor_vfio_handle(self):
        (device,) = self.inventory.devices()
        handles = {h.address: h for d in device.deployables
                   for h in d.attach_handles}
        # VF 0's type was set by the operator: a PCI handle; the offered
        # ones an MDEV handle cyborg-conductor calls the sidecar for.
        self.assertEqual(('PCI', 'no', False), (
            handles[self.vfs[0]].attach_type, handles[self.vfs[0]].managed,
            handles[self.vfs[0]].vendor_vfio))
        self.assertEqual({
            'domain': '0000', 'bus': '81', 'device': '00', 'function': '2',
            'asked_type': H100_4C, 'vgpu_mark': H100_4C + '_0',
            'managed': 'no', 'vgpu_framework': 'vendor-vfio'},
            handles[self.vfs[1]].attach_info())
        self.assertNotIn('ERROR', self.log.output)

    def test_bad_option_item(self):
        for item in ('H100-4C', '2331', 'zz:NVIDIA H100-4C', '2331:'):
            self.assertRaises(exception.InvalidArgument,
                              gpu_vfio.parse_offers, [item])
        self.assertEqual({'2331': [H100_4C]},
                         gpu_vfio.parse_offers(['0x2331: ' + H100_4C]))


class SetTypeTest(_Base):

    def test_type_set_read_back_and_reported(self):
        self.bind('server-a', 'dp-4c', self.vfs[1])
        self.assertEqual('1054', self.setter.set_type(self.vfs[1]))
        self.assertEqual(1054, self.current(self.vfs[1]))
        self.assertEqual([(self.vfs[1], '1054')], self.writes)
        self.assertEqual([], self.setter.jobs())
        self.assertIn('VF %s now holds vGPU type %s' % (self.vfs[1], H100_4C),
                      self.log.output)

    def test_type_already_held_is_not_written(self):
        self.bind('server-a', 'dp-4c', self.vfs[0])
        self.domains.users[self.vfs[0]] = 'instance-1'
        self.assertEqual('1054', self.setter.set_type(self.vfs[0], H100_4C))
        self.assertEqual([], self.writes)

    def test_other_type_never_replaces_a_held_one(self):
        ex = self.assertRaises(exception.DeviceBusy, self.setter.set_type,
                               self.vfs[0], H100_8C)
        self.assertIn('holds vGPU type 1054', str(ex))
        self.assertEqual([], self.writes)
        self.assertEqual(1054, self.current(self.vfs[0]))

    def test_not_creatable_is_refused_cleanly(self):
        ex = self.assertRaises(exception.InvalidArgument,
                               self.setter.set_type, self.vfs[1], H100_8C)
        self.assertIn('cannot host %r' % H100_8C, str(ex))
        self.assertIn('lists %s' % H100_4C, str(ex))
        self.assertEqual([], self.writes)
        self.assertEqual(0, self.current(self.vfs[1]))

    def test_privsep_checks_creatable_again(self):
        # A caller that skipped the checks still cannot write a type the
        # VF does not list, nor over a held type, nor through a bad path.
        self.assertRaises(exception.InvalidArgument,
                          privileged.set_vgpu_type, self.root, self.vfs[1],
                          '1056')
        self.assertRaises(exception.DeviceBusy, privileged.set_vgpu_type,
                          self.root, self.vfs[0], '1054')
        for address, type_id in (('../../x', '1054'),
                                 (self.vfs[1], '0'),
                                 (self.vfs[1], '1054\n0'),
                                 (self.vfs[1], 1054)):
            self.assertRaises(exception.InvalidArgument,
                              privileged.set_vgpu_type, self.root, address,
                              type_id)
        self.assertEqual([], self.writes)

    def test_refused_while_a_domain_holds_the_vf(self):
        self.domains.users[self.vfs[1]] = 'instance-9'
        ex = self.assertRaises(exception.DeviceBusy, self.setter.set_type,
                               self.vfs[1], H100_4C)
        self.assertIn('instance-9', str(ex))
        self.assertEqual([], self.writes)

    def test_a_consumer_asking_no_type_gets_the_providers(self):
        # Its allocation is on the card's 4C provider: 4C is what it gets.
        self.bind('server-x', 'dp-any-gpu', self.vfs[1])
        self.assertEqual('1054', self.setter.set_type(self.vfs[1], H100_4C))

    def test_placement_is_not_needed(self):
        self.placement.down = True
        self.assertEqual('1054', self.setter.set_type(self.vfs[1], H100_4C))

    def test_unknown_vf_and_bad_address(self):
        self.assertRaises(exception.UnknownDevice, self.setter.set_type,
                          self.card.pf, H100_4C)
        self.assertRaises(exception.InvalidArgument, self.setter.set_type,
                          '0000:81:00.1/../x', H100_4C)

    def test_malformed_type_list_is_refused(self):
        path = '%s/bus/pci/devices/%s/nvidia/creatable_vgpu_types' % (
            self.root, self.vfs[1])
        with open(path, 'w') as f:
            f.write('ID : vGPU Name\n1054 : <x>\n')
        ex = self.assertRaises(exception.DeviceBusy, self.setter.set_type,
                               self.vfs[1], H100_4C)
        self.assertIn('cannot be trusted', str(ex))
        self.assertEqual([], self.writes)

    def test_read_back_mismatch_fails_the_job(self):
        def lost(target, value):
            # The driver takes the write and the VF still reads 0.
            self.sim.kernel_write = lambda path, value: None
        self.before_write = lost
        ex = self.assertRaises(exception.ProgrammingFailed,
                               self.setter.set_type, self.vfs[1], H100_4C)
        self.assertIn('reads 0 after writing 1054', str(ex))
        self.assertEqual([], self.setter.jobs())

    def test_driver_refusal_fails_the_job(self):
        def other_tool(target, value):
            # Another host tool gives the card another type between the
            # check and the write: the driver answers EINVAL.
            self.sim.set_vgpu_type(self.card, self.vfs[0], '0')
            self.sim.set_vgpu_type(self.card, self.vfs[2], '1060')
        self.before_write = other_tool
        ex = self.assertRaises(exception.ProgrammingFailed,
                               self.setter.set_type, self.vfs[1], H100_4C)
        self.assertIn('the driver refused vGPU type 1054', str(ex))
        self.assertEqual(0, self.current(self.vfs[1]))
        self.assertEqual(1060, self.current(self.vfs[2]))
        self.assertEqual([], self.setter.jobs())

    def test_journaled_while_the_write_runs(self):
        seen = []
        self.before_write = lambda target, value: seen.extend(
            self.setter.jobs())
        self.setter.set_type(self.vfs[1], H100_4C)
        ((address, job),) = seen
        self.assertEqual(self.vfs[1], address)
        wanted = {'card': self.card.pf, 'type': '1054', 'name': H100_4C}
        self.assertEqual(wanted, {k: job[k] for k in wanted})
        self.assertEqual([], self.setter.jobs())

    def test_recover_closes_a_killed_job(self):
        self.setter._jobs.put(self.vfs[1], {'card': self.card.pf,
                                            'type': '1054'})
        self.setter.recover()
        self.assertEqual([], self.setter.jobs())
        self.assertIn('did not finish; it holds type 0', self.log.output)


class RaceTest(_Base):
    """Seed 004 for vGPU 17: two binds asking two types at once on one
    blank card never change a type under a server."""

    def setUp(self):
        super().setUp()
        self.sim.set_vgpu_type(self.card, self.vfs[0], '0')
        self.inventory.discover()

    def test_two_types_at_once_on_one_card(self):
        self.bind('server-a', 'dp-4c', self.vfs[1])
        self.bind('server-b', 'dp-8c', self.vfs[2])
        in_write = threading.Event()
        release = threading.Event()
        waiting = threading.Event()
        lock = threading.Lock()

        class Watched:
            def __enter__(self):
                if lock.locked():
                    waiting.set()
                lock.acquire()

            def __exit__(self, *exc):
                lock.release()

            def acquire(self, blocking=True):
                return lock.acquire(blocking)

            def release(self):
                lock.release()

        self.setter._lock_for = lambda card: Watched()

        def hold(target, value):
            if value == '1054':
                in_write.set()
                self.assertTrue(release.wait(60))
        self.before_write = hold
        results = {}

        def run(name, vf, type_name):
            try:
                results[name] = self.setter.set_type(vf, type_name)
            except exception.SidecarError as exc:
                results[name] = exc

        a = threading.Thread(target=run, args=('a', self.vfs[1], H100_4C))
        a.start()
        self.assertTrue(in_write.wait(60))
        b = threading.Thread(target=run, args=('b', self.vfs[2], H100_8C))
        b.start()
        # b waits for the card while a writes: it has read nothing yet.
        self.assertTrue(waiting.wait(60))
        self.assertEqual([(self.vfs[1], '1054')], self.writes)
        release.set()
        a.join(60)
        b.join(60)
        self.assertEqual('1054', results['a'])
        # b read the card as a left it: 8C no longer fits beside a 4C.
        self.assertIsInstance(results['b'], exception.InvalidArgument)
        self.assertIn('cannot host %r' % H100_8C, str(results['b']))
        self.assertEqual([(self.vfs[1], '1054')], self.writes)
        self.assertEqual([1054, 0], [self.current(vf)
                                     for vf in self.vfs[1:3]])

    def test_a_handle_of_another_type_is_refused(self):
        # VF 2 is offered by the card's 8C and 4C providers; once VF 1
        # holds 4C, the 8C handle of VF 2 is refused cleanly.
        self.setter.set_type(self.vfs[1], H100_4C)
        ex = self.assertRaises(exception.InvalidArgument,
                               self.setter.set_type, self.vfs[2], H100_8C)
        self.assertIn('cannot host %r' % H100_8C, str(ex))
        self.assertEqual([(self.vfs[1], '1054')], self.writes)
