"""The sidecar's discovery cycle: report, then check what the conductor
wrote in Placement."""

from unittest import mock

import fixtures
import testtools

from sidecar import exception
from sidecar import model
from sidecar import service
from tests.unit.sidecar import utils


def _device(address, vfs, resource_class='FPGA'):
    dep = model.Deployable(
        name=address, resource_class=resource_class, num_accelerators=vfs,
        traits=('OWNER_CYBORG',), attach_handles=(), driver_name='intel')
    return model.Device(type='FPGA', vendor='8086', model='09c4',
                        address=address, deployables=(dep,),
                        std_board_info=())


class CycleTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = utils.make_conf()
        conf.set_override('host', 'compute1')
        self.devices = [_device('0000:81:00.0', 3),
                        _device('0000:82:00.0', 0)]
        self.inventory = mock.Mock(**{'discover.return_value':
                                      self.devices})
        self.reporter = mock.Mock(**{'report.return_value': True})
        self.placement = mock.Mock(**{
            'find_provider.side_effect': lambda name: 'rp-' + name})
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.rpc.get_agent_server', mock.Mock()))
        self.sidecar = service.Sidecar(
            conf, mock.Mock(), self.inventory, self.reporter, mock.Mock(),
            mock.Mock(), self.placement)

    def test_totals_set_after_a_report(self):
        self.sidecar.run_cycle()
        # The deployable with no accelerator has no inventory to check.
        self.placement.find_provider.assert_called_once_with(
            'compute1_0000:81:00.0')
        self.placement.set_total.assert_called_once_with(
            'rp-compute1_0000:81:00.0', 'FPGA', 3)
        self.reporter.invalidate.assert_not_called()

    def test_nothing_checked_without_a_report(self):
        self.reporter.report.return_value = False
        self.sidecar.run_cycle()
        self.placement.find_provider.assert_not_called()
        self.placement.set_total.assert_not_called()

    def test_provider_not_there_is_skipped(self):
        self.placement.find_provider.side_effect = None
        self.placement.find_provider.return_value = None
        self.sidecar.run_cycle()
        self.placement.set_total.assert_not_called()
        self.reporter.invalidate.assert_not_called()

    def test_failed_check_sends_again(self):
        self.placement.set_total.side_effect = exception.PlacementError(
            reason='Placement is unreachable')
        self.sidecar.run_cycle()
        self.reporter.invalidate.assert_called_once_with()

    def test_failed_report_checks_nothing(self):
        self.reporter.report.side_effect = RuntimeError('conductor gone')
        self.sidecar.run_cycle()
        self.reporter.invalidate.assert_called_once_with()
        self.placement.set_total.assert_not_called()
