"""The simulator's fpgaconf: OPAE's command line, exit codes and slot
search (opae-sdk tools/fpgaconf/fpgaconf.c) on simulated DFL cards."""

import os

import fixtures
import testtools

from sidecar.program import gbs
from sidecar_simulator import dfl
from sidecar_simulator.tools import fpgaconf
from tests.unit.sidecar import simhost

F_NEW = 'c000c9660d824272b5d6d4a8a9d2c4b1'
OTHER_IFC = '0123456789abcdef0123456789abcdef'


class FpgaconfTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.top = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(self.top, 'sys')
        self.sim = dfl.DflHost()
        self.cards = [
            self.sim.add_card('d5005', address='0000:81:00.0'),
            self.sim.add_card('n6000', address='0000:b1:00.0', sriov=True)]
        self.sim.write(self.root)
        for name in ('stdout', 'stderr'):
            stream = self.useFixture(fixtures.StringStream(name)).stream
            self.useFixture(fixtures.MonkeyPatch('sys.' + name, stream))
        self.gbs = self._file(gbs.build(simhost.COMPAT_ID, [F_NEW], b'\0'))

    def _file(self, data, name='afu.gbs'):
        path = os.path.join(self.top, name)
        with open(path, 'wb') as f:
            f.write(data)
        return path

    def _run(self, *args):
        return fpgaconf.main(['--sysfs-root', self.root] + list(args))

    def _afu(self, card):
        with open(os.path.join(self.sim.port_dir(card), 'afu_id')) as f:
            return f.read().strip()

    def test_bus_device_function_select_the_card(self):
        self.assertEqual(0, self._run('-B', '0x81', '-D', '0', '-F', '0',
                                      self.gbs))
        self.assertEqual(F_NEW, self._afu(self.cards[0]))
        self.assertEqual(dfl.NO_AFU, self._afu(self.cards[1]))
        # strtoul(.., 0): 0xb1 is hex, 0261 octal; --bus=..., --segment.
        self.assertEqual(0, self._run('--segment', '0', '--bus=0261',
                                      self.gbs))
        # The SR-IOV card's port is under its VF.
        self.assertEqual(F_NEW, self._afu(self.cards[1]))
        with open(os.path.join(self.top, 'programmed.log')) as f:
            self.assertEqual(
                [['0000:81:00.0', F_NEW], ['0000:b1:00.1', F_NEW]],
                [line.split()[1:] for line in f])

    def test_exit_codes(self):
        # Two cards with the GBS's interface and no filter: ambiguous.
        self.assertEqual(5, self._run(self.gbs))
        self.assertEqual(4, self._run('-B', '0x82', self.gbs))
        other = self._file(gbs.build(OTHER_IFC, [F_NEW], b'\0'), 'o.gbs')
        self.assertEqual(4, self._run('-B', '0x81', other))
        self.assertEqual(2, self._run(self._file(b'not a gbs', 'x.gbs')))
        self.assertEqual(1, self._run('-B', 'zz', self.gbs))
        self.assertEqual(1, self._run('--no-such-option', self.gbs))
        self.assertEqual(1, self._run())
        self.assertEqual(1, self._run(os.path.join(self.top, 'missing')))
        self.assertEqual(1, self._run('-h'))
        # Dry run: the slot is found, nothing is written.
        self.assertEqual(0, self._run('-n', '-B', '0x81', self.gbs))
        for card in self.cards:
            self.assertEqual(dfl.NO_AFU, self._afu(card))
        self.assertFalse(os.path.exists(os.path.join(self.top,
                                                     'programmed.log')))
