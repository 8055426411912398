"""Checks nova-api makes before the accelerator actions reach the compute."""

from nova import context
from nova import objects
from nova import policy as nova_policy
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids
import webob.exc

from nova_cyborg import attach_api
from nova_cyborg import exception
from nova_cyborg import policies
from nova_cyborg import request_groups
from nova_cyborg import rpc


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
        rpc.refuse_unpluggable([{'attach_handle_type': 'PCI'}])
        exc = self.assertRaises(exception.OperationRefused,
                                rpc.refuse_unpluggable,
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
        # The unpatched Nova of the unit tests does not list these rules;
        # the series' nova.policies.list_rules does.
        nova_policy.init()
        nova_policy._ENFORCER.register_defaults(policies.list_rules())
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
