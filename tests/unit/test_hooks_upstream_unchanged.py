"""The hooks that replace an upstream condition decide as upstream for a
server without accelerators (patches 0002, 0003b, 0006, 0013, 0014)."""

from unittest import mock

import testtools

from nova_cyborg.hooks import api as api_hooks
from nova_cyborg.hooks import compute as compute_hooks
from nova_cyborg.hooks import conductor as conductor_hooks
from nova_cyborg.hooks import resource_tracker as rt_hooks
from nova_cyborg.hooks import scheduler as scheduler_hooks
from nova_cyborg.model import capability

ATTACHED = 'nova_cyborg_attached_arq_0'


def _instance(extra_specs, system_metadata=None):
    return mock.Mock(uuid='1f1c2a9e-5b7d-4c10-8a2b-3c4d5e6f7a8b',
                     flavor=mock.Mock(extra_specs=extra_specs),
                     system_metadata=system_metadata or {},
                     host='host1', node='host1')


class RebuildGoesToCyborgTest(testtools.TestCase):

    def test_server_without_accelerators_as_upstream(self):
        self.assertFalse(conductor_hooks.rebuild_goes_to_cyborg(
            _instance({})))
        self.assertFalse(conductor_hooks.rebuild_goes_to_cyborg(
            _instance({'accel:device_profile': ''})))

    def test_device_profile(self):
        self.assertTrue(conductor_hooks.rebuild_goes_to_cyborg(
            _instance({'accel:device_profile': 'dp'})))

    def test_attached_accelerator_only(self):
        self.assertTrue(conductor_hooks.rebuild_goes_to_cyborg(_instance(
            {}, {ATTACHED: '5a7c7f52-7d3c-4a62-9b0e-6c6a1d1f9a01 dp'})))


class EvacuationHasArqsTest(testtools.TestCase):

    def test_server_without_accelerators_as_upstream(self):
        for arqs in (None, []):
            self.assertFalse(compute_hooks.evacuation_has_arqs(
                _instance({}), arqs))
        self.assertFalse(compute_hooks.evacuation_has_arqs(
            _instance({'accel:device_profile': ''}), []))

    def test_device_profile_without_bound_arqs_as_upstream(self):
        self.assertTrue(compute_hooks.evacuation_has_arqs(
            _instance({'accel:device_profile': 'dp'}), []))

    def test_arqs_of_attached_accelerators(self):
        self.assertTrue(compute_hooks.evacuation_has_arqs(
            _instance({}), ['5a7c7f52-7d3c-4a62-9b0e-6c6a1d1f9a01']))


class CheckHostsTest(testtools.TestCase):

    @mock.patch.object(capability, 'check_hosts')
    def test_server_without_accelerators_not_looked_at(self, check):
        def resize(self, context, instance, flavor_id=None, host_name=None):
            pass
        api_hooks.check_hosts('ctx', resize, _instance({}), host_name='h2')
        check.assert_not_called()

    @mock.patch.object(capability, 'check_hosts')
    def test_arguments_by_name(self, check):
        def resize(self, context, instance, flavor_id=None, host_name=None):
            pass
        instance = _instance({'accel:device_profile': 'dp'})
        api_hooks.check_hosts('ctx', resize, instance, 'f1', host_name='h2')
        (context, operation, inst, arguments), _kw = check.call_args
        self.assertEqual(('ctx', 'resize', instance),
                         (context, operation, inst))
        self.assertEqual('h2', arguments['host_name'])
        self.assertEqual('f1', arguments['flavor_id'])


class TraitTest(testtools.TestCase):

    def test_reported(self):
        traits = {'COMPUTE_NODE', 'COMPUTE_ACCELERATORS'}
        rt_hooks.report_traits(traits)
        self.assertEqual({'COMPUTE_NODE', 'COMPUTE_ACCELERATORS',
                          *capability.TRAITS}, traits)

    def test_not_reported_by_a_driver_without_accelerators(self):
        # ironic: the resource tracker did not set COMPUTE_ACCELERATORS.
        traits = {'COMPUTE_NODE', *capability.TRAITS}
        rt_hooks.report_traits(traits)
        self.assertEqual({'COMPUTE_NODE'}, traits)

    def test_required_only_with_a_device_profile(self):
        spec = mock.Mock(root_required=set(),
                         flavor=mock.Mock(extra_specs={}))
        scheduler_hooks.require_trait(spec)
        self.assertEqual(set(), spec.root_required)
        spec.flavor.extra_specs = {'accel:device_profile': 'dp'}
        scheduler_hooks.require_trait(spec)
        self.assertEqual({capability.TRAIT}, spec.root_required)
