"""vGPU 17 types set at bind and removed at unbind: cyborg-conductor's
``create_vgpu_mdev`` and ``remove_vgpu_mdev`` of a vendor-VFIO handle,
through the sidecar's agent RPC endpoint (sidecar.daemon.service), its
MdevManager and VgpuTypeSetter, on the simulator's H100."""

import json
import os
import threading

import oslo_messaging as messaging

from sidecar import exception
from sidecar.daemon import rpc
from sidecar.daemon import service
from sidecar.discovery import guests
from sidecar.discovery import health
from sidecar.discovery import vanished
from sidecar.drivers import gpu_vfio
from sidecar.program import journal
from sidecar.program import manager
from sidecar.program import mdev
from sidecar.program import vgpu_types
from tests.unit.sidecar import test_vgpu_types as base

H100_4C, H100_8C = base.H100_4C, base.H100_8C
UUID_A = '6f1c1bb8-55c5-4d57-9d58-3f0d7a0fd0a1'
UUID_B = '0b7e5d3c-2f4e-4a39-8a6c-91b4c7d2e6f2'


class FakeCyborg(base.fakes.FakeCyborg):
    """The ARQs as ``GET /accelerator_requests`` lists them, a bound one
    with its attach handle's UUID."""

    def __init__(self):
        super().__init__()
        self.handles = {}
        #: consumer -> the VF its ARQ's handle names (attach_handle_info).
        self.vfs = {}

    def all_arqs(self):
        if self.down:
            raise exception.CyborgError(reason='Cyborg is unreachable')
        found = []
        for consumer, arqs in self.arqs.items():
            for arq in arqs:
                arq = dict(arq, attach_handle_uuid=self.handles.get(consumer))
                if consumer in self.vfs:
                    domain, bus, rest = self.vfs[consumer].split(':')
                    device, function = rest.split('.')
                    arq['attach_handle_info'] = {
                        'domain': domain, 'bus': bus, 'device': device,
                        'function': function}
                found.append(arq)
        return found


class _BindBase(base._Base):

    def setUp(self):
        super().setUp()
        self.cyborg = FakeCyborg()
        self.programs = manager.ProgramManager(
            'compute1', self.inventory, None, None, self.placement,
            self.domains, journal.Journal(self.state), self.cyborg)
        self.setter = self.make_setter()
        self.mdevs = mdev.MdevManager(self.root, self.inventory,
                                      self.domains, vgpu_types=self.setter)

    def make_setter(self, **kwargs):
        return vgpu_types.VgpuTypeSetter(
            'compute1', self.root, self.inventory, self.placement,
            self.domains, journal.Journal(self.state), self.cyborg,
            gpu_vfio.parse_offers(self.offers),
            lock_for=self.programs.lock_for, **kwargs)

    def bind(self, consumer, profile, vf, handle=None):
        super().bind(consumer, profile, vf)
        if handle:
            self.cyborg.handles[consumer] = handle
            self.cyborg.vfs[consumer] = vf

    def handle(self, vf):
        """The attach handle the last discovery reported for ``vf``."""
        return next(h for device in self.inventory.devices()
                    for dep in device.deployables
                    for h in dep.attach_handles if h.address == vf)

    def traits(self, vf):
        return next([t for t in dep.traits if t.startswith('CUSTOM_')]
                    for device in self.inventory.devices()
                    for dep in device.deployables
                    if any(h.address == vf for h in dep.attach_handles))


