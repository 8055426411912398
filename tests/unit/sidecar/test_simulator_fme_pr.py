"""The simulated /dev/dfl-fme.N (sidecar_simulator.dfl DflHost.fme_pr):
the checks of the kernel's fme_pr() (drivers/fpga/dfl-fme-pr.c), and a
request layout written from <linux/fpga-dfl.h> apart from the sidecar's
(sidecar.dfl_abi, itself compiled against the header in test_dfl_abi)."""

import ctypes
import errno
import os

import fixtures
import testtools

from sidecar import dfl_abi
from sidecar_simulator import dfl

AFU = 'c000c9660d824272b5d6d4a8a9d2c4b1'


class FmePrTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.sim = dfl.DflHost()
        self.card = self.sim.add_card('d5005', address='0000:81:00.0')
        self.sim.write(self.root)

    def _pr(self, data, fme='dfl-fme.0', request=dfl.FME_PORT_PR, **fields):
        buf = ctypes.create_string_buffer(data, len(data))
        values = dict(argsz=dfl.PORT_PR.size, flags=0, port_id=0)
        values.update(fields)
        arg = dfl.PORT_PR.pack(values['argsz'], values['flags'],
                               values['port_id'], len(data),
                               ctypes.addressof(buf))
        return self.sim.fme_pr(fme, request, arg)

    def _afu(self):
        with open(os.path.join(self.sim.port_dir(self.card), 'afu_id')) as f:
            return f.read().strip()

    def test_same_abi_as_the_sidecar(self):
        self.assertEqual(dfl_abi.DFL_FPGA_FME_PORT_PR, dfl.FME_PORT_PR)
        self.assertEqual(dfl_abi.PORT_PR_SIZE, dfl.PORT_PR.size)
        arg = dfl_abi.pack_port_pr(0, 0x1234, 7)
        self.assertEqual((24, 0, 0, 7, 0x1234), dfl.PORT_PR.unpack(arg))

    def test_loads_the_afu(self):
        self.assertEqual(0, self._pr(b'PR:' + AFU.encode()))
        self.assertEqual(AFU, self._afu())

    def test_loads_one_port_of_several(self):
        card = self.sim.add_card('n6000', sriov=True, ports=3)
        self.sim.write(self.root)
        self.assertEqual(0, self._pr(b'PR:' + AFU.encode(), fme='dfl-fme.1',
                                     port_id=2))
        self.assertEqual([None, None, AFU], [p.afu_id for p in card.ports])
        with open(os.path.join(self.sim.port_dir(card, 2), 'afu_id')) as f:
            self.assertEqual(AFU, f.read().strip())
        exc = self.assertRaises(OSError, self._pr, b'PR:' + AFU.encode(),
                                fme='dfl-fme.1', port_id=3)
        self.assertEqual(errno.EINVAL, exc.errno)

    def test_refusals(self):
        for kwargs, code in (({'argsz': 23}, errno.EINVAL),
                             ({'flags': 1}, errno.EINVAL),
                             ({'port_id': 1}, errno.EINVAL),
                             ({'request': 0xb681}, errno.EINVAL),
                             ({'fme': 'dfl-fme.1'}, errno.ENODEV)):
            exc = self.assertRaises(OSError, self._pr,
                                    b'PR:' + AFU.encode(), **kwargs)
            self.assertEqual(code, exc.errno, kwargs)
        for data in (b'garbage', b'PR:' + AFU.encode() + b'\n',
                     b'PR:' + AFU.upper().encode()):
            exc = self.assertRaises(OSError, self._pr, data)
            self.assertEqual(errno.EIO, exc.errno)
        self.assertEqual(dfl.NO_AFU, self._afu())
