"""nova-cyborg-sidecar-manage device program on a card with regions."""

import os

import fixtures
import testtools

from sidecar import control
from sidecar import model
from tests.unit.sidecar import test_manage

PF = test_manage.PF
REGIONS = ('0000:81:00.1', '0000:81:00.2')


def _card():
    return model.Device('FPGA', '8086', '0b30', PF, tuple(
        model.Deployable(name=r, resource_class='FPGA', num_accelerators=1,
                         attach_handles=(model.AttachHandle('PCI', r),),
                         driver_name='intel')
        for r in REGIONS))


def _cpid(function):
    return {'cpid_type': 'PCI', 'cpid_info': {
        'domain': '0000', 'bus': '81', 'device': '00',
        'function': function}}


class ProgramRegionTest(testtools.TestCase):

    run_cli = test_manage.ManageTest.run_cli

    def setUp(self):
        super().setUp()
        self.state = self.useFixture(fixtures.TempDir()).path
        self.conf_file = os.path.join(self.state, 'sidecar.conf')
        with open(self.conf_file, 'w') as f:
            f.write('[sidecar]\nstate_path = %s\n' % self.state)
        self.sidecar = test_manage.FakeSidecar()
        self.server = control.ControlServer(self.state, self.sidecar)
        self.server.start()
        self.addCleanup(self.server.stop)
        self.sidecar.inventory.devices.return_value = [_card()]
        self.sidecar.inventory.device.return_value = _card()

    def _program(self, key):
        image = '8a5c2d4e-3b1f-4f7e-9a0d-1c2b3a4d5e6f'
        self.sidecar.programs.fpga_program.reset_mock()
        code, out, err = self.run_cli('device', 'program', key, image)
        self.assertEqual(0, code, err)
        (call,) = self.sidecar.programs.fpga_program.call_args_list
        return call[0][0]

    def test_a_region_by_its_address_or_deployable_name(self):
        self.assertEqual(_cpid('2'), self._program(REGIONS[1]))
        self.assertEqual(_cpid('1'),
                         self._program('compute1_' + REGIONS[0]))

    def test_the_card(self):
        # The program manager then asks which region an ARQ binds.
        self.assertEqual(_cpid('0'), self._program(PF))
