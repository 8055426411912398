"""Waiting for bound ARQs, with Nova's real instance-event machinery."""

import threading
import types
from unittest import mock

import fixtures
import requests

from nova.compute import manager
from nova import exception as nova_exception
from nova import objects
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.clients import allocations
from nova_cyborg import exception
from nova_cyborg.model import handoff
from nova_cyborg.steps import bound_arqs as compute
from nova_cyborg.steps import function_check
from tests.unit import test_client

QUERY = test_client.ARQS + '?instance=' + uuids.inst
PCI = {'domain': '0000', 'bus': '0c', 'device': '00', 'function': '1'}


def bound(uuid, **kw):
    arq = dict(state='Bound', attach_handle_type='PCI',
               attach_handle_info=dict(PCI), hostname='h1',
               device_rp_uuid=uuids.rp, instance_uuid=uuids.inst)
    arq.update(kw)
    return test_client._arq(uuid, **arq)


class GetBoundArqsTest(test_client.ClientTestBase):

    def setUp(self):
        super().setUp()
        self.events = manager.InstanceEvents()
        self.virtapi = manager.ComputeVirtAPI(types.SimpleNamespace(
            instance_events=self.events, reportclient=None))
        self.instance = objects.Instance(uuid=uuids.inst, vm_state='building',
                                         task_state='spawning')
        self.flags(arq_binding_timeout=5)
        # The profile asks no FPGA function: no function check
        # (test_compute_function_check has those).
        self.requests.get(test_client.PROFILES + '?name=dp1', json={
            'device_profiles': [{'name': 'dp1',
                                 'groups': [{'resources:FPGA': '1'}]}]})

    def answer(self, *arq_lists):
        self.requests.get(QUERY, [{'json': {'arqs': arqs}}
                                  for arqs in arq_lists])

    def send_event(self, arq_uuid, status, delay=0.2):
        def send():
            event = objects.InstanceExternalEvent(
                instance_uuid=uuids.inst, name=compute.EVENT_NAME,
                tag=arq_uuid, status=status)
            waiter = None
            while waiter is None:
                waiter = self.events.pop_instance_event(self.instance, event)
            waiter.set(event)
        timer = threading.Timer(delay, send)
        timer.start()
        self.addCleanup(timer.cancel)

    def get(self, arq_uuids=(uuids.a0,)):
        return compute.get_bound_arqs(self.virtapi, self.context,
                                      self.instance, list(arq_uuids))

    def test_already_bound_exits_early(self):
        arqs = [bound(uuids.a0)]
        self.answer(arqs, arqs)
        self.assertEqual(arqs, self.get())

    def test_arqs_read_are_handed_to_the_guests_start_check(self):
        # What was read (every ARQ of the server, not only those checked)
        # goes to nova_cyborg.virt.guard for this request, once.
        self.addCleanup(handoff._KEPT.clear)
        arqs = [bound(uuids.a0), bound(uuids.a1, hostname='h2')]
        self.answer(arqs)
        compute.get_bound_arqs(self.virtapi, self.context, self.instance,
                               [uuids.a0], hand_off=True)
        self.assertEqual(arqs, handoff.take(self.context, uuids.inst))
        self.assertIsNone(handoff.take(self.context, uuids.inst))

    def test_nothing_handed_over_unless_asked(self):
        # A move's wait (nova_cyborg.flows.move.resize): its later steps may
        # change the ARQs before the guest starts.
        self.addCleanup(handoff._KEPT.clear)
        self.answer([bound(uuids.a0)])
        self.get()
        self.assertIsNone(handoff.take(self.context, uuids.inst))

    def test_nothing_handed_over_when_the_check_fails(self):
        self.addCleanup(handoff._KEPT.clear)
        self.answer([bound(uuids.a0, state='BindFailed')])
        self.assertRaises(exception.AcceleratorRequestNotBound,
                          compute.get_bound_arqs, self.virtapi, self.context,
                          self.instance, [uuids.a0], hand_off=True)
        self.assertIsNone(handoff.take(self.context, uuids.inst))

    def test_waits_for_event(self):
        self.answer([], [bound(uuids.a0)])
        self.send_event(uuids.a0, 'completed')
        self.assertEqual([uuids.a0], [a['uuid'] for a in self.get()])

    def test_failed_event(self):
        self.answer([])
        self.send_event(uuids.a0, 'failed')
        exc = self.assertRaises(exception.AcceleratorRequestNotBound,
                                self.get)
        self.assertIn('BindFailed', exc.format_message())

    def test_bind_failed_seen_through_early_exit_is_refused(self):
        failed = [bound(uuids.a0, state='BindFailed')]
        self.answer(failed, failed)
        exc = self.assertRaises(exception.AcceleratorRequestNotBound,
                                self.get)
        self.assertIn('is BindFailed, not Bound', exc.format_message())

    def test_deleting_is_refused(self):
        arqs = [bound(uuids.a0, state='Deleting')]
        self.answer(arqs, arqs)
        self.assertRaises(exception.AcceleratorRequestNotBound, self.get)

    def test_every_arq_must_be_bound(self):
        arqs = [bound(uuids.a0)]
        self.answer(arqs, arqs)
        self.send_event(uuids.a1, 'completed')
        exc = self.assertRaises(exception.AcceleratorRequestNotBound,
                                self.get, (uuids.a0, uuids.a1))
        self.assertIn(uuids.a1, exc.format_message())
        self.assertIn('missing', exc.format_message())

    def test_timeout(self):
        self.flags(arq_binding_timeout=1)
        self.answer([])
        exc = self.assertRaises(nova_exception.InstanceEventTimeout,
                                self.get)
        self.assertIn('Timed out after 1 seconds',
                      compute.build_fault_message(exc))

    def unreachable_then(self, *arq_lists):
        """The first read cannot reach Cyborg; the next ones answer."""
        self.flags(connect_retries=0, group='cyborg')
        self.requests.get(QUERY, [
            {'exc': requests.exceptions.ConnectionError('refused')}] + [
            {'json': {'arqs': arqs}} for arqs in arq_lists])

    def test_unreachable_as_the_wait_begins_waits_for_the_event(self):
        self.unreachable_then([bound(uuids.a0)])
        self.send_event(uuids.a0, 'completed')
        self.assertEqual([uuids.a0], [a['uuid'] for a in self.get()])

    def test_unreachable_as_the_wait_begins_event_missed(self):
        # Bound before the wait began: its event is gone, and Cyborg could
        # not be read then. After the timeout the ARQs are read again.
        self.flags(arq_binding_timeout=1)
        self.unreachable_then([bound(uuids.a0)])
        self.assertEqual([uuids.a0], [a['uuid'] for a in self.get()])

    def test_unreachable_as_the_wait_begins_then_timeout(self):
        self.flags(arq_binding_timeout=1)
        for answer in ([bound(uuids.a0, state='BindStarted')], None):
            self.requests.reset_mock()
            if answer is None:
                self.flags(connect_retries=0, group='cyborg')
                self.requests.get(QUERY, exc=requests.exceptions
                                  .ConnectionError('refused'))
            else:
                self.unreachable_then(answer)
            exc = self.assertRaises(nova_exception.InstanceEventTimeout,
                                    self.get)
            self.assertIn('Timed out after 1 seconds',
                          compute.build_fault_message(exc))

    def test_hostile_attach_handle(self):
        arqs = [bound(uuids.a0, attach_handle_info=dict(
            PCI, bus='0c"/><disk'))]
        self.answer(arqs, arqs)
        exc = self.assertRaises(exception.InvalidAttachHandle, self.get)
        self.assertIn(uuids.a0, exc.format_message())

    def test_test_pci_is_refused(self):
        arqs = [bound(uuids.a0, attach_handle_type='TEST_PCI')]
        self.answer(arqs, arqs)
        self.assertRaises(exception.InvalidAttachHandle, self.get)

    def test_disallowed_type_is_refused(self):
        self.flags(allowed_attach_types=['MDEV'], group='nova_cyborg')
        arqs = [bound(uuids.a0)]
        self.answer(arqs, arqs)
        exc = self.assertRaises(exception.InvalidAttachHandle, self.get)
        self.assertIn('attach handle type PCI is not in [nova_cyborg] '
                      'allowed_attach_types', exc.format_message())

    def test_function_checked_once_bound(self):
        arqs = [bound(uuids.a0)]
        self.answer(arqs, arqs)
        with mock.patch.object(function_check, 'check') as check:
            self.assertEqual(arqs, self.get())
        check.assert_called_once_with(self.context, self.instance, arqs)

    def test_no_arqs(self):
        self.assertEqual([], self.get(()))
        self.assertFalse(self.requests.called)