class BindTest(_BindBase):
    """VF 0 holds H100-4C (the operator's); VFs 1-3 are offered for it."""

    def test_bind_sets_the_type_and_keeps_the_handle(self):
        offered = self.handle(self.vfs[1]).attach_info()
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.mdevs.create(self.vfs[1], H100_4C, UUID_A)
        self.assertEqual(1054, self.current(self.vfs[1]))
        self.assertEqual([(self.vfs[1], '1054')], self.writes)
        self.assertEqual({self.vfs[1]: ('1054', H100_4C)},
                         gpu_vfio.read_set_at_bind(self.state))
        self.inventory.discover()
        # The same attach_info: cyborg-conductor keeps the ARQ's handle.
        self.assertEqual(offered, self.handle(self.vfs[1]).attach_info())
        self.assertEqual([base.TRAIT_4C], self.traits(self.vfs[1]))
        # The operator's VF keeps its PCI handle.
        self.assertEqual('PCI', self.handle(self.vfs[0]).attach_type)

    def test_bind_again_writes_nothing(self):
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.mdevs.create(self.vfs[1], H100_4C, UUID_A)
        self.mdevs.create(self.vfs[1], H100_4C, UUID_A)
        self.assertEqual([(self.vfs[1], '1054')], self.writes)

    def test_bad_arguments_are_refused(self):
        for args, reason in (
                ((self.vfs[1], 'NVIDIA H100-5C', UUID_A), 'names'),
                ((self.vfs[1], H100_4C + '\n', UUID_A), 'type name'),
                ((self.vfs[1], 4, UUID_A), 'type name'),
                ((self.vfs[1], H100_4C, 'not-a-uuid'), 'UUID')):
            ex = self.assertRaises(exception.InvalidArgument,
                                   self.mdevs.create, *args)
            self.assertIn(reason, str(ex))
        self.assertEqual([], self.writes)
        self.assertEqual({}, gpu_vfio.read_set_at_bind(self.state))

    def test_a_vf_given_to_another_arq_is_refused(self):
        # The record names another ARQ's handle: the type it holds is
        # that server's, never shared.
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.mdevs.create(self.vfs[1], H100_4C, UUID_A)
        ex = self.assertRaises(exception.DeviceBusy, self.mdevs.create,
                               self.vfs[1], H100_4C, UUID_B)
        self.assertIn('another ARQ', str(ex))
        self.assertEqual([(self.vfs[1], '1054')], self.writes)

    def test_held_card_is_refused(self):
        setter = self.make_setter(held=lambda card: card == self.card.pf)
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        ex = self.assertRaises(exception.DeviceBusy, setter.bind,
                               self.vfs[1], H100_4C, UUID_A)
        self.assertIn('is held', str(ex))
        self.assertEqual([], self.writes)

    def test_failed_write_leaves_no_record(self):
        def refuse(target, value):
            raise OSError(22, 'Invalid argument')
        self.before_write = refuse
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.assertRaises(exception.ProgrammingFailed, self.mdevs.create,
                          self.vfs[1], H100_4C, UUID_A)
        self.assertEqual({}, gpu_vfio.read_set_at_bind(self.state))


