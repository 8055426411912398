"""sidecar.sources.dfl: one card read alone is the card of the whole
scan (the health check of a device reads its own card only)."""

import os

import fixtures
import testtools

from sidecar.sources import dfl
from sidecar_simulator import faults
from sidecar_simulator import host as simulator


class OneCardTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.host = simulator.SimulatedHost()
        self.host.add_fpga(num_vfs=2, function_id='a' * 32)
        self.host.add_fpga(address='0000:83:00.0')
        self.host.add_fpga(num_vfs=4)
        self.root = self.host.write(os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'sys'))

    def assert_same(self):
        found = dfl.cards(self.root)
        self.assertEqual(3, len(found))
        for address, card in found.items():
            self.assertEqual(card, dfl.card(self.root, address))
        return found

    def test_each_card_alone(self):
        found = self.assert_same()
        self.assertEqual([2, 1, 4], [len(c.ports) for c in found.values()])
        self.assertIsNone(dfl.card(self.root, '0000:99:00.0'))
        # A VF is no card: its port belongs to its PF's.
        self.assertIsNone(dfl.card(self.root, '0000:81:00.1'))

    def test_a_vf_removed_leaves_its_port_out(self):
        faults.remove_vf(self.host, '0000:81:00.2')
        found = self.assert_same()
        self.assertEqual(['0000:81:00.1'],
                         [p.address for p in found['0000:81:00.0'].ports])
