"""Which computes serve nova-cyborg: the trait, its scheduling, the API check.
"""

from unittest import mock

from keystoneauth1 import exceptions as ks_exc
from nova import exception as nova_exception
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.virt import driver
from nova.virt import fake
from nova.virt.ironic import driver as ironic
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import exception
from nova_cyborg.flows import server_actions as api
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import capability

TRAIT = 'CUSTOM_NOVA_CYBORG_1_0'
LIVE = 'CUSTOM_NOVA_CYBORG_1_1'
CAST_FIRST = 'CUSTOM_NOVA_CYBORG_1_2'


def _instance(extra_specs, system_metadata=None):
    return objects.Instance(uuid=uuids.inst, host='src', node='src-node',
                            system_metadata=system_metadata or {},
                            flavor=objects.Flavor(extra_specs=extra_specs))


class TraitTest(test.NoDBTestCase):

    def test_versions_are_data(self):
        self.assertEqual(TRAIT, capability.TRAIT)
        self.assertEqual((TRAIT, LIVE, CAST_FIRST), capability.TRAITS)
        self.assertEqual(['1.0', '1.1', '1.2'],
                         [v for v, _what in capability.VERSIONS])
        self.assertIn('live migration', capability.VERSIONS[1][1])
        self.assertIn('before Cyborg answers its bind',
                      capability.VERSIONS[2][1])

    def _synced(self, driver_class, traits):
        """The traits of a node of ``driver_class``, as
        ResourceTracker._get_traits sets them before the hook."""
        virt = mock.Mock(spec=driver.ComputeDriver,
                         capabilities=driver_class.capabilities)
        for trait, supported in driver.ComputeDriver.capabilities_as_traits(
                virt).items():
            if supported:
                traits.add(trait)
            else:
                traits.discard(trait)
        traits.add('COMPUTE_NODE')
        capability.report(traits)
        return traits

    def test_report_every_version_and_keep_others(self):
        traits = self._synced(fake.FakeDriver, {'CUSTOM_OPERATOR'})
        self.assertTrue({'COMPUTE_ACCELERATORS', 'CUSTOM_OPERATOR', TRAIT,
                         LIVE}.issubset(traits))

    def test_driver_without_accelerators_reports_none(self):
        # Ironic's capabilities say no, as ComputeDriver's default;
        # what an earlier nova-cyborg reported there is taken back.
        for driver_class in (driver.ComputeDriver, ironic.IronicDriver):
            self.assertFalse(
                driver_class.capabilities['supports_accelerators'])
            traits = self._synced(driver_class,
                                  {'CUSTOM_OPERATOR', TRAIT, LIVE})
            self.assertEqual(set(), traits & {TRAIT, LIVE,
                                              'COMPUTE_ACCELERATORS'})
            self.assertIn('CUSTOM_OPERATOR', traits)

    def test_minimum_needed(self):
        for operation in ('resize', 'evacuate', 'unshelve'):
            self.assertEqual(TRAIT, capability.needed(operation))
        self.assertEqual(LIVE, capability.needed('live_migrate'))

    def _spec(self):
        return objects.RequestSpec(
            flavor=objects.Flavor(extra_specs={}),
            request_level_params=objects.RequestLevelParams(
                root_required=set()))

    def test_require_for_added_accelerators(self):
        instance = _instance(
            {}, {bookkeeping.ATTACHED_PREFIX + '0': uuids.arq + ' dp2'})
        spec = self._spec()
        self.assertTrue(capability.require_for(spec, instance, 'evacuate'))
        self.assertEqual({TRAIT}, spec.root_required)
        spec = self._spec()
        capability.require_for(spec, instance, 'live_migrate')
        self.assertEqual({LIVE}, spec.root_required)

    def test_require_for_a_flavor_profile(self):
        spec = self._spec()
        instance = _instance({'accel:device_profile': 'dp1'})
        self.assertTrue(capability.require_for(spec, instance, 'evacuate'))
        self.assertEqual({TRAIT}, spec.root_required)

    def test_require_for_nothing_without_accelerators(self):
        spec = self._spec()
        for operation in ('evacuate', 'live_migrate'):
            self.assertFalse(
                capability.require_for(spec, _instance({}), operation))
        self.assertEqual(set(), spec.root_required)

    def test_require_for_a_device_profile(self):
        spec = objects.RequestSpec(
            flavor=objects.Flavor(extra_specs={'accel:device_profile': 'dp'}),
            request_level_params=objects.RequestLevelParams(
                root_required={'COMPUTE_ACCELERATORS'}))
        self.assertTrue(capability.require(spec))
        self.assertEqual({'COMPUTE_ACCELERATORS', TRAIT}, spec.root_required)

    def test_nothing_required_without_a_device_profile(self):
        spec = objects.RequestSpec(
            flavor=objects.Flavor(extra_specs={'hw:cpu_policy': 'shared'}),
            request_level_params=objects.RequestLevelParams(
                root_required=set()))
        self.assertFalse(capability.require(spec))
        self.assertEqual(set(), spec.root_required)


