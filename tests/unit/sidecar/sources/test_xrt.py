"""Alveo cards read from sysfs (sidecar.sources.xrt) and xclbin headers
read from hostile files."""

import os

from sidecar.sources import base
from sidecar.sources import xrt
from sidecar_simulator import host as simulator
from sidecar_simulator import xrt as xrt_sim
from tests.unit.sidecar import simhost

SHELL = xrt_sim.PROFILES['u280'][1]


def xclbin(**kw):
    args = dict(xclbin_uuid=simhost.FUNCTION_ID, interface_uuid=SHELL,
                platform_vbnv=xrt_sim.PROFILES['u280'][0])
    args.update(kw)
    return xrt_sim.make_xclbin(**args)


class XclbinHeaderTest(simhost.SimHostTestCase):

    def assertRefused(self, data, fragment, size=None):
        exc = self.assertRaises(xrt.XclbinError, xrt.xclbin_header, data,
                                len(data) if size is None else size)
        self.assertIn(fragment, str(exc))

    def test_hostile_headers(self):
        good = xclbin()
        self.assertRefused(b'', 'shorter than an xclbin header')
        self.assertRefused(good[:400], 'shorter than an xclbin header')
        self.assertRefused(b'xclbin0\0' + good[8:], 'no xclbin2 magic')
        self.assertRefused(b'\x7fELF' + good[4:], 'no xclbin2 magic')
        self.assertRefused(good + b'trailing', 'header length 456')
        self.assertRefused(good, 'header length', size=10 ** 9)
        huge = good[:304] + (2 ** 64 - 1).to_bytes(8, 'little') + good[312:]
        self.assertRefused(huge, 'header length')
        self.assertRefused(good[:352] + b'\xe9t\xe9' + b'\0' * 61 +
                           good[416:], 'not ASCII')
        self.assertRefused(good[:352] + b'bad\nname' + b'\0' * 56 +
                           good[416:], 'not printable')

    def test_no_uuid(self):
        header = xrt.xclbin_header(xclbin(xclbin_uuid='0' * 32))
        self.assertIsNone(header.uuid)

    def test_read_file(self):
        path = os.path.join(self.root, 'f.xclbin')
        with open(path, 'wb') as f:
            f.write(xclbin(payload=b'\1' * 1000))
        self.assertEqual(simhost.FUNCTION_ID, xrt.read_xclbin(path).uuid)
        with open(path, 'ab') as f:
            f.write(b'\0')
        self.assertRaises(xrt.XclbinError, xrt.read_xclbin, path)


class UuidTest(simhost.SimHostTestCase):

    def test_forms(self):
        for value in ('9aeffe5f-84a1-11e8-a9a3-b3b1fa4b5c1d\n',
                      '9AEFFE5F84A111E8A9A3B3B1FA4B5C1D'):
            self.assertEqual(simhost.FUNCTION_ID,
                             xrt.parse_uuid(value, 'xclbinuuid'))
        self.assertIsNone(xrt.parse_uuid(xrt_sim.NO_XCLBIN, 'xclbinuuid'))
        for bad in ('', 'none', '9aeffe5f-84a1-11e8-a9a3', '../../etc',
                    '9aeffe5f84a111e8a9a3b3b1fa4b5c1d0'):
            self.assertRaises(base.MalformedDevice, xrt.parse_uuid, bad, 'x')


class CardsTest(simhost.SimHostTestCase):

    def _cards(self, *profiles, host=None):
        self.sim = xrt_sim.XrtHost(host)
        for profile in profiles:
            self.sim.add_card(profile, xclbin_uuid=simhost.FUNCTION_ID)
        self.sim.write(self.root)
        return xrt.cards(self.root)

    def test_user_pf_paired_with_its_management_pf(self):
        found, skipped = self._cards('u200', 'u280')
        self.assertEqual([], skipped)
        self.assertEqual({'0000:81:00.1': '0000:81:00.0',
                          '0000:81:01.1': '0000:81:01.0'},
                         {a: c.mgmt for a, c in found.items()})
        card = found['0000:81:00.1']
        self.assertEqual((simhost.FUNCTION_ID, (xrt_sim.PROFILES['u200'][1],),
                          True),
                         (card.xclbin_uuid(), card.interface_uuids(),
                          card.attached))

    def test_user_pf_given_to_a_guest_is_still_found(self):
        self._cards('u55c')
        self.sim.bind_user(self.sim.cards[0], 'vfio-pci')
        found, skipped = xrt.cards(self.root)
        self.assertEqual(([], ['0000:81:00.1'], 'vfio-pci'),
                         (skipped, list(found),
                          found['0000:81:00.1'].driver))
        self.assertFalse(found['0000:81:00.1'].attached)

    def test_shapes_that_cannot_be_supported_are_said(self):
        self._cards('u50', 'u250')
        # The first card's user PF gone (xocl not loaded, PF removed),
        # the second's management PF unbound (xclmgmt not loaded).
        for path in (self.sim.host._dir('0000:81:00.1'),):
            for name in os.listdir(path):
                os.unlink(os.path.join(path, name))
            os.rmdir(path)
        os.unlink(os.path.join(self.root, 'bus/pci/devices/0000:81:00.1'))
        os.unlink(self.sim.host._dir('0000:81:01.0', 'driver'))
        os.unlink(self.sim.host._dir('0000:81:01.0', 'mgmt_pf'))
        found, skipped = xrt.cards(self.root)
        self.assertEqual({}, found)
        self.assertEqual(['0000:81:00.0', '0000:81:01.1'],
                         sorted(a for a, _why in skipped))
        why = dict(skipped)
        self.assertIn('management PF (xclmgmt) with no user PF',
                      why['0000:81:00.0'])
        self.assertIn('user PF (xocl) with no management PF',
                      why['0000:81:01.1'])

    def test_other_xilinx_functions_are_left_alone(self):
        host = simulator.SimulatedHost()
        host.add_pf('10ee', '5001', '120000', address='0000:82:00.0')
        host.add_pf('10ee', '9038', '058000', address='0000:83:00.0')
        self.assertEqual(({}, []), self._cards(host=host))
