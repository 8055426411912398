"""The Alveo (XRT) profiles of the simulator: every path they write has a
source in XRT's drivers and documents or the kernel, and the layout is
XRT's: a management PF bound to xclmgmt, a user PF bound to xocl."""

import os

from sidecar.sources import xrt as xrt_source
from sidecar_simulator import xrt
from tests.unit.sidecar import simhost

MGMT = 'devices/pci0000:00/0000:81:00.0'
USER = 'devices/pci0000:00/0000:81:00.1'


class XrtProfileTest(simhost.SimHostTestCase):

    def _write(self, *profiles):
        self.sim = xrt.XrtHost()
        for profile in profiles:
            self.sim.add_card(profile, xclbin_uuid=simhost.FUNCTION_ID)
        self.sim.write(self.root)

    def _read(self, relpath):
        with open(os.path.join(self.root, relpath)) as f:
            return f.read().strip()

    def _link(self, relpath):
        return os.path.basename(os.readlink(os.path.join(self.root,
                                                         relpath)))

    def test_every_path_has_a_source(self):
        self._write(*sorted(xrt.PROFILES))
        self.sim.bind_user(self.sim.cards[0], 'vfio-pci')
        paths = xrt.written_paths(self.root)
        self.assertGreater(len(paths), 60)
        self.assertEqual([], [p for p in paths if xrt.source_of(p) is None])
        self.assertEqual(set(xrt.SOURCES),
                         {xrt.source_of(p) for p in paths})

    def test_a_stray_path_has_no_source(self):
        # What XRT never registers: a region, a manager's firmware file.
        for path in (USER + '/fpga_region/region0/afu_id',
                     MGMT + '/fpga_manager/fpga0/firmware',
                     'class/fpga_region/region0', USER + '/afu_id',
                     'bus/pci/drivers/nvidia/0000:81:00.1'):
            self.assertIsNone(xrt.source_of(path), path)

    def test_layout(self):
        self._write('u250')
        self.assertEqual(('0x10ee', '0x5004', '0x120000'), tuple(
            self._read(MGMT + '/' + n) for n in ('vendor', 'device',
                                                 'class')))
        self.assertEqual('0x5005', self._read(USER + '/device'))
        self.assertEqual(('xclmgmt', 'xocl'), (self._link(MGMT + '/driver'),
                                               self._link(USER + '/driver')))
        self.assertEqual('0000:81:00.1', self._link(
            'bus/pci/drivers/xocl/0000:81:00.1'))
        self.assertEqual(('', '0'), (self._read(MGMT + '/mgmt_pf'),
                                     self._read(MGMT + '/slot')))
        self.assertEqual('', self._read(USER + '/user_pf'))
        self.assertEqual('9aeffe5f-84a1-11e8-a9a3-b3b1fa4b5c1d',
                         self._read(USER + '/xclbinuuid'))
        self.assertEqual('0x1', self._read(USER + '/ready'))
        self.assertEqual(xrt.PROFILES['u250'][1],
                         self._read(USER + '/interface_uuids'))
        for absent in ('fpga_region', 'fpga_manager', 'afu_id'):
            self.assertFalse(os.path.lexists(os.path.join(
                self.root, USER, absent)))
        self.assertFalse(os.path.exists(os.path.join(self.root, 'class',
                                                     'fpga_region')))

    def test_ids_of_every_card(self):
        self._write(*sorted(xrt.PROFILES))
        for card in self.sim.cards:
            mgmt, user = xrt_source.CARDS[card.profile]
            self.assertEqual(card.mgmt[:-1], card.user[:-1])
            self.assertEqual(('0x' + mgmt, '0x' + user), tuple(
                self._read('bus/pci/devices/%s/device' % a)
                for a in (card.mgmt, card.user)))

    def test_no_xclbin_then_loaded_then_given_to_a_guest(self):
        self.sim = xrt.XrtHost()
        card = self.sim.add_card('u50')
        self.sim.write(self.root)
        self.assertEqual(xrt.NO_XCLBIN, self._read(USER + '/xclbinuuid'))
        self.sim.set_xclbin(card, simhost.FUNCTION_ID)
        self.assertEqual('9aeffe5f-84a1-11e8-a9a3-b3b1fa4b5c1d',
                         self._read(USER + '/xclbinuuid'))
        self.sim.bind_user(card, 'vfio-pci')
        self.assertEqual('vfio-pci', self._link(USER + '/driver'))
        for gone in ('user_pf', 'xclbinuuid', 'ready'):
            self.assertFalse(os.path.exists(os.path.join(self.root, USER,
                                                         gone)))
        self.assertFalse(os.path.lexists(os.path.join(
            self.root, 'bus/pci/drivers/xocl/0000:81:00.1')))
        self.sim.bind_user(card, 'xocl')
        self.assertEqual('9aeffe5f-84a1-11e8-a9a3-b3b1fa4b5c1d',
                         self._read(USER + '/xclbinuuid'))


class XclbinTest(simhost.SimHostTestCase):
    """xclbin.h's struct axlf, as written and read back."""

    def test_round_trip(self):
        data = xrt.make_xclbin(simhost.FUNCTION_ID, xrt.PROFILES['u55c'][1],
                               xrt.PROFILES['u55c'][0], payload=b'\0' * 64)
        self.assertEqual(b'xclbin2\0', data[:8])
        # m_header.uuid at 416, m_interface_uuid at 336, m_length at 304.
        self.assertEqual(simhost.FUNCTION_ID, data[416:432].hex())
        self.assertEqual(xrt.PROFILES['u55c'][1], data[336:352].hex())
        self.assertEqual(len(data), int.from_bytes(data[304:312], 'little'))
        header = xrt_source.xclbin_header(data, len(data))
        self.assertEqual((simhost.FUNCTION_ID, xrt.PROFILES['u55c'][1],
                          xrt.PROFILES['u55c'][0]),
                         (header.uuid, header.interface_uuid,
                          header.platform_vbnv))
