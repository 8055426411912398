"""The functional tests' programming stand-in loads a test bitstream's
function where the card reports it: a DFL port (each port of a card on
its own); a region of no DFL card is never written."""

import os

import fixtures
import testtools

from sidecar_simulator import dfl
from sidecar_simulator import host as simulator
from tests.functional.harness import fpga_device

F = 'c000c9660d824272b5d6d4a8a9d2c4b1'
VFS = ['0000:81:00.1', '0000:81:00.2', '0000:81:00.3']


class FpgaDeviceTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.top = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(self.top, 'sys')
        self.bitstream = os.path.join(self.top, 'b.bit')
        with open(self.bitstream, 'w') as f:
            f.write(F + '\n')
        self.useFixture(fixtures.MockPatch('sys.stderr'))

    def _log(self):
        with open(os.path.join(self.top, 'programmed.log')) as f:
            return [line.split()[1:] for line in f]

    def test_one_port_of_a_dfl_card(self):
        sim = dfl.DflHost()
        card = sim.add_card('n6000', sriov=True, ports=3,
                            address='0000:81:00.0')
        sim.write(self.root)
        self.assertEqual(0, fpga_device.main([self.root, VFS[1],
                                              self.bitstream]))
        for index, expected in enumerate((dfl.NO_AFU, F, dfl.NO_AFU)):
            with open(os.path.join(sim.port_dir(card, index),
                                   'afu_id')) as f:
                self.assertEqual(expected, f.read().strip())
        self.assertEqual([[VFS[1], F]], self._log())
        # The PF reaches no port: nothing is written.
        self.assertEqual(1, fpga_device.main([self.root, '0000:81:00.0',
                                              self.bitstream]))
        self.assertEqual([[VFS[1], F]], self._log())

    def test_one_port_card_on_its_pf(self):
        host = simulator.SimulatedHost()
        host.add_fpga(address='0000:82:00.0')
        host.write(self.root)
        self.assertEqual(0, fpga_device.main([self.root, '0000:82:00.0',
                                              self.bitstream]))
        host.load_state(self.root)
        self.assertEqual(F, host.fpga_card('0000:82:00.0').afu_id)
        self.assertEqual([['0000:82:00.0', F]], self._log())

    def test_generic_region_is_not_written(self):
        # Written by hand: a region of no DFL card; no mainline ABI gives
        # it an afu_id, so nothing says where its function would be.
        host = simulator.SimulatedHost()
        host.add_pf(address='0000:82:00.0')
        host.write(self.root)
        region = os.path.join(host._dir('0000:82:00.0'),
                              'fpga_region/region0')
        os.makedirs(region)
        os.makedirs(os.path.join(self.root, 'class/fpga_region'))
        os.symlink(region, os.path.join(self.root, 'class/fpga_region',
                                        'region0'))
        self.assertEqual(1, fpga_device.main([self.root, '0000:82:00.0',
                                              self.bitstream]))
        self.assertEqual([], os.listdir(region))
        self.assertFalse(os.path.exists(os.path.join(self.top,
                                                     'programmed.log')))
