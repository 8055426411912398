"""The sidecar's discovery cycle: create the report's traits, report,
check Placement; and the backoff of the cycles that left something wrong."""

from unittest import mock

import fixtures
import testtools

from sidecar import exception
from sidecar import model
from sidecar.daemon import service
from sidecar.report import reconcile
from tests.unit.sidecar import utils

ROOT = 'c0c0c0c0-0000-4000-8000-000000000000'


def _device(address, vfs, traits=('OWNER_CYBORG', 'CUSTOM_FPGA_INTEL')):
    dep = model.Deployable(
        name=address, resource_class='FPGA', num_accelerators=vfs,
        traits=traits, attach_handles=(), driver_name='intel')
    return model.Device(type='FPGA', vendor='8086', model='09c4',
                        address=address, deployables=(dep,),
                        std_board_info=())


class CycleTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = utils.make_conf()
        conf.set_override('host', 'compute1')
        self.devices = [_device('0000:81:00.0', 3),
                        _device('0000:82:00.0', 2, ('CUSTOM_FPGA_XILINX',))]
        self.inventory = mock.Mock(**{'discover.return_value':
                                      self.devices})
        self.reporter = mock.Mock(**{'report.return_value': True})
        self.reporter.sendable.side_effect = lambda devices: devices
        self.placement = mock.Mock(**{'find_provider.return_value': ROOT})
        self.reconciler = mock.Mock(**{'converge.return_value': {},
                                       'report_due.return_value': False})
        self.programs = mock.Mock(**{'busy.return_value': False})
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.daemon.rpc.get_agent_server', mock.Mock()))
        self.sidecar = service.Sidecar(
            conf, mock.Mock(), self.inventory, self.reporter, self.programs,
            mock.Mock(), self.placement, self.reconciler)

    def test_report_then_converge(self):
        self.assertTrue(self.sidecar.run_cycle())
        self.assertTrue(self.sidecar.converged)
        self.placement.find_provider.assert_called_once_with('compute1')
        self.programs.recover.assert_called_once_with()
        self.reporter.report.assert_called_once_with(
            mock.ANY, self.devices, prepare=mock.ANY)
        self.reconciler.converge.assert_called_once_with(
            ROOT, self.devices, report_again=mock.ANY)

    def test_fpga_functions_restored_before_the_report(self):
        order = []
        self.programs.restore_functions.side_effect = (
            lambda: order.append('restore'))
        self.reporter.report.side_effect = (
            lambda *a, **kw: order.append('report'))
        self.sidecar.run_cycle()
        self.assertEqual(['restore', 'report'], order)
        # A failure is logged; the cycle goes on.
        self.programs.restore_functions.side_effect = RuntimeError('boom')
        self.assertTrue(self.sidecar.run_cycle())

    def test_guest_watch_each_cycle(self):
        self.sidecar.watch = mock.Mock()
        self.assertTrue(self.sidecar.run_cycle())
        self.sidecar.watch.check.assert_called_once_with(self.devices)
        # A watch that cannot read (libvirt, Cyborg) does not stop it.
        self.sidecar.watch.check.side_effect = exception.CyborgError(
            reason='down')
        self.assertTrue(self.sidecar.run_cycle())
        self.reporter.report.assert_called_with(
            mock.ANY, self.devices, prepare=mock.ANY)

    def test_traits_created_before_a_report(self):
        self.sidecar.run_cycle()
        prepare = self.reporter.report.call_args[1]['prepare']
        self.placement.ensure_traits.assert_not_called()
        prepare(self.devices)
        self.placement.ensure_traits.assert_called_once_with(
            {'OWNER_CYBORG', 'CUSTOM_FPGA_INTEL', 'CUSTOM_FPGA_XILINX'})

    def test_report_again_sends_the_full_list(self):
        self.sidecar.run_cycle()
        report_again = self.reconciler.converge.call_args[1]['report_again']
        self.reporter.reset_mock()
        report_again()
        self.reporter.invalidate.assert_called_once_with()
        self.reporter.report.assert_called_once_with(
            mock.ANY, self.devices, prepare=mock.ANY)

    def test_report_due_after_a_direct_repair(self):
        self.reconciler.report_due.return_value = True
        self.sidecar.run_cycle()
        self.reporter.invalidate.assert_called_once_with()
        self.reporter.report.assert_called_once_with(
            mock.ANY, self.devices, prepare=mock.ANY)

    def test_no_compute_node_yet(self):
        self.placement.find_provider.return_value = None
        self.assertFalse(self.sidecar.run_cycle())
        self.reporter.report.assert_not_called()
        self.reconciler.converge.assert_not_called()

    def test_placement_unreachable(self):
        self.placement.find_provider.side_effect = exception.PlacementError(
            reason='Placement is unreachable')
        self.assertFalse(self.sidecar.run_cycle())
        self.reporter.report.assert_not_called()

    def test_failed_report_is_sent_again(self):
        self.reporter.report.side_effect = RuntimeError('conductor gone')
        self.assertFalse(self.sidecar.run_cycle())
        self.reporter.invalidate.assert_called_once_with()
        self.reconciler.converge.assert_not_called()

    def test_drift_left(self):
        self.reconciler.converge.return_value = {
            mock.sentinel.want: reconcile.Drift(False, ['wrong'])}
        self.assertFalse(self.sidecar.run_cycle())
        self.assertFalse(self.sidecar.converged)

    def test_failed_check(self):
        self.reconciler.converge.side_effect = exception.PlacementError(
            reason='Placement is unreachable')
        self.assertFalse(self.sidecar.run_cycle())

    def test_failed_recovery_does_not_stop_the_cycle(self):
        self.programs.recover.side_effect = exception.PlacementError(
            reason='Placement is unreachable')
        self.assertTrue(self.sidecar.run_cycle())

    def test_report_now_after_programming_checks_nothing(self):
        self.sidecar.report_now()
        self.reporter.report.assert_called_once_with(
            mock.ANY, self.devices, prepare=mock.ANY)
        self.reconciler.converge.assert_not_called()
        self.placement.find_provider.assert_not_called()

    def test_report_now_failure_sends_again(self):
        self.reporter.report.side_effect = RuntimeError('conductor gone')
        self.sidecar.report_now()
        self.reporter.invalidate.assert_called_once_with()

    def test_placement_requests_time_out(self):
        self.assertEqual(30, utils.make_conf().placement.timeout)

    def test_resync(self):
        self.sidecar.resync()
        self.reporter.invalidate.assert_called_once_with()