class CheckHostsTest(test.NoDBTestCase):
    """nova-api refuses a move a host cannot serve (HTTP 409)."""

    def setUp(self):
        super().setUp()
        self.instance = _instance({'accel:device_profile': 'dp1'})
        self.ctxt = mock.sentinel.context
        self.traits = {uuids.src_rp: {TRAIT, LIVE},
                       uuids.dst_rp: {TRAIT, LIVE}}
        client = mock.Mock()
        client.get_provider_traits.side_effect = (
            lambda ctxt, rp: report.TraitInfo(traits=self.traits[rp],
                                              generation=1))
        self.client = client
        self.useFixture(test.fixtures.MockPatchObject(
            report, 'report_client_singleton', return_value=client))
        self.useFixture(test.fixtures.MockPatchObject(
            objects.ComputeNode, 'get_by_host_and_nodename',
            return_value=objects.ComputeNode(uuid=uuids.src_rp)))
        self.get_all_by_host = self.useFixture(test.fixtures.MockPatchObject(
            objects.ComputeNodeList, 'get_all_by_host',
            return_value=[objects.ComputeNode(uuid=uuids.dst_rp)])).mock

    def check(self, operation, **arguments):
        capability.check_hosts(self.ctxt, operation, self.instance, arguments)

    def assert_refused(self, operation, **arguments):
        exc = self.assertRaises(capability.ComputeNotServing, self.check,
                                operation, **arguments)
        # What Nova's migrate, resize and evacuate actions answer with 409.
        self.assertEqual(409, exc.code)
        self.assertIsInstance(exc, nova_exception.ServiceUnavailable)
        self.assertIsInstance(exc, nova_exception.UnsupportedRPCVersion)
        return exc.format_message()

    def test_patched_hosts_pass(self):
        self.check('resize', host_name='dst')
        self.check('resize', host_name=None)
        self.check('evacuate', host='dst')
        self.get_all_by_host.assert_called_with(self.ctxt, 'dst')

    def test_unpatched_destination_refused(self):
        self.traits[uuids.dst_rp] = {'COMPUTE_NODE'}
        message = self.assert_refused('resize', host_name='dst')
        self.assertIn('destination host dst', message)
        self.assertIn(TRAIT, message)
        self.assertIn('not patched by nova-cyborg', message)
        message = self.assert_refused('evacuate', host='dst')
        self.assertIn('destination host dst', message)

    def test_unpatched_source_refused_for_resize_only(self):
        self.traits[uuids.src_rp] = set()
        message = self.assert_refused('resize', host_name=None)
        self.assertIn('source host src', message)
        objects.ComputeNode.get_by_host_and_nodename.assert_called_once_with(
            self.ctxt, 'src', 'src-node')
        # The source of an evacuation is down: only where it goes counts.
        self.check('evacuate', host='dst')
        self.check('evacuate', host=None)

    def test_unpatched_unshelve_host_refused_as_unshelve_conflict(self):
        self.check('unshelve', host='dst')
        self.traits[uuids.dst_rp] = {'COMPUTE_NODE'}
        exc = self.assertRaises(capability.UnshelveHostNotServing,
                                self.check, 'unshelve', host='dst')
        # What Nova's unshelve action answers with HTTP 409.
        self.assertIsInstance(exc, nova_exception.UnshelveHostNotInAZ)
        self.assertEqual(409, exc.code)
        message = exc.format_message()
        self.assertIn('destination host dst', message)
        self.assertIn(TRAIT, message)
        # The shelved server has no source host to check.
        objects.ComputeNode.get_by_host_and_nodename.assert_not_called()

    def test_unknown_destination_left_to_nova(self):
        self.get_all_by_host.side_effect = (
            nova_exception.ComputeHostNotFound(host='nowhere'))
        self.check('resize', host_name='nowhere')

    def test_placement_failure_refused(self):
        self.client.get_provider_traits.side_effect = (
            ks_exc.ConnectFailure('no route'))
        message = self.assert_refused('resize', host_name=None)
        self.assertIn('could not be read from Placement', message)
        self.client.get_provider_traits.side_effect = (
            nova_exception.ResourceProviderTraitRetrievalFailed(uuid='x'))
        self.assert_refused('evacuate', host='dst')

    def test_servers_without_accelerators_unchecked(self):
        self.instance = _instance({})
        self.traits = {}
        self.check('resize', host_name='dst')
        self.check('evacuate', host='dst')
        self.client.get_provider_traits.assert_not_called()

    def test_attached_accelerators_checked(self):
        self.instance = _instance(
            {}, {bookkeeping.ATTACHED_PREFIX + '0': uuids.arq + ' dp2'})
        self.traits[uuids.dst_rp] = set()
        self.assert_refused('resize', host_name='dst')

    def test_other_operations_unchecked(self):
        self.traits = {}
        for operation in ('rebuild', 'shelve', 'suspend'):
            self.check(operation, host='dst')
        self.client.get_provider_traits.assert_not_called()

    def test_older_destination_serves_all_but_live_migration(self):
        self.traits[uuids.dst_rp] = {TRAIT}
        self.check('resize', host_name='dst')
        self.check('evacuate', host='dst')
        exc = self.assertRaises(
            capability.LiveMigrationHostNotServing, self.check,
            'live_migrate', host_name='dst')
        # HTTP 400 at every microversion, as the other refusals.
        self.assertIsInstance(exc, nova_exception.ForbiddenWithAccelerators)
        self.assertEqual(400, exc.code)
        message = exc.format_message()
        self.assertIn('destination host dst', message)
        self.assertIn(LIVE, message)
        self.assertIn('older nova-cyborg, which serves versions 1.0',
                      message)

    def test_live_migration_source_checked(self):
        for served in (set(), {TRAIT}):
            self.traits[uuids.src_rp] = served
            for host in (None, 'dst'):
                exc = self.assertRaises(
                    capability.LiveMigrationHostNotServing, self.check,
                    'live_migrate', host_name=host)
                self.assertIn('source host src', exc.format_message())
        self.traits[uuids.src_rp] = {TRAIT, LIVE}
        self.check('live_migrate', host_name=None)
        self.check('live_migrate', host_name='dst')

    def test_attach_on_unpatched_host_refused_from_placement(self):
        # addAccelerator on a server whose compute is unpatched: refused
        # from Placement's traits (the compute is not asked, it would log
        # an UnsupportedVersion traceback), with the action's 409.
        self.instance = _instance({})
        self.traits[uuids.src_rp] = {'COMPUTE_NODE'}
        exc = self.assertRaises(exception.OperationRefused,
                                capability.check_attach, self.ctxt,
                                self.instance)
        message = exc.format_message()
        self.assertIn("server's host src cannot attach or detach", message)
        self.assertIn(TRAIT, message)
        self.assertIn('not patched by nova-cyborg', message)
        objects.ComputeNode.get_by_host_and_nodename.assert_called_once_with(
            self.ctxt, 'src', 'src-node')
        # A patched compute (of any version) passes.
        self.traits[uuids.src_rp] = {TRAIT}
        capability.check_attach(self.ctxt, self.instance)


