"""The function check before a guest starts, and freeing an allocation.

Cyborg answers through requests-mock; Placement's traits and Nova's image
API are mocked at Nova's report client and image API.
"""

from unittest import mock

import fixtures
from keystoneauth1 import exceptions as ks_exc
from nova.compute import vm_states
from nova import exception as nova_exception
from nova import objects
from nova.scheduler.client import report
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.clients import allocations
from nova_cyborg.model import request_groups
from nova_cyborg.steps import function_check
from tests.unit import test_client

F_X = 'a1a1a1a1b2b2b2b2c3c3c3c3d4d4d4d4'
F_Y = 'f0f0f0f01e1e1e1e2d2d2d2d3c3c3c3c'


def trait(function_id, driver='INTEL'):
    return 'CUSTOM_FPGA_FUNCTION_ID_%s_%s' % (driver, function_id.upper())


def arq(group=0, rp=uuids.rp):
    return test_client._arq(uuids.a0, group=group, state='Bound',
                            device_rp_uuid=rp)


class FunctionCheckBase(test_client.ClientTestBase):

    def setUp(self):
        super().setUp()
        self.report = mock.Mock()
        self.useFixture(fixtures.MockPatch(
            'nova.scheduler.client.report.report_client_singleton',
            return_value=self.report))
        self.image_get = self.useFixture(fixtures.MockPatch(
            'nova.image.glance.API.get')).mock
        self.instance = objects.Instance(uuid=uuids.inst)

    def profile(self, *groups):
        self.requests.get(test_client.PROFILES + '?name=dp1', json={
            'device_profiles': [{'name': 'dp1', 'groups': list(groups)}]})

    def holds(self, *traits):
        self.report.get_provider_traits.return_value = report.TraitInfo(
            traits=set(traits) | {'CUSTOM_FPGA_INTEL', 'OWNER_CYBORG'},
            generation=1)

    def check(self, arqs=None):
        function_check.check(self.context, self.instance,
                             arqs or [arq()])

    def assert_refused(self, cls, *words, arqs=None):
        exc = self.assertRaises(cls, self.check, arqs)
        for word in words:
            self.assertIn(word, exc.format_message())
        return exc