class UnbindTest(_BindBase):

    def setUp(self):
        super().setUp()
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.mdevs.create(self.vfs[1], H100_4C, UUID_A)
        self.inventory.discover()
        del self.writes[:]

    def test_unbind_writes_zero_and_the_vf_is_offered_again(self):
        # Nova deletes the ARQs before the allocation: server-a's own
        # allocation is still there and does not keep the type.
        self.mdevs.remove(self.vfs[1], H100_4C, UUID_A)
        self.assertEqual([(self.vfs[1], '0')], self.writes)
        self.assertEqual(0, self.current(self.vfs[1]))
        self.assertEqual({}, gpu_vfio.read_set_at_bind(self.state))
        self.inventory.discover()
        self.assertTrue(self.handle(self.vfs[1]).vendor_vfio)
        self.assertEqual([base.TRAIT_4C], self.traits(self.vfs[1]))

    def test_kept_while_a_domain_holds_the_vf(self):
        self.domains.users[self.vfs[1]] = 'instance-1'
        self.mdevs.remove(self.vfs[1], H100_4C, UUID_A)
        self.assertEqual([], self.writes)
        self.assertEqual(1054, self.current(self.vfs[1]))
        self.assertIn('keeps vGPU type %s: domain instance-1 holds it'
                      % H100_4C, self.log.output)
        # Still its handle; a later unbind, once free, removes it.
        self.inventory.discover()
        self.assertTrue(self.handle(self.vfs[1]).vendor_vfio)
        del self.domains.users[self.vfs[1]]
        self.mdevs.remove(self.vfs[1], H100_4C, UUID_A)
        self.assertEqual([(self.vfs[1], '0')], self.writes)

    def test_kept_for_another_arq_on_the_vf(self):
        self.bind('server-c', 'dp-4c', self.vfs[1], UUID_B)
        self.mdevs.remove(self.vfs[1], H100_4C, UUID_A)
        self.assertEqual([], self.writes)
        self.assertIn('ARQ arq-server-c holds it', self.log.output)

    def test_other_servers_on_the_card_do_not_keep_it(self):
        # One provider for the card's 4C: server-c's allocation there is
        # for VF 2, not VF 1.
        self.bind('server-c', 'dp-4c', self.vfs[2], UUID_B)
        self.placement.allocated[self.rp(self.vfs[1])] = ['server-c']
        self.mdevs.remove(self.vfs[1], H100_4C, UUID_A)
        self.assertEqual([(self.vfs[1], '0')], self.writes)

    def test_kept_when_cyborg_cannot_be_read(self):
        self.cyborg.down = True
        self.mdevs.remove(self.vfs[1], H100_4C, UUID_A)
        self.assertEqual([], self.writes)
        self.assertEqual(1054, self.current(self.vfs[1]))

    def test_operator_type_is_never_removed(self):
        self.assertFalse(self.setter.unbind(self.vfs[0], H100_4C, UUID_B))
        self.mdevs.remove(self.vfs[0], H100_4C, UUID_B)
        self.assertEqual([], self.writes)
        self.assertEqual(1054, self.current(self.vfs[0]))

    def test_another_type_than_the_record_is_left(self):
        self.assertFalse(self.setter.unbind(self.vfs[1], H100_8C, UUID_A))
        self.assertEqual([], self.writes)

    def test_record_survives_a_restart(self):
        setter = self.make_setter()
        self.assertTrue(setter.unbind(self.vfs[1], H100_4C, UUID_A))
        self.assertEqual(0, self.current(self.vfs[1]))


class SetAtBindFileTest(_BindBase):

    def _write(self, text):
        with open(os.path.join(self.state, gpu_vfio.SET_AT_BIND_FILE),
                  'w') as f:
            f.write(text)

    def test_killed_after_the_write_keeps_the_handle(self):
        # The record is written first; the sidecar dies after the write.
        self._write(json.dumps({self.vfs[2]: {'type': '1054',
                                              'name': H100_4C}}))
        self.sim.set_vgpu_type(self.card, self.vfs[2], '1054')
        self.inventory.discover()
        self.assertTrue(self.handle(self.vfs[2]).vendor_vfio)
        self.assertEqual(H100_4C, self.handle(self.vfs[2]).mdev_type)

    def test_malformed_file_is_taken_as_operator_types(self):
        self.sim.set_vgpu_type(self.card, self.vfs[2], '1054')
        for text in ('[', '[]', json.dumps({self.vfs[2]: {
                'type': '1054; rm', 'name': H100_4C}})):
            self._write(text)
            self.inventory.discover()
            self.assertEqual('PCI', self.handle(self.vfs[2]).attach_type)
        self.assertIn('malformed', self.log.output)