class ApiCheckHostsTest(test.NoDBTestCase):
    """The decorated method's arguments are bound by name."""

    @mock.patch.object(capability, 'check_hosts')
    def test_unshelve_host_checked_with_accelerators_only(self, check_hosts):
        instance = _instance({'accel:device_profile': 'dp1'})
        api.check_unshelve_host('ctxt', instance, None)
        check_hosts.assert_not_called()
        api.check_unshelve_host('ctxt', instance, 'dst')
        check_hosts.assert_called_once_with('ctxt', 'unshelve', instance,
                                            {'host': 'dst'})
        check_hosts.reset_mock()
        api.check_unshelve_host('ctxt', _instance({}), 'dst')
        check_hosts.assert_not_called()

    @mock.patch.object(capability, 'check_hosts')
    def test_positional_and_keyword_arguments(self, check_hosts):
        def evacuate(self, context, instance, host, on_shared_storage,
                     admin_password=None, force=None, target_state=None):
            pass

        def resize(self, context, instance, flavor_id=None,
                   clean_shutdown=True, host_name=None,
                   auto_disk_config=None):
            pass

        instance = _instance({'accel:device_profile': 'dp1'})
        api.check_hosts('ctxt', evacuate, instance, 'dst', False, 'pw')
        check_hosts.assert_called_once_with(
            'ctxt', 'evacuate', instance, mock.ANY)
        self.assertEqual('dst', check_hosts.call_args[0][3]['host'])
        check_hosts.reset_mock()
        api.check_hosts('ctxt', resize, instance, host_name='dst')
        self.assertEqual('resize', check_hosts.call_args[0][1])
        self.assertEqual('dst', check_hosts.call_args[0][3]['host_name'])
