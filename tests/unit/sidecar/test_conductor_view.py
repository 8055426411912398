"""The conductor's view: when it is compared, when it is repaired.

cyborg-conductor is a small model here with the behaviour the view relies
on (a deployable left out of a report is destroyed, one that appears is
created with no bitstream); the functional tests run the same code against
the real cyborg-conductor, Placement and Glance.
"""

import contextlib
from unittest import mock

import fixtures
import testtools

from sidecar import exception
from sidecar import model
from sidecar.daemon import service
from sidecar.program import conductor_view
from sidecar.program import manager as program
from tests.unit.sidecar import utils

HOST = 'compute1'
ADDRESS = '0000:81:00.0'
NAME = '%s_%s' % (HOST, ADDRESS)
RP = program.provider_uuid(NAME)
IMAGE_A = 'aaaaaaaa-0000-4000-8000-000000000001'
IMAGE_B = 'bbbbbbbb-0000-4000-8000-000000000002'
FN_A = 'a1' * 16
FN_B = 'b2' * 16
T_A = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_' + FN_A.upper()
T_B = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_' + FN_B.upper()


def _device(function_trait, address=ADDRESS):
    dep = model.Deployable(name=address, resource_class='FPGA',
                           num_accelerators=1,
                           traits=('CUSTOM_FPGA_INTEL', function_trait),
                           driver_name='intel')
    return model.Device(type='FPGA', vendor='8086', model='09c4',
                        address=address, deployables=(dep,))


class Conductor:
    """cyborg-conductor's deployables of one host, and its API reads."""

    def __init__(self):
        self.records = {}
        self.arqs = []
        self.reads = 0
        self.sends = []
        self.down = False
        self.refuse_next = False
        self._next = 0

    def add(self, name, bitstream_id=None):
        self._next += 1
        self.records[name] = {'name': name, 'uuid': 'dep-%d' % self._next,
                              'bitstream_id': bitstream_id}

    # AcceleratorClient
    def deployables(self):
        self.reads += 1
        if self.down:
            raise exception.SidecarError('Cyborg is unreachable')
        return [dict(r) for r in self.records.values()] + [
            {'name': 'compute2_' + ADDRESS, 'bitstream_id': IMAGE_B}]

    def all_arqs(self):
        return list(self.arqs)

    # The report, as drv_deployable_make_diff treats deployables.
    def send(self, devices):
        names = {'%s_%s' % (HOST, dep.name)
                 for d in devices for dep in d.deployables}
        self.sends.append(sorted(names))
        for name in set(self.records) - names:
            del self.records[name]
        if self.refuse_next:
            self.refuse_next = False
            raise RuntimeError('HTTP 409: provider in use')
        for name in names - set(self.records):
            self.add(name)


class Images:

    def __init__(self):
        self.functions = {IMAGE_A: FN_A, IMAGE_B: FN_B}
        self.broken = False

    def get_metadata(self, image_id):
        if self.broken:
            raise exception.BitstreamError(image_id=image_id, reason='down')
        return {'id': image_id,
                'accel:function_id': self.functions.get(image_id)}

    @staticmethod
    def function_id(metadata):
        return metadata.get('accel:function_id')


class Placement:

    def __init__(self):
        self.allocs = {}

    def allocations(self, rp_uuid):
        return dict(self.allocs.get(rp_uuid, {}))


class ConductorViewTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conductor = Conductor()
        self.images = Images()
        self.placement = Placement()
        self.busy = set()

        @contextlib.contextmanager
        def idle(address):
            yield address not in self.busy

        self.view = conductor_view.ConductorView(
            HOST, self.conductor, self.images, self.placement, idle)

    def check(self, devices):
        return self.view.check(devices, self.conductor.send)

    def test_absent_after_a_report(self):
        self.assertEqual([NAME], self.view.absent([_device(T_A)]))
        self.conductor.add(NAME)
        self.conductor.records[NAME]['rp_uuid'] = None
        with self.assertLogs(conductor_view.LOG.logger, 'WARNING') as logs:
            self.assertEqual([], self.view.absent([_device(T_A)]))
        self.assertIn('without a resource provider', logs.output[0])

    def test_no_bitstream_recorded(self):
        self.conductor.add(NAME)
        self.assertEqual({}, self.check([_device(T_A)]))
        self.assertEqual([], self.conductor.sends)
        # Compared once: the next cycle with the same function reads
        # nothing.
        self.check([_device(T_A)])
        self.assertEqual(1, self.conductor.reads)

    def test_true_record(self):
        self.conductor.add(NAME, IMAGE_A)
        self.assertEqual({}, self.check([_device(T_A)]))
        self.assertEqual([], self.conductor.sends)
        self.assertEqual(set(), self.view.pending())

    def test_stale_record_of_an_idle_card_is_reregistered(self):
        self.conductor.add(NAME, IMAGE_A)
        old_uuid = self.conductor.records[NAME]['uuid']
        self.assertEqual({}, self.check([_device(T_B)]))
        # Left out of one report, then reported again.
        self.assertEqual([[], [NAME]], self.conductor.sends)
        self.assertIsNone(self.conductor.records[NAME]['bitstream_id'])
        self.assertNotEqual(old_uuid, self.conductor.records[NAME]['uuid'])
        self.assertEqual(1, self.view.repairs)
        self.assertEqual(set(), self.view.pending())

    def test_other_deployables_stay_reported(self):
        other = '0000:82:00.0'
        other_name = '%s_%s' % (HOST, other)
        self.conductor.add(NAME, IMAGE_A)
        self.conductor.add(other_name, IMAGE_A)
        self.check([_device(T_B), _device(T_A, other)])
        self.assertEqual([[other_name], [NAME, other_name]],
                         self.conductor.sends)
        self.assertEqual(IMAGE_A,
                         self.conductor.records[other_name]['bitstream_id'])

    def test_not_while_a_consumer_holds_the_card(self):
        self.conductor.add(NAME, IMAGE_A)
        self.placement.allocs[RP] = {'server-1': {'FPGA': 1}}
        left = self.check([_device(T_B)])
        self.assertEqual([NAME], [lie.name for lie in left[ADDRESS]])
        self.assertEqual(T_A, left[ADDRESS][0].records)
        self.assertEqual([], self.conductor.sends)
        # Checked again each cycle, repaired once the card is idle.
        self.placement.allocs = {}
        self.assertEqual({}, self.check([_device(T_B)]))
        self.assertEqual([[], [NAME]], self.conductor.sends)

    def test_not_while_an_arq_is_bound_to_it(self):
        self.conductor.add(NAME, IMAGE_A)
        self.conductor.arqs = [{'uuid': 'arq-1', 'device_rp_uuid': RP},
                               {'uuid': 'arq-2', 'device_rp_uuid': 'other'}]
        self.assertIn(ADDRESS, self.check([_device(T_B)]))
        self.assertEqual([], self.conductor.sends)

    def test_not_while_programming(self):
        self.conductor.add(NAME, IMAGE_A)
        self.busy.add(ADDRESS)
        self.assertIn(ADDRESS, self.check([_device(T_B)]))
        self.assertEqual([], self.conductor.sends)

    def test_claim_in_between_still_reports_again(self):
        # The conductor destroys the deployable, Placement refuses to
        # delete the provider: the second report adds it back.
        self.conductor.add(NAME, IMAGE_A)
        self.conductor.refuse_next = True
        self.assertEqual({}, self.check([_device(T_B)]))
        self.assertEqual([[], [NAME]], self.conductor.sends)
        self.assertIsNone(self.conductor.records[NAME]['bitstream_id'])

    def test_second_report_failing_keeps_it_pending(self):
        self.conductor.add(NAME, IMAGE_A)
        sends = []

        def send(devices):
            sends.append(devices)
            if len(sends) == 2:
                raise RuntimeError('timeout')
            self.conductor.send(devices)

        self.assertIn(ADDRESS, self.view.check([_device(T_B)], send))
        self.assertEqual({ADDRESS}, self.view.pending())

    def test_unreadable_image_is_not_guessed(self):
        self.conductor.add(NAME, IMAGE_A)
        self.images.broken = True
        self.assertEqual({}, self.check([_device(T_B)]))
        self.assertEqual([], self.conductor.sends)
        self.assertEqual({ADDRESS}, self.view.pending())
        self.images.broken = False
        self.check([_device(T_B)])
        self.assertEqual([[], [NAME]], self.conductor.sends)

    def test_image_without_a_valid_function_is_a_lie(self):
        self.images.functions[IMAGE_A] = 'not a function!'
        self.conductor.add(NAME, IMAGE_A)
        self.check([_device(T_A)])
        self.assertEqual([[], [NAME]], self.conductor.sends)

    def test_cyborg_down_keeps_it_pending(self):
        self.conductor.add(NAME, IMAGE_A)
        self.conductor.down = True
        self.assertEqual({}, self.check([_device(T_B)]))
        self.assertEqual({ADDRESS}, self.view.pending())
        self.conductor.down = False
        self.check([_device(T_B)])
        self.assertEqual(1, self.view.repairs)

    def test_function_change_compares_again(self):
        # Out of band: nobody told the sidecar, discovery sees it.
        self.conductor.add(NAME, IMAGE_A)
        self.check([_device(T_A)])
        self.assertEqual(1, self.conductor.reads)
        self.assertEqual([], self.conductor.sends)
        self.check([_device(T_B)])
        # Compared, re-registered, read back.
        self.assertEqual(3, self.conductor.reads)
        self.assertEqual([[], [NAME]], self.conductor.sends)

    def test_invalidate_compares_again(self):
        self.conductor.add(NAME, IMAGE_A)
        self.check([_device(T_A)])
        self.view.invalidate()
        self.check([_device(T_A)])
        self.assertEqual(2, self.conductor.reads)

    def test_only_fpgas(self):
        gpu = model.Device(type='GPU', vendor='10de', model='1eb8',
                           address=ADDRESS)
        self.assertEqual({}, self.check([gpu]))
        self.assertEqual(0, self.conductor.reads)

    def test_lie_names_the_deployable(self):
        lie = conductor_view.Lie(NAME, 'dep-1', IMAGE_A, T_A,
                                 frozenset([T_B]))
        self.assertIn(NAME, str(lie))
        self.assertIn('dep-1', str(lie))
        self.assertIn(T_B, str(lie))


