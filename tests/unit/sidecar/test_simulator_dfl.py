"""The DFL profiles of the simulator: every path they write has a source
in the kernel's ABI documents or drivers, and the layout is the kernel's."""

import os

from sidecar_simulator import dfl
from tests.unit.sidecar import simhost

PF = 'devices/pci0000:00/0000:81:00.0'
VF = 'devices/pci0000:00/0000:81:00.1'


class DflProfileTest(simhost.SimHostTestCase):

    def _write(self, *cards):
        self.dev = os.path.join(self.root, 'dev')
        self.sim = dfl.DflHost()
        for profile, sriov in cards:
            self.sim.add_card(profile, afu_id=simhost.FUNCTION_ID,
                              sriov=sriov)
        self.sys = os.path.join(self.root, 'sys')
        self.sim.write(self.sys, self.dev)

    def test_every_path_has_a_source(self):
        self._write(('pac-a10', False), ('d5005', True), ('n3000', False),
                    ('n6000', True))
        paths = dfl.written_paths(self.sys)
        self.assertGreater(len(paths), 200)
        self.assertEqual([], [p for p in paths if dfl.source_of(p) is None])
        for kind in {dfl.source_of(p) for p in paths}:
            self.assertIn(kind, dfl.SOURCES)
        self.assertEqual(['dfl-fme.0', 'dfl-fme.1', 'dfl-fme.2',
                          'dfl-fme.3', 'dfl-port.0', 'dfl-port.2',
                          'dfl-port.3', 'dfl-port.5'],
                         sorted(os.listdir(self.dev)))

    def test_a_stray_path_has_no_source(self):
        # What the old simulator wrote: afu_id in the region, a manager
        # with a firmware file (Xilinx's downstream kernel only).
        for path in (PF + '/fpga_region/region0/afu_id',
                     PF + '/fpga_manager/fpga0/firmware',
                     'class/fpga_region/region0/afu_id'):
            self.assertIsNone(dfl.source_of(path), path)

    def _read(self, relpath):
        with open(os.path.join(self.sys, relpath)) as f:
            return f.read().strip()

    def test_layout_without_sriov(self):
        self._write(('d5005', False))
        base = PF + '/fpga_region/region0'
        fme = base + '/dfl-fme.0'
        self.assertEqual('0x0b2b', self._read(PF + '/device'))
        self.assertEqual(os.path.realpath(os.path.join(self.sys, PF)),
                         os.path.realpath(os.path.join(self.sys, base,
                                                       'device')))
        self.assertFalse(os.path.exists(os.path.join(self.sys, base,
                                                     'compat_id')))
        self.assertEqual(simhost.COMPAT_ID, self._read(
            fme + '/dfl-fme-region.0/fpga_region/region1/compat_id'))
        self.assertEqual(simhost.COMPAT_ID, self._read(
            'class/fpga_region/region1/compat_id'))
        mgr = fme + '/dfl-fme-mgr.0/fpga_manager/fpga0'
        self.assertEqual(('DFL FME FPGA Manager', 'unknown'),
                         (self._read(mgr + '/name'),
                          self._read(mgr + '/state')))
        self.assertFalse(os.path.exists(os.path.join(self.sys, mgr,
                                                     'firmware')))
        self.assertEqual(simhost.FUNCTION_ID,
                         self._read(base + '/dfl-port.0/afu_id'))
        self.assertEqual('0', self._read(base + '/dfl-port.0/id'))
        self.assertEqual('0x0', self._read(fme + '/errors/fme_errors'))
        self.assertEqual(simhost.FUNCTION_ID, self._read(
            'bus/platform/devices/dfl-port.0/afu_id'))

    def test_layout_after_port_release_with_sriov(self):
        self._write(('n6000', True))
        self.assertEqual(['dfl-fme.0'], sorted(
            n for n in os.listdir(os.path.join(
                self.sys, PF, 'fpga_region/region0')) if n.startswith('dfl')))
        self.assertEqual('1', self._read(PF + '/sriov_numvfs'))
        self.assertEqual('0xbccf', self._read(VF + '/device'))
        self.assertEqual(simhost.FUNCTION_ID, self._read(
            VF + '/fpga_region/region2/dfl-port.1/afu_id'))

    def test_n3000_has_no_sriov_shape(self):
        self.assertRaises(ValueError, dfl.DflHost().add_card, 'n3000',
                          sriov=True)

    def test_set_afu_id_and_error(self):
        self._write(('d5005', False))
        card, = self.sim.cards
        self.sim.set_afu_id(card, None)
        self.sim.set_error(card, 'fme/catfatal_errors', '0x4')
        base = PF + '/fpga_region/region0'
        self.assertEqual(dfl.NO_AFU, self._read(base + '/dfl-port.0/afu_id'))
        self.assertEqual('0x4', self._read(
            base + '/dfl-fme.0/errors/catfatal_errors'))
