"""Checks nova-api makes before the accelerator actions reach the compute."""

from nova import context
from nova import objects
from nova import policy as nova_policy
from nova import test
from nova.tests import fixtures as nova_fixtures
from oslo_utils.fixture import uuidsentinel as uuids
import webob.exc

from nova_cyborg import exception
from nova_cyborg.flows.attach import api as attach_api
from nova_cyborg.model import actions
from nova_cyborg.model import request_groups
from nova_cyborg import policies


class RecordableTest(test.NoDBTestCase):

    def groups(self, rc='FPGA', amount=1):
        return request_groups.build_request_groups(
            [{'resources:%s' % rc: str(amount)}])

    def test_fits(self):
        # "<profile> <rp uuid> FPGA 1" is 255 characters.
        attach_api.check_recordable('p' * 211, self.groups())

    def test_long_name_is_refused_with_the_limit(self):
        exc = self.assertRaises(exception.DeviceProfileError,
                                attach_api.check_recordable, 'p' * 212,
                                self.groups())
        self.assertIn('need 256 characters, at most 255 fit',
                      exc.format_message())

    def test_long_resource_class_counts(self):
        self.assertRaises(exception.DeviceProfileError,
                          attach_api.check_recordable, 'p' * 20,
                          self.groups(rc='CUSTOM_' + 'X' * 200))


class UnpluggableTest(test.NoDBTestCase):

    def test_pci_may_go_mdev_may_not(self):
        actions.refuse_unpluggable([{'attach_handle_type': 'PCI'}])
        exc = self.assertRaises(exception.OperationRefused,
                                actions.refuse_unpluggable,
                                [{'attach_handle_type': 'PCI'},
                                 {'attach_handle_type': 'MDEV'}])
        self.assertIn('A MDEV accelerator cannot be removed from a running '
                      'server: stop the server first.',
                      exc.format_message())


class OfferedTest(test.TestCase):
    """addAccelerator does not bypass the flavors' access lists: a
    profile is added by a non-admin only where a flavor the server's
    project can use carries it."""

    OWNER = 'owner-project'
    OTHER = 'other-project'

    def setUp(self):
        super().setUp()
        # The rules are registered by nova_cyborg.policies when first
        # checked, whether Nova is patched or not.
        self.admin = context.get_admin_context()
        self.flavor('public-dp', 'pub', is_public=True)
        self.flavor('private-dp', 'priv', is_public=False,
                    projects=[self.OWNER])
        self.flavor('disabled-dp', 'off', is_public=True, disabled=True)

    def flavor(self, profile, name, is_public, projects=(), disabled=False):
        flavor = objects.Flavor(
            context=self.admin, name=name, flavorid=name, memory_mb=512,
            vcpus=1, root_gb=1, ephemeral_gb=0, swap=0, rxtx_factor=1.0,
            vcpu_weight=None, disabled=disabled, is_public=is_public,
            extra_specs={'accel:device_profile': profile})
        flavor.create()
        for project in projects:
            flavor.add_access(project)

    def server(self, project):
        return objects.Instance(uuid=uuids.server, user_id='user',
                                project_id=project)

    def member(self, project):
        return context.RequestContext('user', project, roles=['member'])

    def test_public_and_granted_private_flavors_offer(self):
        self.assertTrue(attach_api.offered(self.OWNER, 'public-dp'))
        self.assertTrue(attach_api.offered(self.OWNER, 'private-dp'))
        self.assertTrue(attach_api.offered(self.OTHER, 'public-dp'))

    def test_private_flavor_of_another_project_does_not(self):
        self.assertFalse(attach_api.offered(self.OTHER, 'private-dp'))

    def test_disabled_flavor_and_no_flavor_do_not(self):
        self.assertFalse(attach_api.offered(self.OWNER, 'disabled-dp'))
        self.assertFalse(attach_api.offered(self.OWNER, 'nowhere-dp'))

    def test_member_refused_with_the_reason(self):
        error = self.assertRaises(
            webob.exc.HTTPForbidden, attach_api.check_offered,
            self.member(self.OTHER), self.server(self.OTHER), 'private-dp')
        self.assertIn('No flavor that project other-project can use offers '
                      'device profile private-dp', error.explanation)
        attach_api.check_offered(self.member(self.OWNER),
                                 self.server(self.OWNER), 'private-dp')

    def test_admin_adds_any_profile(self):
        admin = context.RequestContext('admin', 'admin-project',
                                       roles=['admin', 'member'])
        attach_api.check_offered(admin, self.server(self.OTHER),
                                 'nowhere-dp')


class PolicyTest(test.NoDBTestCase):
    """The rules are nova-cyborg's, registered once; an override of their
    old names in Nova's policy file still applies."""

    OLD = 'os_compute_api:servers:accelerators:add:any_profile'

    def member(self):
        return context.RequestContext('user', 'project', roles=['member'])

    def test_registered_once_whoever_registers_first(self):
        # A Nova still patched by an older series (patch 0010) had them.
        nova_policy.init()
        nova_policy._ENFORCER.register_defaults(policies.list_rules())
        policies.authorize(self.member(), policies.ADD,
                           {'project_id': 'project', 'user_id': 'user'})
        policies.register(nova_policy._ENFORCER)
        # After Nova resets its policy (a new enforcer), once again.
        nova_policy.reset()
        self.assertFalse(policies.authorize(
            self.member(), policies.ADD_ANY_PROFILE,
            {'project_id': 'project', 'user_id': 'user'}, fatal=False))
        self.assertIn(policies.ADD_ANY_PROFILE,
                      nova_policy._ENFORCER.registered_rules)

    def test_own_namespace(self):
        self.assertEqual(
            {'nova_cyborg:servers:accelerators:add',
             'nova_cyborg:servers:accelerators:add:any_profile',
             'nova_cyborg:servers:accelerators:remove'},
            {rule.name for rule in policies.list_rules()})
        self.assertEqual(
            {'os_compute_api:servers:accelerators:add', self.OLD,
             'os_compute_api:servers:accelerators:remove'},
            {rule.deprecated_rule.name for rule in policies.list_rules()})

    def test_override_of_the_old_name_applies(self):
        self.useFixture(nova_fixtures.OverridePolicyFixture(
            rules_in_file={self.OLD: 'role:member'}))
        self.assertTrue(policies.authorize(
            self.member(), policies.ADD_ANY_PROFILE,
            {'project_id': 'project', 'user_id': 'user'}, fatal=False))

    def test_override_of_the_new_name_wins(self):
        self.useFixture(nova_fixtures.OverridePolicyFixture(
            rules_in_file={self.OLD: 'role:member',
                           policies.ADD_ANY_PROFILE: 'role:admin'}))
        self.assertFalse(policies.authorize(
            self.member(), policies.ADD_ANY_PROFILE,
            {'project_id': 'project', 'user_id': 'user'}, fatal=False))