class BuildFailureTest(test_client.ClientTestBase):

    def setUp(self):
        super().setUp()
        self.free = self.useFixture(fixtures.MockPatchObject(
            allocations, 'free')).mock
        self.instance = objects.Instance(uuid=uuids.inst)
        self.instance._context = self.context

    def test_bind_failed_reschedules(self):
        exc = compute.build_failure(
            self.instance,
            exception.AcceleratorRequestNotBound(arq=uuids.a0,
                                                 state='BindFailed'))
        self.assertIsInstance(exc, nova_exception.ComputeResourcesUnavailable)
        self.assertIn('BindFailed', exc.format_message())
        # This host's allocation is freed, with retries, before Nova's own
        # single try (a Placement 500 there left the server in BUILD).
        self.free.assert_called_once_with(self.context, uuids.inst)

    def test_wrong_function_reschedules(self):
        exc = compute.build_failure(
            self.instance, function_check.FunctionMismatch(
                reason='device holds function INTEL_X, profile asks Y'))
        self.assertIsInstance(exc, nova_exception.ComputeResourcesUnavailable)
        self.assertIn('holds function INTEL_X, profile asks Y',
                      exc.format_message())
        self.free.assert_called_once_with(self.context, uuids.inst)

    def test_allocation_not_freed_aborts(self):
        self.free.side_effect = allocations.AllocationFreeFailed(
            attempts=4, error='deadlock')
        exc = compute.build_failure(
            self.instance,
            exception.AcceleratorRequestNotBound(arq=uuids.a0,
                                                 state='BindFailed'))
        self.assertIsInstance(exc, nova_exception.BuildAbortException)
        message = exc.format_message()
        self.assertIn('did not free the allocation after 4 '
                      'attempts: deadlock', message)
        self.assertIn('BindFailed', message)

    def test_others_abort(self):
        for error in (
                exception.InvalidAttachHandle(arq=uuids.a0, reason='bad'),
                exception.CyborgError(op='get', msg='HTTP 500'),
                nova_exception.InstanceEventTimeout(),
                ValueError('boom')):
            exc = compute.build_failure(self.instance, error)
            self.assertIsInstance(exc, nova_exception.BuildAbortException)
            self.assertIn('accelerator', exc.format_message())
        # An aborted build's allocation is Nova's to free.
        self.assertFalse(self.free.called)
