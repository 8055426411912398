import json

import testtools

from sidecar import model
from sidecar.report import reporter as report


def _fpga(function=None, vfs=2):
    traits = ['OWNER_CYBORG', 'CUSTOM_FPGA_INTEL']
    if function:
        traits.insert(0, 'CUSTOM_FPGA_FUNCTION_ID_INTEL_%s' % function)
    handles = tuple(model.AttachHandle('PCI', '0000:81:00.%d' % (i + 1))
                    for i in range(vfs))
    dep = model.Deployable(name='0000:81:00.0', resource_class='FPGA',
                           num_accelerators=vfs, traits=tuple(traits),
                           attach_handles=handles, driver_name='intel')
    return model.Device(type='FPGA', vendor='8086', model='09c4',
                        address='0000:81:00.0', deployables=(dep,),
                        std_board_info=(('product_id', '09c4'),))


class ToWireTest(testtools.TestCase):

    def test_device(self):
        (dev,) = report.to_wire('compute1', [_fpga()])
        self.assertEqual('FPGA', dev.type)
        self.assertEqual({'domain': '0000', 'bus': '81', 'device': '00',
                          'function': '0'},
                         json.loads(dev.controlpath_id.cpid_info))
        self.assertEqual({'product_id': '09c4'},
                         json.loads(dev.std_board_info))
        (dep,) = dev.deployable_list
        self.assertEqual('compute1_0000:81:00.0', dep.name)
        self.assertEqual(2, dep.num_accelerators)
        self.assertEqual('intel', dep.driver_name)
        self.assertEqual(
            [('rc', 'FPGA'), ('trait0', 'CUSTOM_FPGA_INTEL'),
             ('trait1', 'OWNER_CYBORG')],
            [(a.key, a.value) for a in dep.attribute_list])
        self.assertEqual(
            ['0000:81:00.1', '0000:81:00.2'],
            ['%(domain)s:%(bus)s:%(device)s.%(function)s' %
             json.loads(h.attach_info) for h in dep.attach_handle_list])
        self.assertEqual({'PCI'},
                         {h.attach_type for h in dep.attach_handle_list})

    def test_function_trait_has_the_last_key(self):
        # A change of function must change one attribute, not shift keys:
        # the conductor deletes and adds traits key by key.
        before = report.to_wire('h', [_fpga('AAAA')])[0]
        after = report.to_wire('h', [_fpga('BBBB')])[0]
        pairs = lambda d: [(a.key, a.value)  # noqa: E731
                           for a in d.deployable_list[0].attribute_list]
        changed = set(pairs(before)) ^ set(pairs(after))
        self.assertEqual({'trait2'}, {key for key, _ in changed})

    def test_mdev_handles_are_distinct(self):
        handles = tuple(model.AttachHandle('MDEV', '0000:3b:00.0',
                                           'nvidia-35', i) for i in range(2))
        dep = model.Deployable('0000:3b:00.0', 'VGPU', 2,
                               attach_handles=handles)
        dev = model.Device('GPU', '10de', '1eb8', '0000:3b:00.0', (dep,))
        (wire,) = report.to_wire('h', [dev])
        infos = [json.loads(h.attach_info)
                 for h in wire.deployable_list[0].attach_handle_list]
        self.assertEqual(['nvidia-35_0', 'nvidia-35_1'],
                         [i['vgpu_mark'] for i in infos])
        self.assertEqual({'nvidia-35'}, {i['asked_type'] for i in infos})

    def test_digest_stable_and_sensitive(self):
        a = report.digest(report.to_wire('h', [_fpga()]))
        self.assertEqual(a, report.digest(report.to_wire('h', [_fpga()])))
        self.assertNotEqual(
            a, report.digest(report.to_wire('h', [_fpga(vfs=3)])))


class FakeConductor:
    def __init__(self, fail=False):
        self.calls = []
        self.fail = fail

    def report_data(self, context, hostname, devices):
        self.calls.append((hostname, devices))
        if self.fail:
            raise RuntimeError('conductor down')


class ReporterTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 1000.0
        self.conductor = FakeConductor()
        self.reporter = report.Reporter(self.conductor, 'h', 'h.rp', 600,
                                        clock=lambda: self.now)

    def test_sends_once_until_change(self):
        self.assertTrue(self.reporter.report(None, [_fpga()]))
        self.assertFalse(self.reporter.report(None, [_fpga()]))
        self.assertTrue(self.reporter.report(None, [_fpga(vfs=3)]))
        self.assertEqual(2, len(self.conductor.calls))
        self.assertEqual('h.rp', self.conductor.calls[0][0])

    def test_resync_interval(self):
        self.reporter.report(None, [_fpga()])
        self.now += 599
        self.assertFalse(self.reporter.report(None, [_fpga()]))
        self.now += 1
        self.assertTrue(self.reporter.report(None, [_fpga()]))

    def test_prepare_runs_before_a_send_only(self):
        calls = []

        def prepare(devices):
            calls.append(len(self.conductor.calls))
        self.reporter.report(None, [_fpga()], prepare=prepare)
        self.reporter.report(None, [_fpga()], prepare=prepare)
        # Once, before the first send; not for the unchanged list.
        self.assertEqual([0], calls)

    def test_failed_prepare_sends_nothing(self):
        def prepare(devices):
            raise RuntimeError('Placement down')
        self.assertRaises(RuntimeError, self.reporter.report, None,
                          [_fpga()], prepare=prepare)
        self.assertEqual([], self.conductor.calls)
        self.assertTrue(self.reporter.report(None, [_fpga()]))

    def test_failed_send_is_retried(self):
        self.conductor.fail = True
        self.assertRaises(RuntimeError, self.reporter.report, None,
                          [_fpga()])
        self.conductor.fail = False
        self.assertTrue(self.reporter.report(None, [_fpga()]))

    def test_invalidate(self):
        self.reporter.report(None, [_fpga()])
        self.reporter.invalidate()
        self.assertTrue(self.reporter.report(None, [_fpga()]))

    def test_empty_host_is_reported(self):
        # An empty list deletes what the conductor holds for the host.
        self.assertTrue(self.reporter.report(None, []))
        self.assertEqual([], self.conductor.calls[0][1])