class RpcRaceTest(_BindBase):
    """Seed 004's race on the bind path: two ARQs bound at once on one
    blank card asking two types (one handle reported before the other
    type was offered) through the sidecar's agent RPC endpoint, as
    cyborg-conductor calls it. One gets its type, the other is refused
    cleanly, and no type ever changes under a server."""

    def setUp(self):
        super().setUp()
        self.sim.set_vgpu_type(self.card, self.vfs[0], '0')
        self.inventory.discover()
        transport = messaging.get_rpc_transport(self.conf, url='fake:/')
        self.addCleanup(transport.cleanup)
        server = rpc.get_agent_server(
            transport, 'compute1',
            service.AgentEndpoint(self.programs, self.mdevs, lambda: None,
                                  report_soon=lambda: self.soon.append(1)))
        #: Discovery cycles asked for (a type changes the card's offers).
        self.soon = []
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        target = messaging.Target(exchange=rpc.EXCHANGE,
                                  topic=rpc.AGENT_TOPIC, version='1.0')
        self.client = messaging.get_rpc_client(
            transport, target, serializer=rpc.serializer()).prepare(
                server='compute1', timeout=60)
        # Every write checks nobody else's server is on the VF.
        self.violations = []
        self.before_write = self.check_free

    #: The type id each profile's trait asks on this card.
    WANTS = {'dp-4c': '1054', 'dp-8c': '1056'}

    def check_free(self, target, value):
        vf = target.rsplit('/', 3)[-3]
        if vf in self.domains.users:
            self.violations.append((vf, value, 'domain'))
        if self.current(vf) != 0 and value != '0':
            self.violations.append((vf, value, 'typed'))
        # Every server holding an allocation on the VF wants this type.
        for consumer in self.placement.allocated.get(self.rp(vf), ()):
            for arq in self.cyborg.arqs.get(consumer, ()):
                if value != '0' and self.WANTS.get(
                        arq['device_profile_name']) != value:
                    self.violations.append((vf, value, consumer))

    def call(self, results, key, vf, name, handle):
        try:
            self.client.call(rpc.admin_context(), 'create_vgpu_mdev',
                             pci_addr=vf, asked_type=name, ah_uuid=handle)
            results[key] = 'bound'
        except Exception as exc:
            results[key] = exc

    def test_second_type_is_refused_while_the_first_is_written(self):
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.bind('server-b', 'dp-8c', self.vfs[2], UUID_B)
        in_write, release = threading.Event(), threading.Event()
        waiting, busy = threading.Event(), []
        card_lock = self.programs.lock_for(self.card.pf)

        class Watched:
            """The card's lock, telling when a second job waits."""
            def __enter__(self):
                if card_lock.locked():
                    waiting.set()
                card_lock.acquire()

            def __exit__(self, *exc):
                card_lock.release()

        self.setter._lock_for = lambda card: Watched()

        def hold(target, value):
            self.check_free(target, value)
            if value == '1054':
                busy.append(self.programs.busy())
                in_write.set()
                self.assertTrue(release.wait(60))
        self.before_write = hold
        results = {}
        a = threading.Thread(target=self.call, args=(
            results, 'a', self.vfs[1], H100_4C, UUID_A))
        a.start()
        self.assertTrue(in_write.wait(60))
        b = threading.Thread(target=self.call, args=(
            results, 'b', self.vfs[2], H100_8C, UUID_B))
        b.start()
        self.assertTrue(waiting.wait(60))
        release.set()
        a.join(60)
        b.join(60)
        self.assertEqual('bound', results['a'])
        # The card's lock is the programming lock: no report meanwhile.
        self.assertEqual([True], busy)
        # b read the card as a left it: 8C no longer fits beside a 4C.
        self.assertIn('cannot host %r' % H100_8C, str(results['b']))
        self.assertEqual([(self.vfs[1], '1054')], self.writes)
        self.assertEqual([0, 1054, 0, 0], [self.current(vf)
                                           for vf in self.vfs])
        self.assertEqual([], self.violations)
        self.assertEqual([1], self.soon)
        # cyborg-conductor unbinds the refused ARQ: nothing is written;
        # the first server's domain then keeps its type at its unbind.
        self.client.call(rpc.admin_context(), 'remove_vgpu_mdev',
                         pci_addr=self.vfs[2], asked_type=H100_8C,
                         ah_uuid=UUID_B)
        self.domains.users[self.vfs[1]] = 'instance-a'
        self.client.call(rpc.admin_context(), 'remove_vgpu_mdev',
                         pci_addr=self.vfs[1], asked_type=H100_4C,
                         ah_uuid=UUID_A)
        self.assertEqual([(self.vfs[1], '1054')], self.writes)
        self.assertEqual(1054, self.current(self.vfs[1]))
        self.assertEqual([1], self.soon)

    def test_both_at_once_exactly_one_type_wins(self):
        for index, (vf_a, vf_b) in enumerate(((1, 2), (3, 1), (2, 3))):
            vf_a, vf_b = self.vfs[vf_a], self.vfs[vf_b]
            self.bind('a%d' % index, 'dp-4c', vf_a, UUID_A)
            self.bind('b%d' % index, 'dp-8c', vf_b, UUID_B)
            start = threading.Barrier(2)
            results = {}

            def run(key, vf, name, handle):
                start.wait(60)
                self.call(results, key, vf, name, handle)
            threads = [threading.Thread(target=run, args=args) for args in (
                ('a', vf_a, H100_4C, UUID_A), ('b', vf_b, H100_8C, UUID_B))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            won = sorted(k for k, v in results.items() if v == 'bound')
            self.assertEqual(1, len(won), results)
            lost = 'b' if won == ['a'] else 'a'
            self.assertIn('cannot host', str(results[lost]))
            held = {self.current(vf) for vf in self.vfs} - {0}
            self.assertEqual(1, len(held))
            self.assertEqual([], self.violations)
            # Both ARQs are unbound (no domain any more): back to blank.
            self.placement.allocated.clear()
            self.cyborg.arqs.clear()
            self.cyborg.handles.clear()
            for vf, name, handle in ((vf_a, H100_4C, UUID_A),
                                     (vf_b, H100_8C, UUID_B)):
                self.client.call(rpc.admin_context(), 'remove_vgpu_mdev',
                                 pci_addr=vf, asked_type=name,
                                 ah_uuid=handle)
            self.assertEqual([0, 0, 0, 0], [self.current(vf)
                                            for vf in self.vfs])
            self.inventory.discover()


class VanishedTest(_BindBase):

    def test_vanished_vf_keeps_its_handle(self):
        # A VF typed at bind leaves sysfs while its PF still declares it:
        # it is reported as it was, so its ARQ keeps its handle.
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.mdevs.create(self.vfs[1], H100_4C, UUID_A)
        (before,) = self.inventory.discover()
        expected = self.handle(self.vfs[1]).attach_info()
        self.assertEqual('vendor-vfio', expected['vgpu_framework'])
        keep = vanished.Vanished(self.root)
        keep.apply(before)
        os.unlink(os.path.join(self.root, 'bus', 'pci', 'devices',
                               self.vfs[1]))
        (now,) = self.inventory.discover()
        self.assertNotIn(self.vfs[1], [h.address for d in now.deployables
                                       for h in d.attach_handles])
        device, gone = keep.apply(now, last=before)
        self.assertEqual((self.vfs[1],), gone)
        self.assertIn(expected, [h.attach_info() for d in device.deployables
                                 for h in d.attach_handles])


class HealthAndGuestsTest(_BindBase):

    def test_offered_and_typed_vfs_are_healthy(self):
        # An idle VF with its vendor-VFIO handle has no mdev parent to
        # check and no type yet; a VF typed at bind holds its type.
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.mdevs.create(self.vfs[1], H100_4C, UUID_A)
        (device,) = self.inventory.discover()
        self.assertEqual((), health.mdev_problems(self.root, device))
        self.assertEqual((), gpu_vfio.problems(self.root, device))
        # A VF the operator typed (a PCI handle) that loses its type is a
        # fault.
        self.sim.set_vgpu_type(self.card, self.vfs[0], '0')
        self.assertEqual(('vGPU %s lost its vGPU type '
                          '(nvidia/current_vgpu_type is 0)' % self.vfs[0],),
                         gpu_vfio.problems(self.root, device))

    def test_guest_watch_sees_the_vf(self):
        arq = {'attach_handle_type': 'MDEV', 'attach_handle_uuid': UUID_A,
               'attach_handle_info': self.handle(self.vfs[1]).attach_info()}
        self.assertEqual(self.vfs[1], guests.arq_device(arq))
        arq['attach_handle_info'] = dict(arq['attach_handle_info'],
                                         vgpu_framework='mdev')
        self.assertEqual(UUID_A, guests.arq_device(arq))
