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
        self.sim.add_card('n6000', sriov=True, ports=4)
        self.sim.add_card('d5005', ports=2)
        self.sim.write(self.sys, self.dev)
        paths = dfl.written_paths(self.sys)
        self.assertGreater(len(paths), 400)
        self.assertEqual([], [p for p in paths if dfl.source_of(p) is None])
        for kind in {dfl.source_of(p) for p in paths}:
            self.assertIn(kind, dfl.SOURCES)
        self.assertEqual(
            ['dfl-fme.%d' % n for n in range(6)] +
            ['dfl-port.%d' % n for n in (0, 2, 3, 5, 10, 11, 12, 13, 14, 15)],
            sorted(os.listdir(self.dev), key=lambda n: (
                n.split('.')[0], int(n.split('.')[1]))))

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

    def test_ports_released_to_vfs(self):
        """A card with 3 ports, each released to its own VF: a PR region
        (and bridge) per port under the FME, port i under VF i's own base
        region with its own afu_id and ``id`` i."""
        self.dev = os.path.join(self.root, 'dev')
        self.sim = dfl.DflHost()
        afus = [simhost.FUNCTION_ID, None, 'ab' * 16]
        card = self.sim.add_card('n6000', sriov=True, ports=3, afu_id=afus)
        self.sys = os.path.join(self.root, 'sys')
        self.sim.write(self.sys, self.dev)
        fme = PF + '/fpga_region/region0/dfl-fme.0'
        self.assertEqual('3', self._read(PF + '/sriov_numvfs'))
        self.assertEqual('3', self._read(fme + '/ports_num'))
        # No port stays under the PF.
        self.assertEqual(['dfl-fme.0'], [
            n for n in os.listdir(os.path.join(
                self.sys, PF, 'fpga_region/region0')) if n.startswith('dfl')])
        for index in range(3):
            self.assertEqual(simhost.COMPAT_ID, self._read(
                fme + '/dfl-fme-region.%d/fpga_region/region%d/compat_id'
                % (index, index + 1)))
            self.assertEqual('enabled', self._read(
                fme + '/dfl-fme-br.%d.auto/fpga_bridge/br%d/state'
                % (index, index)))
            vf = 'devices/pci0000:00/0000:81:00.%d' % (index + 1)
            port = '%s/fpga_region/region%d/dfl-port.%d' % (
                vf, 4 + index, 3 + index)
            self.assertEqual(str(index), self._read(port + '/id'))
            self.assertEqual(afus[index] or dfl.NO_AFU,
                             self._read(port + '/afu_id'))
            self.assertEqual(os.path.join(self.sys, port),
                             self.sim.port_dir(card, index))
        self.assertEqual(['0000:81:00.1', '0000:81:00.2', '0000:81:00.3'],
                         card.handles())
        self.assertEqual((card, 2), self.sim.find_port('0000:81:00.3'))
        self.assertRaises(KeyError, self.sim.find_port, PF)
        # One port changes alone.
        self.sim.set_afu_id(card, 'cd' * 16, 1)
        self.sim.set_error(card, 'port2/errors', '0x1')
        self.assertEqual(['cd' * 16, afus[2]],
                         [p.afu_id for p in card.ports[1:]])
        self.assertEqual('cd' * 16, self._read(
            'devices/pci0000:00/0000:81:00.2/fpga_region/region5/'
            'dfl-port.4/afu_id'))
        self.assertEqual('0x1', self._read(
            'devices/pci0000:00/0000:81:00.3/fpga_region/region6/'
            'dfl-port.5/errors/errors'))
        self.assertEqual('0x0', self._read(
            'devices/pci0000:00/0000:81:00.1/fpga_region/region4/'
            'dfl-port.3/errors/errors'))

    def test_port_count(self):
        for ports in (0, 5):
            self.assertRaises(ValueError, dfl.DflHost().add_card, 'd5005',
                              ports=ports)
        self.assertRaises(ValueError, dfl.DflHost().add_card, 'd5005',
                          ports=2, afu_id=[None])

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

    def test_ofs_profiles(self):
        """N6000/N6001 as OFS builds them: the FME, its one PR region and
        the slot's port under PF0, no port released; three VFs 8086:bccf
        with the card's subsystem ids and no DFL of their own."""
        for profile, subsystem in (('n6000-ofs', '0x1770'),
                                   ('n6001-ofs', '0x1771')):
            self._write((profile, False))
            base = PF + '/fpga_region/region0'
            self.assertEqual(['dfl-fme.0', 'dfl-port.0'], sorted(
                n for n in os.listdir(os.path.join(self.sys, base))
                if n.startswith('dfl-')))
            self.assertEqual('3', self._read(PF + '/sriov_numvfs'))
            for function in (PF, VF, 'devices/pci0000:00/0000:81:00.3'):
                self.assertEqual('0x8086', self._read(
                    function + '/subsystem_vendor'))
                self.assertEqual(subsystem, self._read(
                    function + '/subsystem_device'))
            self.assertEqual('0xbccf', self._read(VF + '/device'))
            self.assertFalse(os.path.lexists(os.path.join(
                self.sys, VF, 'fpga_region')))
            self.assertFalse(os.path.lexists(os.path.join(
                self.sys, VF, 'driver')))
            paths = dfl.written_paths(self.sys)
            self.assertEqual(
                [], [p for p in paths if dfl.source_of(p) is None])
            self.assertIn('ofs', {dfl.source_of(p) for p in paths})
        # One PR slot, no port to release.
        for kwargs in ({'sriov': True}, {'ports': 2}):
            self.assertRaises(ValueError, dfl.DflHost().add_card,
                              'n6000-ofs', **kwargs)

    def test_port_release_profiles_have_no_subsystem_ids(self):
        self._write(('n6000', True))
        self.assertFalse(os.path.lexists(os.path.join(
            self.sys, PF, 'subsystem_device')))
