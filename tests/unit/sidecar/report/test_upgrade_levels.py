"""[upgrade_levels] cyborg_conductor: device reports backported to the
conductor's DriverDevice version; a device of a type it lacks goes as the
type that release's agent gives it, or is left out."""

import logging

import fixtures
import oslo_messaging as messaging
from oslo_versionedobjects import exception as ovo_exception
import testtools

from sidecar import model
from sidecar.report import objects
from sidecar.report import reporter as report
from tests.unit.sidecar import utils

HOST = 'compute1'

#: One PCI address per device type (the sidecar's control path).
ADDRESSES = {t: '0000:%02x:00.0' % (0x81 + i)
             for i, t in enumerate(objects.DEVICE_TYPES)}


def device(dev_type):
    address = ADDRESSES[dev_type]
    vf = address[:-1] + '1'
    dep = model.Deployable(
        name=address, resource_class='CUSTOM_%s' % dev_type,
        num_accelerators=1, traits=('OWNER_CYBORG',),
        attach_handles=(model.AttachHandle('PCI', vf),), driver_name='x')
    return model.Device(type=dev_type, vendor='8086', model='0b30',
                        address=address, deployables=(dep,),
                        std_board_info=(('product_id', '0b30'),))


class FakeConductor:
    """Records report_data's arguments; raises ``error`` if set."""

    def __init__(self):
        self.sent = []
        self.error = None

    def report_data(self, context, hostname, driver_device_list):
        if self.error is not None:
            raise self.error
        self.sent.append(driver_device_list)


class PinTest(testtools.TestCase):

    def test_release_and_version_pins(self):
        self.assertEqual('1.4', objects.target_version(None))
        self.assertEqual('1.0', objects.target_version('2026.1'))
        self.assertEqual('1.4', objects.target_version('2026.2'))
        self.assertEqual('1.2', objects.target_version('1.2'))
        error = self.assertRaises(ValueError, objects.target_version, '16')
        self.assertIn('2026.1', str(error))

    def test_pin_beside_each_cyborg(self):
        self.assertEqual('2026.1', objects.conductor_pin('16.0.1'))
        self.assertIsNone(objects.conductor_pin('17.0.0'))
        self.assertIsNone(objects.conductor_pin('17.1.0.dev3'))
        error = self.assertRaises(ValueError, objects.conductor_pin, '15.0.0')
        self.assertIn('Cyborg 16 or 17', str(error))

    def test_types_per_version_follow_cyborg_17_history(self):
        # cyborg/objects/driver_objects/driver_device.py in 17.0.0:
        # 1.1 AICHIP, 1.2 MDEV and PCI, 1.3 NVME, 1.4 device_state.
        self.assertEqual(('GPU', 'FPGA', 'QAT', 'NIC', 'SSD'),
                         objects.device_types('1.0'))
        self.assertIn('AICHIP', objects.device_types('1.1'))
        self.assertNotIn('PCI', objects.device_types('1.1'))
        self.assertIn('PCI', objects.device_types('1.2'))
        self.assertNotIn('NVME', objects.device_types('1.2'))
        self.assertEqual(objects.DEVICE_TYPES, objects.device_types('1.3'))
        self.assertEqual(objects.DEVICE_TYPES, objects.device_types('1.4'))

    def test_option(self):
        conf = utils.make_conf()
        self.assertIsNone(conf.upgrade_levels.cyborg_conductor)
        conf.set_override('cyborg_conductor', '2026.1', 'upgrade_levels')
        self.assertEqual('2026.1', conf.upgrade_levels.cyborg_conductor)
        self.assertRaises(ValueError, conf.set_override, 'cyborg_conductor',
                          'gazpacho', 'upgrade_levels')


