"""Holds in the reconciler, the programming job and the service cycle."""

import threading
from unittest import mock

import fixtures
import testtools

from sidecar.daemon import service
from sidecar.program import journal
from sidecar.program import manager as program
from sidecar.report import reconcile
from sidecar.state import holds
from tests.unit.sidecar import test_program as tp
from tests.unit.sidecar import test_reconcile as tr
from tests.unit.sidecar import utils


class ReconcileHeldTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = tr.MemoryPlacement()
        self.holds = holds.Holds()
        self.reconciler = reconcile.Reconciler(
            'compute1', self.placement, held=self.holds.held)
        self.device = tr._device()
        self.uuid = program.provider_uuid('compute1_' + self.device.address)
        self.placement.add(self.uuid, 'compute1_' + self.device.address,
                           inventories=tr._inv(4), traits=tr.TRAITS)

    def converge(self):
        return self.reconciler.converge(tr.ROOT, [self.device], lambda: None)

    def reserved(self):
        return self.placement.providers[self.uuid]['inventories'][
            'FPGA']['reserved']

    def test_held_device_is_fully_reserved_then_given_back(self):
        self.assertEqual({}, self.converge())
        self.assertEqual(0, self.reserved())
        self.holds.disable(self.device.address)
        self.assertEqual({}, self.converge())
        self.assertEqual(4, self.reserved())
        # cyborg-conductor rewrites the inventory (reserved 0): repaired.
        self.placement.providers[self.uuid]['inventories'] = tr._inv(4)
        self.placement._bump(self.uuid, 'inventory')
        self.assertEqual({}, self.converge())
        self.assertEqual(4, self.reserved())
        self.holds.enable(self.device.address)
        self.assertEqual({}, self.converge())
        self.assertEqual(0, self.reserved())


class ProgramHeldTest(tp.ProgramTestBase):

    def _manager(self):
        self.holds = holds.Holds()
        return program.ProgramManager(
            'compute1', self.fpga, self.fpga, tp.FakeImages(),
            self.placement, self.domains, journal.Journal(self.state),
            self.cyborg, holds=self.holds)

    def test_restore_keeps_a_disable_made_during_the_job(self):
        self.fpga.release = threading.Event()
        done = []
        worker = threading.Thread(
            target=lambda: done.append(self._program()))
        worker.start()
        self.assertTrue(self.fpga.in_program.wait(30))
        self.assertTrue(self.manager.busy())
        self.holds.disable(tp.PF, 'maintenance')
        self.fpga.release.set()
        worker.join(30)
        self.assertEqual([True], done)
        self.assertFalse(self.manager.busy())
        # Reserved at the start, reserved again at the end: not restored.
        self.assertEqual([('reserve', tp.RP), ('reserve', tp.RP)],
                         self.placement.history)
        self.assertTrue(self.placement.reserved[tp.RP])

    def test_restore_after_enable_gives_everything_back(self):
        self.holds.disable(tp.PF)
        self.holds.enable(tp.PF)
        self.assertTrue(self._program())
        self.assertEqual(('restore', tp.RP, {'FPGA': 0}),
                         self.placement.history[-1])

    def test_recover_keeps_a_disable(self):
        self.fpga.fail = 'boom'
        self.placement.restore_reserved = mock.Mock(
            side_effect=tp.exception.PlacementError(reason='down'))
        self.assertRaises(tp.exception.ProgrammingFailed, self._program)
        self.placement.restore_reserved.reset_mock()
        self.holds.disable(tp.PF)
        self.manager.recover()
        self.placement.restore_reserved.assert_not_called()
        self.assertEqual([], self.manager._journal.jobs.items())
        self.assertEqual(('reserve', tp.RP), self.placement.history[-1])


class CycleHeldTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = utils.make_conf()
        self.devices = [tr._device()]
        self.inventory = mock.Mock(**{'discover.return_value': self.devices})
        self.reporter = mock.Mock(sends=0)
        self.reporter.sendable.side_effect = lambda devices: devices
        self.placement = mock.Mock(**{'find_provider.return_value': 'root'})
        self.placement.providers_in_tree.return_value = [
            {'name': 'compute1_other'}]
        self.reconciler = mock.Mock(**{'converge.return_value': {},
                                       'report_due.return_value': False})
        self.programs = mock.Mock(**{'busy.return_value': False})
        self.holds = holds.Holds()
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.daemon.rpc.get_agent_server', mock.Mock()))
        conf.set_override('host', 'compute1')
        self.sidecar = service.Sidecar(
            conf, mock.Mock(), self.inventory, self.reporter, self.programs,
            mock.Mock(), self.placement, self.reconciler, holds=self.holds)

    def test_new_device_is_held_at_first_start_unless_in_placement(self):
        self.sidecar.run_cycle()
        self.assertEqual({holds.NEW}, set(self.holds.reasons(
            self.devices[0].address)))

    def test_device_in_placement_at_first_start_is_admitted(self):
        self.placement.providers_in_tree.return_value = [
            {'name': 'compute1_' + self.devices[0].address}]
        self.sidecar.run_cycle()
        self.assertFalse(self.holds.held(self.devices[0].address))
        self.assertTrue(self.holds.known(self.devices[0].address))

    def test_no_report_while_a_device_is_programmed(self):
        # A report now would make cyborg-conductor rewrite the inventory
        # of the card being programmed without its reservation.
        self.programs.busy.return_value = True
        self.assertFalse(self.sidecar.run_cycle())
        self.reporter.report.assert_not_called()
        self.reconciler.converge.assert_called_once()
        self.sidecar.report_now()
        self.reporter.report.assert_not_called()
        self.programs.busy.return_value = False
        self.sidecar.run_cycle()
        self.reporter.report.assert_called_once()

    def test_a_hold_change_wakes_the_cycle(self):
        self.assertFalse(self.sidecar._wake.is_set())
        self.holds.disable(self.devices[0].address)
        self.assertTrue(self.sidecar._wake.is_set())
