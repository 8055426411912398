"""Tests of the hooks that decide something (nova_cyborg.hooks)."""

from unittest import mock

import testtools

from nova_cyborg.hooks import conductor as conductor_hooks
from nova_cyborg.hooks import libvirt as libvirt_hooks
from nova_cyborg.hooks import manage as manage_hooks


def _instance(extra_specs, system_metadata=None):
    return mock.Mock(uuid='1f1c2a9e-5b7d-4c10-8a2b-3c4d5e6f7a8b',
                     flavor=mock.Mock(extra_specs=extra_specs),
                     system_metadata=system_metadata or {},
                     host='host1', node='host1')


class ExhaustedHostsReasonTest(testtools.TestCase):

    def test_last_failure_read_before_populate_retry(self):
        self.assertEqual('no card', conductor_hooks.last_failure(
            {'retry': {'num_attempts': 2, 'exc_reason': 'no card'}}))
        self.assertIsNone(conductor_hooks.last_failure({}))

    def test_accelerated_server_says_why(self):
        reason = conductor_hooks.exhausted_hosts_reason(
            _instance({'accel:device_profile': 'dp'}), 'Exhausted', 'no card')
        self.assertEqual('Exhausted all hosts available for retrying build '
                         'failures. Last failure: no card', reason)

    def test_server_without_accelerators_keeps_upstream_message(self):
        self.assertEqual('Exhausted', conductor_hooks.exhausted_hosts_reason(
            _instance({}), 'Exhausted', 'no card'))

    def test_no_failure_known(self):
        self.assertEqual('Exhausted', conductor_hooks.exhausted_hosts_reason(
            _instance({'accel:device_profile': 'dp'}), 'Exhausted', None))


class RebuildArqsFailedTest(testtools.TestCase):

    def test_task_state_cleared_image_restored_migration_failed(self):
        manager = mock.Mock()
        instance = _instance({'accel:device_profile': 'dp'})
        instance.vm_state = 'active'
        migration = mock.Mock()
        exc = ValueError('bind failed')
        conductor_hooks.rebuild_arqs_failed(
            manager, 'ctx', instance, migration, 'old-image', 'new-image',
            exc, 'spec')
        self.assertEqual('error', migration.status)
        migration.save.assert_called_once_with()
        self.assertEqual('old-image', instance.image_ref)
        manager._set_vm_state_and_notify.assert_called_once_with(
            'ctx', instance.uuid, 'rebuild_server',
            {'vm_state': 'active', 'task_state': None}, exc, 'spec')


class HealAllocationsTest(testtools.TestCase):

    @mock.patch('nova_cyborg.flows.heal.missing_allocations')
    def test_missing_part_merged(self, missing):
        missing.return_value = {'rp': {'resources': {'FPGA': 1}}}
        command = mock.Mock()
        allocations = {'allocations': {'cn': {'resources': {'VCPU': 1}}}}
        self.assertTrue(manage_hooks.add_accelerator_allocations(
            command, _instance({}), allocations, {'rp': {}}))
        command._merge_allocations.assert_called_once_with(
            {'cn': {'resources': {'VCPU': 1}}}, missing.return_value)
        self.assertEqual(command._merge_allocations.return_value,
                         allocations['allocations'])

    @mock.patch('nova_cyborg.flows.heal.missing_allocations', return_value={})
    def test_nothing_missing_changes_nothing(self, missing):
        command = mock.Mock()
        allocations = {'allocations': {'cn': {}}}
        self.assertFalse(manage_hooks.add_accelerator_allocations(
            command, _instance({}), allocations, {}))
        command._merge_allocations.assert_not_called()
        self.assertEqual({'allocations': {'cn': {}}}, allocations)


class AcceleratorsAfterMoveTest(testtools.TestCase):

    @mock.patch('nova_cyborg.virt.libvirt.allocate_mdevs')
    @mock.patch('nova_cyborg.steps.arqs.instance_arqs')
    def test_mdevs_added_once(self, instance_arqs, allocate):
        driver = mock.Mock()
        allocate.return_value = ['m1', 'm2']
        arqs, mdevs = libvirt_hooks.accelerators_after_move(
            driver, 'ctx', 'inst', ['m0', 'm1'])
        self.assertEqual(instance_arqs.return_value, arqs)
        allocate.assert_called_once_with(driver, arqs)
        self.assertEqual(['m0', 'm1', 'm2'], mdevs)
