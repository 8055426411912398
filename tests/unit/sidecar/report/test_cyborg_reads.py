"""The real Cyborg of the environment reads what the sidecar sends.

In ``tox -e py3`` that is openstack-cyborg 17 (the default report, 1.4);
in ``tox -e py3-nova33`` openstack-cyborg 16.0.1 (the ``2026.1`` report,
1.0). Each Cyborg's objects load in a child process
(:mod:`tests.unit.sidecar.report.conductor`).
"""

import copy

import testtools

from sidecar.report import objects
from sidecar.report import reporter as report
from tests.unit.sidecar.report import conductor
from tests.unit.sidecar.report import test_upgrade_levels as tul

HOST = tul.HOST


def _sent(pin, types):
    fake = tul.FakeConductor()
    reporter = report.Reporter(fake, HOST, HOST, 0, pin=pin)
    reporter.report(None, [tul.device(t) for t in types])
    (sent,) = fake.sent
    return conductor.wire(sent)


def _sendable(version):
    """The types a report at ``version`` holds, in the order sent."""
    return sorted((t for t in objects.DEVICE_TYPES
                   if objects.wire_type(t, version)), key=tul.ADDRESSES.get)


def _expected(dev_type, version='1.4'):
    address = tul.ADDRESSES[dev_type]
    return {'type': objects.wire_type(dev_type, version), 'vendor': '8086',
            'deployables': ['%s_%s' % (HOST, address)],
            'attributes': [[['rc', 'CUSTOM_%s' % dev_type],
                            ['trait0', 'OWNER_CYBORG']]]}


def _subset(read):
    return {k: read[k] for k in ('type', 'vendor', 'deployables',
                                 'attributes')}


class Cyborg16ReadsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if conductor.cyborg_major() != 16:
            self.skipTest('openstack-cyborg 16 (tox -e py3-nova33)')

    def test_2026_1_report_read_by_cyborg_16(self):
        known = _sendable('1.0')
        pinned = _sent('2026.1', objects.DEVICE_TYPES)
        # Controls from the same devices: the unpinned report (1.4), and
        # a 1.0 primitive of a type the sidecar leaves out.
        latest = _sent(None, ['GPU'])
        unknown = []
        for dev_type in ('PCI', 'MDEV', 'NVME', 'AICHIP'):
            # (PCI as such: the sidecar sends it as GPU, below.)
            primitive = copy.deepcopy(pinned[0])
            primitive['cyborg_object.data']['type'] = dev_type
            unknown.append(primitive)
        reads = conductor.read(pinned + latest + unknown)

        self.assertEqual(len(known), len(pinned))
        self.assertEqual({'1.0'},
                         {p['cyborg_object.version'] for p in pinned})
        for dev_type, read in zip(known, reads):
            self.assertNotIn('error', read)
            self.assertEqual('1.0', read['version'])
            self.assertEqual(_expected(dev_type, '1.0'), _subset(read))
        # The pci driver's device, as Cyborg 16's own pci driver gives it.
        self.assertIn('PCI', known)
        self.assertEqual('GPU', reads[known.index('PCI')]['type'])
        # Cyborg 16 refuses 1.4 (what the option is for) ...
        self.assertEqual('IncompatibleObjectVersion',
                         reads[len(pinned)]['error'])
        self.assertIn('supported version is 1.0',
                      reads[len(pinned)]['message'])
        # ... and a type it does not know (what leaving out is for).
        self.assertEqual(['ValueError'] * 3,
                         [r.get('error') for r in reads[-4:-1]])
        # Cyborg 16.0.1's 1.0 enum has AICHIP (added without a version
        # bump); the sidecar leaves it out at 1.0 as Cyborg 17's backport
        # does (the sidecar finds no AICHIP devices).
        self.assertEqual('AICHIP', reads[-1]['type'])


class Cyborg17ReadsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if conductor.cyborg_major() != 17:
            self.skipTest('openstack-cyborg 17 (tox -e py3)')

    def test_default_report_is_1_4(self):
        sent = _sent(None, objects.DEVICE_TYPES)
        older = _sent('2026.1', objects.DEVICE_TYPES)
        reads = conductor.read(sent + older)
        self.assertEqual({'1.4'}, {p['cyborg_object.version'] for p in sent})
        self.assertEqual(
            [_expected(t) for t in objects.DEVICE_TYPES],
            [_subset(r) for r in reads[:len(sent)]])
        self.assertEqual(['1.4'] * len(sent) + ['1.0'] * len(older),
                         [r['version'] for r in reads])
        # A conductor upgraded first still reads the pinned report.
        self.assertEqual(
            [_expected(t, '1.0') for t in _sendable('1.0')],
            [_subset(r) for r in reads[len(sent):]])
