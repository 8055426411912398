"""Cyborg runs with its secure RBAC defaults, and Nova still works on them.

The local cloud sets ``[oslo_policy] enforce_new_defaults`` in cyborg.conf
(``localcloud.configs``). Under Cyborg 17's legacy rules any token of a
project may write that project's accelerator requests (ARQs); under the
new ones a reader may only read them, a member (or the service role) may
write them, and a system-scoped token is refused by every Cyborg API (all
are project-scoped). A project member still boots a server with an
accelerator: Nova creates the ARQ with the member's token and binds it as
its service user with a service token.
"""

import openstack

from localcloud import layout as layout_mod
from tests.cloud import base


class CyborgPolicyTest(base.CloudTestCase):

    def _user(self, role):
        """A connection of a new user with ``role`` on a new project."""
        keystone = self.admin.identity
        project = keystone.create_project(name=base._name('project'),
                                          domain_id='default')
        self.addCleanup(keystone.delete_project, project)
        user = keystone.create_user(
            name=base._name(role), domain_id='default',
            password=layout_mod.PASSWORD, default_project_id=project.id)
        self.addCleanup(keystone.delete_user, user)
        keystone.assign_project_role_to_user(
            project, user, keystone.find_role(role, ignore_missing=False))
        return self._connect(user.name, project_name=project.name,
                             project_domain_name='Default')

    def _connect(self, username, **scope):
        return openstack.connect(
            auth_url=self.layout.auth_url, username=username,
            password=layout_mod.PASSWORD, user_domain_name='Default',
            region_name=layout_mod.REGION, identity_interface='public',
            **scope)

    def test_reader_reads_member_writes_arqs(self):
        profile = self._profile()
        reader = self._user('reader').accelerator
        response = reader.post('/accelerator_requests',
                               json={'device_profile_name': profile})
        if response.status_code == 201:  # legacy rules (admin_or_owner)
            self.addCleanup(self.admin.accelerator.delete,
                            '/accelerator_requests', params={
                                'arqs': response.json()['arqs'][0]['uuid']})
        self.assertEqual(403, response.status_code, response.text)
        response = reader.get('/accelerator_requests')
        self.assertEqual(200, response.status_code, response.text)

        member = self._user('member').accelerator
        response = member.post('/accelerator_requests',
                               json={'device_profile_name': profile})
        self.assertEqual(201, response.status_code, response.text)
        arq = response.json()['arqs'][0]['uuid']
        response = member.delete('/accelerator_requests',
                                 params={'arqs': arq})
        self.assertEqual(204, response.status_code, response.text)

    def test_system_scoped_admin_is_refused(self):
        # keystone-manage bootstrap gives the admin the system admin role.
        system = self._connect('admin', system_scope='all').accelerator
        response = system.get('/accelerator_requests')
        self.assertEqual(403, response.status_code, response.text)
        response = system.get('/devices')
        self.assertEqual(403, response.status_code, response.text)

    def test_member_boots_with_accelerator(self):
        server = self.boot(self.create_accelerator_flavor())
        arqs = self.arqs(server['id'])
        self.assertEqual(['Bound'], [arq['state'] for arq in arqs], arqs)
        self.assertEqual({self.handle(arqs[0])},
                         self.hostdevs(server['id']))
        self.delete(server['id'])
        self.assertEqual([], self.arqs(server['id']))