class FunctionCheckTest(FunctionCheckBase):

    def test_no_function_asked_no_check(self):
        self.profile({'resources:FPGA': '1',
                      'trait:CUSTOM_FPGA_INTEL': 'required'})
        self.check()
        self.assertFalse(self.report.get_provider_traits.called)

    def test_function_id_held(self):
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.holds(trait(F_Y))
        self.check()
        self.report.get_provider_traits.assert_called_once_with(
            self.context, uuids.rp)

    def test_function_id_not_held(self):
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.holds(trait(F_X))
        self.assert_refused(function_check.FunctionMismatch,
                            'holds function INTEL_' + F_X.upper(),
                            'asks ' + F_Y.upper())

    def test_bitstream_function_not_held(self):
        self.profile({'resources:FPGA': '1', 'accel:bitstream_id': uuids.bs})
        self.image_get.return_value = {
            'id': uuids.bs, 'properties': {'accel:function_id': F_Y}}
        self.holds(trait(F_X))
        self.assert_refused(function_check.FunctionMismatch,
                            'INTEL_' + F_X.upper(), F_Y.upper())
        self.assertEqual(uuids.bs, self.image_get.call_args[0][1])

    def test_bitstream_function_held(self):
        self.profile({'resources:FPGA': '1', 'accel:bitstream_id': uuids.bs})
        self.image_get.return_value = {
            'id': uuids.bs, 'properties': {'accel:function_id': F_Y}}
        self.holds(trait(F_Y))
        self.check()

    def test_blank_card(self):
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.holds()
        self.assert_refused(function_check.FunctionMismatch,
                            'holds function no function')

    def test_required_trait(self):
        self.profile({'resources:FPGA': '1',
                      'trait:' + trait(F_Y): 'required'})
        self.holds(trait(F_Y))
        self.check()
        self.holds(trait(F_X))
        self.assert_refused(function_check.FunctionMismatch,
                            'asks INTEL_' + F_Y.upper())

    def test_group_of_the_arq_is_checked(self):
        self.profile({'resources:FPGA': '1'},
                     {'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.holds(trait(F_X))
        self.check([arq(group=0)])
        self.assert_refused(function_check.FunctionMismatch, F_Y.upper(),
                            arqs=[arq(group=1)])

    def test_unknown_group_unverified(self):
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        for group in (1, -1, None, True, '0'):
            self.assert_refused(function_check.FunctionUnverified,
                                'no such group', arqs=[arq(group=group)])

    def test_placement_unreachable_unverified(self):
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.report.get_provider_traits.side_effect = (
            ks_exc.ConnectFailure('refused'))
        self.assert_refused(function_check.FunctionUnverified,
                            'cannot be read from Placement', 'refused')

    def test_placement_error_unverified(self):
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.report.get_provider_traits.side_effect = (
            nova_exception.ResourceProviderTraitRetrievalFailed(
                uuid=uuids.rp))
        self.assert_refused(function_check.FunctionUnverified, uuids.rp)

    def test_image_unreadable_unverified(self):
        self.profile({'resources:FPGA': '1', 'accel:bitstream_id': uuids.bs})
        self.image_get.side_effect = nova_exception.ImageNotFound(
            image_id=uuids.bs)
        self.assert_refused(function_check.FunctionUnverified,
                            'function of bitstream %s cannot be read'
                            % uuids.bs)

    def test_image_without_function_unverified(self):
        self.profile({'resources:FPGA': '1', 'accel:bitstream_id': uuids.bs})
        self.image_get.return_value = {'id': uuids.bs, 'properties': {}}
        self.assert_refused(function_check.FunctionUnverified,
                            'names no accel:function_id')

    def test_profile_unreadable_unverified(self):
        self.requests.get(test_client.PROFILES + '?name=dp1',
                          status_code=500)
        self.assert_refused(function_check.FunctionUnverified,
                            'device profile of ARQ')

    def test_profile_read_once(self):
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.holds(trait(F_Y))
        second = test_client._arq(uuids.a1, state='Bound',
                                  device_rp_uuid=uuids.rp2)
        self.check([arq(), second])
        self.assertEqual(1, sum(1 for r in self.requests.request_history
                                if 'device_profiles' in r.url))
        self.assertEqual(2, self.report.get_provider_traits.call_count)


class RecordedAsksTest(FunctionCheckBase):
    """A first build checks against what nova-api recorded (patch 0027):
    no profile is read (requests-mock answers none)."""

    def record(self, *groups, name='dp1'):
        self.instance = objects.Instance(uuid=uuids.inst,
                                         vm_state=vm_states.BUILDING,
                                         system_metadata={})
        function_check.record(self.instance, name,
                              request_groups.build_request_groups(
                                  list(groups), dp_name=name))

    def profile_reads(self):
        return sum(1 for r in self.requests.request_history
                   if 'device_profiles' in r.url)

    def test_recorded_function_checked_without_profile(self):
        self.record({'resources:FPGA': '1'},
                    {'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.assertEqual({function_check.PROFILE_KEY: 'dp1',
                          function_check.ASK_PREFIX + '0': '-',
                          function_check.ASK_PREFIX + '1':
                              'function:' + F_Y},
                         self.instance.system_metadata)
        self.holds(trait(F_Y))
        self.check([arq(group=0), arq(group=1)])
        self.report.get_provider_traits.assert_called_once_with(
            self.context, uuids.rp)
        self.holds(trait(F_X))
        self.assert_refused(function_check.FunctionMismatch, F_Y.upper(),
                            arqs=[arq(group=1)])
        self.assertEqual(0, self.profile_reads())

    def test_recorded_bitstream_and_trait(self):
        self.record({'resources:FPGA': '1', 'accel:bitstream_id': uuids.bs},
                    {'resources:FPGA': '1',
                     'trait:' + trait(F_X): 'required'})
        self.image_get.return_value = {
            'id': uuids.bs, 'properties': {'accel:function_id': F_Y}}
        self.holds(trait(F_Y))
        self.check([arq(group=0)])
        self.assertEqual(uuids.bs, self.image_get.call_args[0][1])
        self.assert_refused(function_check.FunctionMismatch,
                            'asks INTEL_' + F_X.upper(),
                            arqs=[arq(group=1)])
        self.assertEqual(0, self.profile_reads())

    def test_profile_read_after_the_first_build(self):
        # A move or rebuild created the ARQs from the profile as it is now.
        self.record({'resources:FPGA': '1', 'accel:function_id': F_X})
        self.instance.vm_state = vm_states.ACTIVE
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.holds(trait(F_Y))
        self.check()
        self.assertEqual(1, self.profile_reads())

    def test_profile_read_for_another_profile(self):
        # A port's profile, or accelerators added with another one.
        self.record({'resources:FPGA': '1', 'accel:function_id': F_X},
                    name='dp0')
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.holds(trait(F_Y))
        self.check()
        self.assertEqual(1, self.profile_reads())

    def test_profile_read_for_a_group_not_recorded(self):
        self.record({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.profile({'resources:FPGA': '1'},
                     {'resources:FPGA': '1', 'accel:function_id': F_X})
        self.holds(trait(F_X))
        self.check([arq(group=1)])
        self.assertEqual(1, self.profile_reads())

    def test_hostile_record_not_trusted(self):
        self.record({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.instance.system_metadata[function_check.ASK_PREFIX + '0'] = (
            'program:' + F_X)
        self.profile({'resources:FPGA': '1', 'accel:function_id': F_Y})
        self.holds(trait(F_Y))
        self.check()
        self.assertEqual(1, self.profile_reads())

    def test_nothing_recorded_too_long_or_without_asks(self):
        long_id = 'f' * 250
        self.record({'resources:FPGA': '1', 'accel:function_id': long_id})
        self.assertEqual({}, self.instance.system_metadata)
        function_check.record(self.instance, 'dp1',
                              [objects.RequestGroup()])
        self.assertEqual({}, self.instance.system_metadata)

    def test_record_replaces_an_older_one(self):
        self.record({'resources:FPGA': '1'}, {'resources:FPGA': '1'})
        function_check.record(self.instance, 'dp2',
                              request_groups.build_request_groups(
                                  [{'resources:FPGA': '1'}]))
        self.assertEqual({function_check.PROFILE_KEY: 'dp2',
                          function_check.ASK_PREFIX + '0': '-'},
                         self.instance.system_metadata)


class FreeAllocationTest(test_client.ClientTestBase):

    def setUp(self):
        super().setUp()
        self.report = mock.Mock()
        self.useFixture(fixtures.MockPatch(
            'nova.scheduler.client.report.report_client_singleton',
            return_value=self.report))
        self.sleep = mock.Mock()
        self.delete = self.report.delete_allocation_for_instance

    def free(self):
        return allocations.free(self.context, uuids.inst, sleep=self.sleep)

    def test_freed_at_once(self):
        self.delete.return_value = True
        self.assertTrue(self.free())
        self.delete.assert_called_once_with(self.context, uuids.inst,
                                            force=True)
        self.assertFalse(self.sleep.called)

    def test_deadlock_retried(self):
        self.delete.side_effect = [
            nova_exception.AllocationDeleteFailed(
                consumer_uuid=uuids.inst, error='Deadlock found'),
            ks_exc.ConnectFailure('refused'), True]
        self.assertTrue(self.free())
        self.assertEqual(3, self.delete.call_count)
        self.assertEqual([mock.call(0.5), mock.call(1.0)],
                         self.sleep.call_args_list)

    def test_gives_up(self):
        self.delete.side_effect = nova_exception.AllocationDeleteFailed(
            consumer_uuid=uuids.inst, error='Deadlock found')
        exc = self.assertRaises(allocations.AllocationFreeFailed, self.free)
        self.assertEqual(allocations.FREE_ATTEMPTS, self.delete.call_count)
        self.assertEqual(allocations.FREE_ATTEMPTS - 1,
                         self.sleep.call_count)
        self.assertIn('after 4 attempts', exc.format_message())
        self.assertIn('Deadlock found', exc.format_message())