class ReadBackTest(CycleTest):
    """After a report, the cycle reads back that cyborg-conductor holds
    every deployable: its report_data answers even when it dropped one."""

    def setUp(self):
        super().setUp()
        self.reporter.sends = 0

        def report(context, devices, prepare=None):
            self.reporter.sends += 1
            return True
        self.reporter.report.side_effect = report
        self.view = mock.Mock(**{'absent.return_value': [],
                                 'check.return_value': {}})
        self.sidecar.view = self.view

    def test_held_after_the_report(self):
        self.assertTrue(self.sidecar.run_cycle())
        self.view.absent.assert_called_once_with(self.devices)
        self.reporter.invalidate.assert_not_called()

    def test_dropped_device_is_reported_again(self):
        self.view.absent.return_value = ['compute1_0000:82:00.0']
        self.assertFalse(self.sidecar.run_cycle())
        self.assertFalse(self.sidecar.converged)
        self.reporter.invalidate.assert_called_once_with()

    def test_unreadable_is_read_again_next_cycle(self):
        self.view.absent.side_effect = exception.CyborgError(reason='down')
        self.assertTrue(self.sidecar.run_cycle())
        self.reporter.invalidate.assert_not_called()
        # No report in the next cycle, but the read back is tried again.
        self.reporter.report.side_effect = None
        self.view.absent.side_effect = None
        self.view.absent.return_value = ['compute1_0000:82:00.0']
        self.assertFalse(self.sidecar.run_cycle())
        self.reporter.invalidate.assert_called_once_with()
        self.view.absent.return_value = []
        self.assertTrue(self.sidecar.run_cycle())
        self.assertEqual(3, self.view.absent.call_count)
        self.assertTrue(self.sidecar.run_cycle())
        self.assertEqual(3, self.view.absent.call_count)

    def test_no_report_no_read(self):
        self.reporter.report.side_effect = None
        self.assertTrue(self.sidecar.run_cycle())
        self.view.absent.assert_not_called()


class BackoffTest(testtools.TestCase):

    def test_doubles_up_to_the_cap_with_jitter(self):
        draws = []

        def uniform(low, high):
            draws.append((low, high))
            return high
        backoff = service.Backoff(1.0, 10, uniform=uniform)
        self.assertEqual([1, 2, 4, 8, 10, 10],
                         [backoff.next() for _ in range(6)])
        self.assertEqual((0.5, 1.0), draws[0])
        self.assertEqual((5.0, 10), draws[-1])
        backoff.reset()
        self.assertEqual(1, backoff.next())

    def test_real_jitter_stays_in_the_upper_half(self):
        backoff = service.Backoff(1.0, 60)
        for expected in (1, 2, 4, 8, 16, 32, 60, 60):
            delay = backoff.next()
            self.assertTrue(expected / 2.0 <= delay <= expected, delay)
