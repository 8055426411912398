"""Tests of nova_cyborg.compat: the differences between Nova 33 and 34,
decided by what the installed Nova has."""

import types
from unittest import mock

import fixtures
import testtools

from nova_cyborg import compat
from nova_cyborg.hooks import libvirt as libvirt_hooks


class _Conf(object):

    def __init__(self, pci_in_placement):
        self.filter_scheduler = types.SimpleNamespace(
            pci_in_placement=pci_in_placement)


class SpawnTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        compat._thread_pool_factory.cache_clear()
        self.addCleanup(compat._thread_pool_factory.cache_clear)

    def test_thread_pool_factory_used_where_nova_has_it(self):
        factory = mock.Mock()
        self.useFixture(fixtures.MockPatchObject(
            compat, '_module', return_value=factory))
        future = compat.spawn(len, 'abc')
        factory.spawn_on.assert_called_once_with(
            factory.ExecutorType.DEFAULT, len, 'abc')
        self.assertIs(factory.spawn_on.return_value, future)

    def test_nova_utils_spawn_without_thread_pool_factory(self):
        # Nova 33: no nova.thread_pool_factory, one default pool.
        self.useFixture(fixtures.MockPatchObject(
            compat, '_module', return_value=None))
        spawn = self.useFixture(fixtures.MockPatch(
            'nova.utils.spawn', create=True)).mock
        self.assertIs(spawn.return_value, compat.spawn(len, 'abc'))
        spawn.assert_called_once_with(len, 'abc')

    def test_long_task_recorded_on_nova_34(self):
        # Nova 34: the long-task pool, and the task recorded so that a
        # graceful shutdown waits for it, as a snapshot is.
        factory = mock.Mock()
        self.useFixture(fixtures.MockPatchObject(
            compat, '_module', return_value=factory))
        manager = mock.Mock()
        future = compat.spawn_long_task(manager, 'add_accelerator',
                                        'instance', 'context', len, 'abc')
        manager._start_recorded_task.assert_called_once_with(
            factory.ExecutorType.LONG_TASK, 'add_accelerator', 'instance',
            'context', len, 'abc')
        self.assertIs(manager._start_recorded_task.return_value, future)

    def test_long_task_on_the_managers_executor_on_nova_33(self):
        self.useFixture(fixtures.MockPatchObject(
            compat, '_module', return_value=None))
        spawn_on = self.useFixture(fixtures.MockPatch(
            'nova.utils.spawn_on', create=True)).mock
        manager = mock.Mock(spec=['_long_task_executor'])
        future = compat.spawn_long_task(manager, 'add_accelerator',
                                        'instance', 'context', len, 'abc')
        spawn_on.assert_called_once_with(manager._long_task_executor, len,
                                         'abc')
        self.assertIs(spawn_on.return_value, future)

    def test_missing_module_is_none(self):
        self.assertIsNone(compat._module('nova.no_such_module_here'))


class DriverFeaturesTest(testtools.TestCase):

    def test_warning_where_the_driver_has_it(self):
        driver = mock.Mock(spec=['_warn_if_nova_managed'])
        compat.warn_if_nova_managed(driver, {'domain': '0000'})
        driver._warn_if_nova_managed.assert_called_once_with(
            {'domain': '0000'})

    def test_no_warning_and_no_error_without_it(self):
        compat.warn_if_nova_managed(mock.Mock(spec=[]), {'domain': '0000'})


class OwnerPrefilterTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(compat, '_warned', []))
        self.log = self.useFixture(fixtures.FakeLogger())

    def _request_filter(self, has_prefilter):
        module = types.SimpleNamespace()
        if has_prefilter:
            module.owner_nova_filter = lambda ctxt, spec: True
        self.useFixture(fixtures.MockPatchObject(
            compat, '_module', return_value=module))

    def test_prefilter_found(self):
        self._request_filter(True)
        self.assertTrue(compat.owner_nova_prefilter())
        self.assertFalse(compat.warn_without_owner_prefilter(_Conf(True)))
        self.assertEqual('', self.log.output)

    def test_without_prefilter_warns_once_with_pci_in_placement(self):
        self._request_filter(False)
        self.assertFalse(compat.owner_nova_prefilter())
        self.assertTrue(compat.warn_without_owner_prefilter(_Conf(True)))
        self.assertTrue(compat.warn_without_owner_prefilter(_Conf(True)))
        self.assertEqual(1, self.log.output.count('no OWNER_NOVA'))
        self.assertIn("out of Nova's [pci] device_spec", self.log.output)

    def test_without_prefilter_nothing_when_pci_not_in_placement(self):
        self._request_filter(False)
        self.assertFalse(compat.warn_without_owner_prefilter(_Conf(False)))
        self.assertEqual('', self.log.output)

    def test_installed_nova_answers(self):
        # True on Nova 34, False on Nova 33 (tox -e py3-nova33): either
        # way a bool read from the scheduler's own module.
        from nova.scheduler import request_filter
        self.assertEqual(hasattr(request_filter, 'owner_nova_filter'),
                         compat.owner_nova_prefilter())


class AddAcceleratorMdevsTest(testtools.TestCase):
    """The hook Nova 33's series calls in spawn() and _hard_reboot()."""

    def test_nothing_without_accelerators(self):
        driver = mock.Mock(spec=[])
        self.assertEqual(['m0'], libvirt_hooks.add_accelerator_mdevs(
            driver, None, ['m0']))
        self.assertEqual([], libvirt_hooks.add_accelerator_mdevs(
            driver, [], []))

    @mock.patch('nova_cyborg.virt.libvirt.allocate_mdevs')
    def test_the_project_makes_the_mdevs(self, allocate):
        # Nova 33's driver (no _allocate_cyborg_mdevs) and Nova 34's alike:
        # the patched _allocate_cyborg_mdevs routes to the same function.
        for spec in (['_host', '_create_mdev'], ['_allocate_cyborg_mdevs']):
            allocate.reset_mock()
            driver = mock.Mock(spec=spec)
            allocate.return_value = ['m1', 'm2']
            mdevs = libvirt_hooks.add_accelerator_mdevs(driver, ['arq'],
                                                        ('m1',))
            allocate.assert_called_once_with(driver, ['arq'])
            self.assertEqual(['m1', 'm2'], mdevs)
