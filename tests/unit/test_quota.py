"""Unified limits for addAccelerator and a resize into a flavor with a
device profile (nova_cyborg.steps.quota), with Nova's own UnifiedLimitsFixture
and oslo.limit's real enforcer; only the project's usage in Placement is
given."""

from unittest import mock

import fixtures
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova import test
from nova.tests import fixtures as nova_fixtures

from nova_cyborg.flows import server_actions as api
from nova_cyborg.steps import quota

PROJECT = 'owner-project'


def _group(rc='FPGA', amount=1):
    return objects.RequestGroup(
        requester_id='device_profile_0', resources={rc: amount},
        required_traits=set(), forbidden_traits=set(), aggregates=[],
        in_tree=None, use_same_provider=True)


class QuotaTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(driver='nova.quota.UnifiedLimitsDriver', group='quota')
        self.limits = self.useFixture(nova_fixtures.UnifiedLimitsFixture())
        for name, value in (('servers', 10), ('class:VCPU', 20),
                            ('class:MEMORY_MB', 20480),
                            ('class:DISK_GB', 100), ('class:FPGA', 2)):
            self.limits.create_registered_limit(resource_name=name,
                                                default_limit=value)
        self.usage = {'servers': 1, 'class:VCPU': 1, 'class:MEMORY_MB': 512,
                      'class:DISK_GB': 1, 'class:FPGA': 1}
        self.seen = []

        def usage(ctx, project_id, names):
            self.seen.append(project_id)
            return {name: self.usage.get(name, 0) for name in names}
        self.useFixture(fixtures.MockPatch(
            'nova.limit.placement._get_usage', side_effect=usage))
        # An admin of another project acts on the owner's server.
        self.context = nova_context.RequestContext(
            'admin', 'admin-project', is_admin=True)
        self.instance = objects.Instance(
            uuid='9a1c2f1e-6f55-4f3c-9d3e-2b1f0a1c7e21',
            project_id=PROJECT, user_id='owner')
        self.flavor = objects.Flavor(
            vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
            extra_specs={'accel:device_profile': 'fpga-dp'})
        self.bfv = self.useFixture(fixtures.MockPatch(
            'nova.compute.utils.is_volume_backed_instance',
            return_value=False)).mock

    def test_attach_within_the_limit(self):
        quota.check_attach(self.context, self.instance, [_group()])

    def test_attach_over_the_limit_is_refused(self):
        exc = self.assertRaises(
            nova_exception.TooManyInstances, quota.check_attach,
            self.context, self.instance, [_group(amount=2)])
        self.assertIn('class:FPGA', exc.format_message())

    def test_attach_counts_no_server(self):
        # The project is at its server limit: an attach adds none.
        self.usage['servers'] = 10
        quota.check_attach(self.context, self.instance, [_group()])

    def test_attach_checks_the_servers_project_not_the_callers(self):
        quota.check_attach(self.context, self.instance, [_group()])
        self.assertEqual({PROJECT}, set(self.seen))

    def test_resize_counts_the_new_flavor_and_its_profile(self):
        # Placement holds both flavors until confirm: 1 used + 2 asked.
        exc = self.assertRaises(
            nova_exception.TooManyInstances, quota.check_resize,
            self.context, self.instance, self.flavor, [_group(amount=2)])
        self.assertIn('class:FPGA', exc.format_message())
        quota.check_resize(self.context, self.instance, self.flavor,
                           [_group()])

    def test_legacy_quota_driver_checks_nothing(self):
        self.flags(driver='nova.quota.DbQuotaDriver', group='quota')
        self.usage['class:FPGA'] = 2
        quota.check_attach(self.context, self.instance, [_group()])
        quota.check_resize(self.context, self.instance, self.flavor,
                           [_group()])
        self.bfv.assert_not_called()

    def test_new_flavor_checked_through_the_api(self):
        with mock.patch('nova_cyborg.clients.cyborg.'
                        'get_device_profile_request_groups',
                        return_value=[_group(amount=2)]):
            self.assertRaises(nova_exception.TooManyInstances,
                              api.check_new_flavor, self.context,
                              self.flavor, self.instance)
            # Without the server (an older hunk): the profile only.
            api.check_new_flavor(self.context, self.flavor)


class Nova33QuotaTest(QuotaTest):
    """The same on a Nova whose limits count the flavor alone (Nova 33:
    enforce_num_instances_and_flavor): the groups are added here."""

    def setUp(self):
        from nova.limit import placement as placement_limits
        from nova.limit import utils as limit_utils
        from oslo_limit import exception as limit_exceptions

        def by_flavor(context, project_id, flavor, is_bfvm, min_count,
                      max_count, enforcer=None, delta_updates=None):
            # Nova 33's: the flavor's deltas, then delta_updates.
            spec = objects.RequestSpec(flavor=flavor, is_bfv=is_bfvm,
                                       requested_resources=[])
            deltas = placement_limits._get_deltas(spec, max_count)
            deltas.update(delta_updates or {})
            try:
                placement_limits._get_enforcer(
                    context, project_id).enforce(project_id, deltas)
            except limit_exceptions.ProjectOverLimit as e:
                if limit_utils.should_enforce(e):
                    raise nova_exception.TooManyInstances(str(e))
            return max_count
        self.useFixture(fixtures.MonkeyPatch(
            'nova.limit.placement.enforce_num_instances_and_flavor',
            by_flavor))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.limit.placement.enforce_num_instances_and_resources',
            None))
        super().setUp()
