"""OPAE's GBS container (sidecar.program.gbs) against the layout of
opae-sdk's libbitstream/bitstream.c and metadatav1.c, and hostile files."""

import json
import struct
import uuid

import testtools

from sidecar import exception
from sidecar.program import gbs

IFC = '7a1f3e2d9c8b4a6f8e5d4c3b2a190817'
AFU = 'c000c9660d824272b5d6d4a8a9d2c4b1'
RAW = b'\x00\x01raw partial bitstream\xff'


def _file(metadata, raw=RAW, length=None):
    text = metadata if isinstance(metadata, bytes) else \
        json.dumps(metadata).encode()
    return (gbs.GBS_GUID.bytes +
            struct.pack('<I', len(text) if length is None else length) +
            text + raw)


def _metadata(**afu_image):
    image = {'interface-uuid': str(uuid.UUID(IFC)),
             'accelerator-clusters': [
                 {'name': 'nlb', 'total-contexts': 1,
                  'accelerator-type-uuid': str(uuid.UUID(AFU))}]}
    image.update(afu_image)
    return {'version': 1, 'platform-name': 'pac_a10', 'afu-image': image}


class GbsTest(testtools.TestCase):

    def test_layout(self):
        data = _file(_metadata())
        # The GUID OPAE checks, as bytes: "XeonFPGA" "\xb7GBSv001".
        self.assertEqual(b'XeonFPGA\xb7GBSv001', data[:16])
        image = gbs.parse(data)
        self.assertEqual(IFC, image.interface_id)
        self.assertEqual((AFU,), image.afu_ids)
        self.assertEqual(RAW, data[image.offset:])
        self.assertFalse(image.legacy)
        self.assertTrue(gbs.is_gbs(data[:16]))

    def test_build_round_trip(self):
        data = gbs.build(IFC, [AFU, IFC], RAW)
        image = gbs.parse(data)
        self.assertEqual((IFC, (AFU, IFC)),
                         (image.interface_id, image.afu_ids))
        self.assertEqual(RAW, data[image.offset:])

    def test_versions_read_as_one(self):
        for version in (1, 640, 650):
            metadata = dict(_metadata(), version=version)
            self.assertEqual(IFC, gbs.parse(_file(metadata)).interface_id)

    def test_ids_in_any_case_and_without_dashes(self):
        image = gbs.parse(_file(_metadata(**{
            'interface-uuid': IFC.upper(), 'accelerator-clusters': [
                {'accelerator-type-uuid': str(uuid.UUID(AFU)).upper()}]})))
        self.assertEqual((IFC, (AFU,)), (image.interface_id, image.afu_ids))

    def test_legacy(self):
        # opae_legacy_bitstream_header: magic, interface id reversed.
        data = struct.pack('<I', gbs.LEGACY_MAGIC) + \
            bytes.fromhex(IFC)[::-1] + RAW
        self.assertTrue(gbs.is_gbs(data[:16]))
        image = gbs.parse(data)
        self.assertEqual((IFC, (), 20, True), (
            image.interface_id, image.afu_ids, image.offset, image.legacy))
        self.assertEqual(RAW, data[image.offset:])

    def test_not_gbs(self):
        self.assertFalse(gbs.is_gbs(b'PR:' + AFU.encode()))
        self.assertFalse(gbs.is_gbs(b''))

    def _refused(self, data, *fragments):
        exc = self.assertRaises(exception.InvalidArgument, gbs.parse, data)
        for fragment in fragments:
            self.assertIn(fragment, str(exc))
        self.assertIn('Invalid GBS file', str(exc))

    def test_hostile_files(self):
        good = _metadata()
        self._refused(b'', 'shorter than the GBS header')
        self._refused(gbs.GBS_GUID.bytes + b'\x01\x00', 'shorter')
        self._refused(b'\x00' * 16 + _file(good)[16:],
                      'does not start with the GBS GUID')
        self._refused(_file(good, length=10 ** 6),
                      'metadata length 1000000 runs past the end')
        self._refused(_file(good, length=0xffffffff), 'runs past the end')
        self._refused(_file(b'{"version": 1,'), 'not JSON')
        self._refused(_file(b'\xff\xfe{}'), 'not JSON')
        self._refused(_file([1, 2]), 'not a JSON object')
        self._refused(_file({'afu-image': {}}), 'no integer "version"')
        self._refused(_file(dict(good, version=True)), 'integer "version"')
        self._refused(_file(dict(good, version=2)), 'version 2 is not')
        self._refused(_file({'version': 1}), 'no "afu-image" object')
        self._refused(_file(_metadata(**{'interface-uuid': 'zz'})),
                      '"interface-uuid" \'zz\' is not a UUID')
        self._refused(_file(_metadata(**{'interface-uuid': 7})),
                      'is not a string')
        self._refused(_file(_metadata(**{'accelerator-clusters': {}})),
                      'no "accelerator-clusters" array')
        self._refused(_file(_metadata(**{'accelerator-clusters': [3]})),
                      'accelerator-clusters[0] is not an object')
        self._refused(_file(_metadata(**{'accelerator-clusters': [{}]})),
                      'accelerator-clusters[0] "accelerator-type-uuid"')
        self._refused(struct.pack('<I', gbs.LEGACY_MAGIC) + b'\x01',
                      'shorter than the legacy GBS header')
        self._refused('text', 'not bytes')

    def test_every_truncation_is_refused_or_read(self):
        data = _file(_metadata())
        header_end = gbs.parse(data).offset
        for size in range(len(data)):
            if size >= header_end:
                image = gbs.parse(data[:size])
                self.assertEqual(header_end, image.offset)
            else:
                self.assertRaises(exception.InvalidArgument, gbs.parse,
                                  data[:size])


class ClockTest(testtools.TestCase):
    """clock-frequency-high/-low (opae-sdk libbitstream/metadatav1.c,
    doubles, optional)."""

    def test_clocks(self):
        image = gbs.parse(gbs.build('0' * 32, ['1' * 32], b'x',
                                    clocks=(312, 156.25)))
        self.assertEqual((312.0, 156.25), image.clocks)
        self.assertTrue(image.user_clock)
        image = gbs.parse(gbs.build('0' * 32, ['1' * 32], b'x'))
        self.assertEqual((0.0, 0.0), image.clocks)
        self.assertFalse(image.user_clock)

    def test_bad_clock(self):
        for value in ('auto', -1, True, None):
            self.assertRaises(exception.InvalidArgument, gbs.parse,
                              gbs.build('0' * 32, ['1' * 32], b'x',
                                        clocks=(value, 0)))