class BackportTest(testtools.TestCase):

    def _wire(self, dev_type, **extra):
        (wire,) = report.to_wire(HOST, [device(dev_type)])
        for key, value in extra.items():
            setattr(wire, key, value)
        return wire

    def test_device_state_only_from_1_4(self):
        wire = self._wire('GPU', device_state='cleaning')
        (latest,) = objects.to_primitives([wire], '1.4')
        (older,) = objects.to_primitives([wire], '1.3')
        self.assertEqual('cleaning',
                         latest['cyborg_object.data']['device_state'])
        self.assertEqual('1.3', older['cyborg_object.version'])
        self.assertNotIn('device_state', older['cyborg_object.data'])

    def test_children_stay_1_0(self):
        (older,) = objects.to_primitives([self._wire('FPGA')], '1.0')
        (dep,) = older['cyborg_object.data']['deployable_list']
        self.assertEqual('1.0', dep['cyborg_object.version'])
        self.assertEqual(HOST + '_' + ADDRESSES['FPGA'],
                         dep['cyborg_object.data']['name'])

    def test_pci_goes_as_gpu_before_1_2(self):
        # Cyborg 16.0.1's own pci driver reports its devices as GPU
        # (cyborg/accelerator/drivers/pci/pci/sysinfo.py).
        wire = self._wire('PCI')
        sent = {version: objects.to_primitives([wire], version)[0]
                for version in ('1.0', '1.1', '1.2', '1.4')}
        self.assertEqual({'1.0': 'GPU', '1.1': 'GPU', '1.2': 'PCI',
                          '1.4': 'PCI'},
                         {v: p['cyborg_object.data']['type']
                          for v, p in sent.items()})
        # Only the type: the device is the same one to the conductor.
        for key in ('controlpath_id', 'deployable_list', 'model', 'vendor'):
            self.assertEqual(sent['1.4']['cyborg_object.data'][key],
                             sent['1.0']['cyborg_object.data'][key])
        self.assertEqual('PCI', wire.type)

    def test_too_new_type_refused(self):
        for dev_type in ('MDEV', 'NVME', 'AICHIP'):
            self.assertRaises(ovo_exception.ObjectActionError,
                              objects.to_primitives,
                              [self._wire(dev_type)], '1.0')
        self.assertRaises(ovo_exception.ObjectActionError,
                          objects.to_primitives, [self._wire('NVME')], '1.2')


class ReporterPinTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name='sidecar.report.reporter', level=logging.INFO))
        self.conductor = FakeConductor()

    def _warnings(self):
        return [line for line in self.log.output.splitlines()
                if 'left out' in line]

    def test_default_sends_latest(self):
        reporter = report.Reporter(self.conductor, HOST, HOST, 0)
        self.assertTrue(reporter.report(
            None, [device(t) for t in objects.DEVICE_TYPES]))
        (sent,) = self.conductor.sent
        self.assertEqual({'1.4'}, {p['cyborg_object.version'] for p in sent})
        self.assertEqual(sorted(objects.DEVICE_TYPES),
                         sorted(p['cyborg_object.data']['type']
                                for p in sent))
        self.assertEqual([], self._warnings())

    def test_unknown_type_left_out_with_one_warning(self):
        reporter = report.Reporter(self.conductor, HOST, HOST, 0,
                                   pin='2026.1')
        devices = [device('FPGA'), device('PCI'), device('MDEV')]
        self.assertTrue(reporter.report(None, devices))
        (sent,) = self.conductor.sent
        self.assertEqual([('FPGA', '1.0'), ('GPU', '1.0')],
                         [(p['cyborg_object.data']['type'],
                           p['cyborg_object.version']) for p in sent])
        (line,) = self._warnings()
        for word in ('Device %s (MDEV 8086:0b30)' % ADDRESSES['MDEV'],
                     'deployable(s) %s_%s' % (HOST, ADDRESSES['MDEV']),
                     'DriverDevice 1.0', 'cyborg_conductor = 2026.1'):
            self.assertIn(word, line)
        # Said once while it stays left out; a resend sends the same.
        reporter.invalidate()
        self.assertTrue(reporter.report(None, devices))
        self.assertEqual(self.conductor.sent[0], self.conductor.sent[1])
        self.assertEqual(1, len(self._warnings()))
        # Gone and back: said again.
        reporter.report(None, devices[:1])
        reporter.report(None, devices)
        self.assertEqual(2, len(self._warnings()))

    def test_sendable_is_what_the_cycle_uses(self):
        reporter = report.Reporter(self.conductor, HOST, HOST, 0,
                                   pin='1.1')
        devices = [device(t) for t in objects.DEVICE_TYPES]
        kept = reporter.sendable(devices)
        self.assertEqual(['GPU', 'FPGA', 'AICHIP', 'QAT', 'NIC', 'SSD',
                          'PCI'], [d.type for d in kept])
        self.assertEqual(2, len(self._warnings()))

    def test_conductor_too_old_says_what_to_set(self):
        reporter = report.Reporter(self.conductor, HOST, HOST, 0)
        self.conductor.error = messaging.RemoteError(
            'IncompatibleObjectVersion',
            'Version 1.4 of DriverDevice is not supported, supported '
            'version is 1.0')
        self.assertRaises(messaging.RemoteError, reporter.report, None,
                          [device('GPU')])
        self.assertIn('set [upgrade_levels] cyborg_conductor',
                      self.log.output)
        self.assertIn('supported version is 1.0', self.log.output)
        # Nothing recorded as sent: the next cycle sends again.
        self.conductor.error = None
        self.assertTrue(reporter.report(None, [device('GPU')]))

    def test_bad_pin_refused(self):
        self.assertRaises(ValueError, report.Reporter, self.conductor,
                          HOST, HOST, 0, pin='1.9')