class SidecarHookTest(testtools.TestCase):
    """Where the discovery cycle calls the view."""

    def setUp(self):
        super().setUp()
        conf = utils.make_conf()
        conf.set_override('host', HOST)
        self.devices = [_device(T_A)]
        self.calls = []
        self.reporter = mock.Mock(**{'report.return_value': True})
        self.reporter.sendable.side_effect = lambda devices: devices
        self.reconciler = mock.Mock(**{'report_due.return_value': False})
        self.reconciler.converge.side_effect = (
            lambda *a, **kw: self.calls.append('converge') or {})
        self.view = mock.Mock()
        self.view.check.side_effect = (
            lambda devices, send: self.calls.append('view'))
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.daemon.rpc.get_agent_server', mock.Mock()))
        self.sidecar = service.Sidecar(
            conf, mock.Mock(),
            mock.Mock(**{'discover.return_value': self.devices}),
            self.reporter, mock.Mock(**{'busy.return_value': False}),
            mock.Mock(),
            mock.Mock(**{'find_provider.return_value': 'root'}),
            self.reconciler, view=self.view)

    def test_checked_after_the_report_before_the_reconciler(self):
        self.assertTrue(self.sidecar.run_cycle())
        self.assertEqual(['view', 'converge'], self.calls)
        self.view.check.assert_called_once_with(self.devices, send=mock.ANY)

    def test_send_reports_exactly_the_devices_given(self):
        self.sidecar.run_cycle()
        send = self.view.check.call_args[1]['send']
        self.reporter.reset_mock()
        send([])
        self.reporter.invalidate.assert_called_once_with()
        self.reporter.report.assert_called_once_with(
            mock.ANY, [], prepare=mock.ANY)

    def test_a_failing_check_does_not_stop_the_cycle(self):
        self.view.check.side_effect = RuntimeError('boom')
        self.assertTrue(self.sidecar.run_cycle())
        self.reconciler.converge.assert_called_once_with(
            'root', self.devices, report_again=mock.ANY)
        # The full list is sent next cycle.
        self.reporter.invalidate.assert_called_once_with()

    def test_not_checked_when_the_report_failed(self):
        self.reporter.report.side_effect = RuntimeError('no conductor')
        self.assertFalse(self.sidecar.run_cycle())
        self.view.check.assert_not_called()

    def test_programming_marks_the_cards_for_the_next_cycle(self):
        self.sidecar.report_now()
        self.view.invalidate.assert_called_once_with()
        self.view.check.assert_not_called()

    def test_resync_compares_every_card_again(self):
        # After cyborg-conductor's database was restored, for example.
        self.sidecar.resync()
        self.view.invalidate.assert_called_once_with()
