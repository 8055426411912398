"""vGPU 17 types set at bind, written back after a host reboot
(sidecar.program.vgpu_restore) on the simulator's H100, whose VFs all read
type 0 after one (sidecar_simulator.kernel.reboot, sriov-manage -e run at
boot)."""

from unittest import mock

import fixtures
import testtools

from sidecar import exception
from sidecar.daemon import service
from sidecar.drivers import gpu_vfio
from sidecar_simulator import kernel
from tests.unit.sidecar import test_service
from tests.unit.sidecar import test_vgpu_bind as base
from tests.unit.sidecar import utils

H100_4C = base.H100_4C
UUID_A = base.UUID_A


class RestoreTest(base._BindBase):
    """VF 0 holds H100-4C (the operator's); VF 1 is given it at bind for
    server-a's ARQ, then the host reboots."""

    def setUp(self):
        super().setUp()
        self.bind('server-a', 'dp-4c', self.vfs[1], UUID_A)
        self.mdevs.create(self.vfs[1], H100_4C, UUID_A)
        self.offered = self.handle(self.vfs[1]).attach_info()
        self.writes[:] = []
        kernel.reboot(self.sim.host, reenable=[self.card.pf])
        self.assertEqual(0, self.current(self.vfs[1]))

    def problems(self):
        (device,) = self.inventory.discover()
        return gpu_vfio.problems(self.root, device,
                                 gpu_vfio.read_set_at_bind(self.state))

    def test_written_back_and_the_handle_stays(self):
        (device,) = self.inventory.discover()
        # Not idle meanwhile: the same handle, and a problem.
        self.assertEqual(self.offered,
                         self.handle(self.vfs[1]).attach_info())
        problems = self.problems()
        self.assertIn('vGPU %s lost its vGPU type (nvidia/current_vgpu_type '
                      'is 0); given %s at bind, it is written back'
                      % (self.vfs[1], H100_4C), problems)
        self.mdevs.housekeeping()
        self.assertEqual([(self.vfs[1], '1054')], self.writes)
        self.assertEqual(1054, self.current(self.vfs[1]))
        self.assertEqual(self.offered,
                         self.handle(self.vfs[1]).attach_info())
        self.assertEqual((), self.problems())
        # Once is enough.
        self.mdevs.housekeeping()
        self.assertEqual(1, len(self.writes))

    def test_health_reads_the_record_through_the_driver(self):
        (device,) = self.inventory.discover()
        driver = self.inventory._drivers[0]
        self.assertIn('given %s at bind' % H100_4C,
                      ' '.join(driver.health(device).problems))

    def test_cyborg_down_written_back_all_the_same(self):
        self.cyborg.down = True
        self.mdevs.housekeeping()
        self.assertEqual(1054, self.current(self.vfs[1]))
        self.assertIn('Cannot read the ARQs', self.log.output)

    def test_no_arq_left_the_vf_is_idle(self):
        self.cyborg.handles.clear()
        self.mdevs.housekeeping()
        self.assertEqual([], self.writes)
        self.assertEqual({}, gpu_vfio.read_set_at_bind(self.state))
        self.inventory.discover()
        # Offered again, as any idle VF of the empty card: for the first
        # type of the option.
        self.assertEqual(dict(self.offered, asked_type=base.H100_8C,
                              vgpu_mark=base.H100_8C + '_0'),
                         self.handle(self.vfs[1]).attach_info())
        self.assertEqual((), tuple(p for p in self.problems()
                                   if self.vfs[1] in p))

    def test_not_under_a_running_domain(self):
        self.domains.users[self.vfs[1]] = 'instance-1'
        self.mdevs.housekeeping()
        self.assertEqual([], self.writes)
        self.assertIn('runs with it', self.log.output)
        del self.domains.users[self.vfs[1]]
        self.mdevs.housekeeping()
        self.assertEqual(1054, self.current(self.vfs[1]))

    def test_failed_write_is_retried(self):
        calls = []

        def refuse(target, value):
            if not calls:
                calls.append(value)
                raise OSError(22, 'Invalid argument')
        self.before_write = refuse
        self.mdevs.housekeeping()
        self.assertEqual(0, self.current(self.vfs[1]))
        self.assertIn('retried next cycle', self.log.output)
        self.assertEqual({}, dict(self.setter.jobs()))
        self.assertEqual({self.vfs[1]: ('1054', H100_4C)},
                         gpu_vfio.read_set_at_bind(self.state))
        self.mdevs.housekeeping()
        self.assertEqual(1054, self.current(self.vfs[1]))

    def test_card_busy_left_for_the_next_cycle(self):
        card = self.card.pf
        with self.programs.lock_for(card):
            self.assertEqual([], self.setter.restore())
        self.assertEqual([self.vfs[1]], self.setter.restore())

    def test_another_type_set_meanwhile_is_left(self):
        self.sim.set_vgpu_type(self.card, self.vfs[1], '1055')
        self.mdevs.housekeeping()
        self.assertEqual([], self.writes)
        self.assertIn('not 1054 it was given at bind', self.log.output)

    def test_malformed_vf_is_skipped(self):
        path = '%s/bus/pci/devices/%s/nvidia/current_vgpu_type' % (
            self.root, self.vfs[1])
        with open(path, 'w') as f:
            f.write('x\n')
        self.assertEqual([], self.setter.restore())
        self.assertIn('Cannot restore the vGPU type', self.log.output)

    def test_without_a_setter_nothing_runs(self):
        self.mdevs._vgpu_types = None
        self.mdevs.housekeeping()
        self.assertEqual([], self.writes)


class NotAnErrorTest(base._BindBase):

    def test_nothing_recorded_nothing_read(self):
        self.cyborg.all_arqs = lambda: (_ for _ in ()).throw(
            exception.CyborgError(reason='not called'))
        self.assertEqual([], self.setter.restore())


class CycleHookTest(testtools.TestCase):
    """The discovery cycle writes the types back before it reports (the
    sidecar of test_service's cycle tests)."""

    def setUp(self):
        super().setUp()
        self.logger = self.useFixture(fixtures.FakeLogger())
        conf = utils.make_conf()
        conf.set_override('host', 'compute1')
        self.devices = [test_service._device('0000:81:00.0', 3)]
        self.inventory = mock.Mock(**{'discover.return_value':
                                      self.devices})
        reporter = mock.Mock(**{'report.return_value': True})
        reporter.sendable.side_effect = lambda devices: devices
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.daemon.rpc.get_agent_server', mock.Mock()))
        self.sidecar = service.Sidecar(
            conf, mock.Mock(), self.inventory, reporter,
            mock.Mock(**{'busy.return_value': False}), mock.Mock(),
            mock.Mock(**{'find_provider.return_value': test_service.ROOT}),
            mock.Mock(**{'converge.return_value': {},
                         'report_due.return_value': False}))

    def test_housekeeping_before_the_report(self):
        order = []
        mdevs = self.sidecar.mdevs
        mdevs.housekeeping.side_effect = lambda: order.append('restore')
        self.inventory.discover.side_effect = lambda: (
            order.append('discover') or self.devices)
        self.sidecar.run_cycle()
        self.assertEqual(['restore', 'discover'], order[:2])

    def test_a_failure_is_logged_and_the_cycle_goes_on(self):
        self.sidecar.mdevs.housekeeping.side_effect = RuntimeError('boom')
        self.assertTrue(self.sidecar.run_cycle())
        self.assertIn('Restoring vGPU types set at bind failed',
                      self.logger.output)
