"""The Cyborg v2 client, against HTTP answers recorded by requests-mock."""

from keystoneauth1 import loading as ks_loading
from nova import context as nova_context
from nova import objects
from nova import service_auth
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids
from requests_mock.contrib import fixture as rm_fixture

from nova_cyborg.clients import cyborg as client
from nova_cyborg import exception
from nova_cyborg.model import bookkeeping

ENDPOINT = 'http://cyborg.test/accelerator/v2'
ARQS = ENDPOINT + '/accelerator_requests'
PROFILES = ENDPOINT + '/device_profiles'


def _arq(uuid, group=0, state='Initial', **kw):
    arq = {'uuid': uuid, 'state': state, 'device_profile_name': 'dp1',
           'device_profile_group_id': group, 'hostname': None,
           'device_rp_uuid': None, 'instance_uuid': None,
           'attach_handle_type': '', 'attach_handle_info': {}}
    arq.update(kw)
    return arq


class ClientTestBase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(endpoint_override=ENDPOINT, group='cyborg')
        self.flags(status_code_retries=0, group='cyborg')
        # keystoneauth's waits between retries (time is only used for them
        # there): recorded, not slept.
        self.ksa_sleep = self.useFixture(test.fixtures.MockPatch(
            'keystoneauth1.session.time')).mock.sleep
        self.useFixture(test.fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg_http._SESSION', None))
        service_auth.reset_globals()
        self.addCleanup(service_auth.reset_globals)
        self.requests = self.useFixture(rm_fixture.Fixture())
        self.context = nova_context.RequestContext(
            'user', 'project', auth_token='user-token')
        self.client = client.get_client(self.context)

    def enable_service_token(self):
        from nova.conf import CONF
        CONF.register_opts(
            ks_loading.get_auth_plugin_conf_options('admin_token'),
            group='service_user')
        self.flags(send_service_user_token=True, auth_type='admin_token',
                   token='service-token', endpoint=ENDPOINT,
                   group='service_user')


class DeviceProfileTest(ClientTestBase):

    def test_get_groups(self):
        groups = [{'resources:FPGA': '1'}]
        self.requests.get(PROFILES + '?name=dp1', json={
            'device_profiles': [{'name': 'dp1', 'groups': groups}]})
        self.assertEqual(groups, self.client.get_device_profile_groups('dp1'))
        request = self.requests.last_request
        self.assertEqual('user-token', request.headers['X-Auth-Token'])

    def test_not_found(self):
        self.requests.get(PROFILES, json={'device_profiles': []})
        exc = self.assertRaises(exception.DeviceProfileError,
                                self.client.get_device_profile_groups, 'dp1')
        self.assertIn('no such device profile', exc.format_message())

    def test_other_names_are_ignored(self):
        # A Cyborg that ignores the name filter must not make us use the
        # wrong profile.
        self.requests.get(PROFILES, json={'device_profiles': [
            {'name': 'other', 'groups': []}]})
        self.assertRaises(exception.DeviceProfileError,
                          self.client.get_device_profile_groups, 'dp1')

    def test_two_with_one_name(self):
        self.requests.get(PROFILES, json={'device_profiles': [
            {'name': 'dp1', 'groups': []}, {'name': 'dp1', 'groups': []}]})
        exc = self.assertRaises(exception.DeviceProfileError,
                                self.client.get_device_profile_groups, 'dp1')
        self.assertIn('2 device profiles with this name',
                      exc.format_message())

    def test_cyborg_5xx(self):
        self.requests.get(PROFILES, status_code=503,
                          json={'error_message': 'down for maintenance'})
        exc = self.assertRaises(exception.DeviceProfileError,
                                self.client.get_device_profile_groups, 'dp1')
        self.assertIn('HTTP 503', exc.format_message())
        self.assertIn('down for maintenance', exc.format_message())

    def test_cyborg_unreachable(self):
        import requests
        self.requests.get(PROFILES, exc=requests.exceptions.ConnectionError)
        exc = self.assertRaises(exception.DeviceProfileError,
                                self.client.get_device_profile_groups, 'dp1')
        self.assertIn('could not reach Cyborg', exc.format_message())

    def test_garbage_answer(self):
        self.requests.get(PROFILES, text='<html>proxy error</html>')
        exc = self.assertRaises(exception.DeviceProfileError,
                                self.client.get_device_profile_groups, 'dp1')
        self.assertIn('no "device_profiles" list', exc.format_message())


class CreateArqsTest(ClientTestBase):

    def test_create_and_match(self):
        self.requests.post(ARQS, status_code=201, json={'arqs': [
            _arq(uuids.a0, 0), _arq(uuids.a1, 1)]})
        arqs = self.client.create_arqs('dp1')
        mapping = {'device_profile_0': [uuids.rp0],
                   'device_profile_1': [uuids.rp1]}
        self.assertEqual([uuids.rp0, uuids.rp1],
                         [self.client.get_arq_device_rp_uuid(a, mapping, None)
                          for a in arqs])
        self.assertEqual({'device_profile_name': 'dp1'},
                         self.requests.last_request.json())

    def test_missing_mapping_names_group(self):
        exc = self.assertRaises(
            exception.ProviderMappingError,
            self.client.get_arq_device_rp_uuid, _arq(uuids.a1, 1),
            {'device_profile_0': [uuids.rp0]}, None)
        self.assertIn('device_profile_1', exc.format_message())

    def test_create_nothing(self):
        self.requests.post(ARQS, status_code=201, json={'arqs': []})
        self.assertRaises(exception.CyborgError, self.client.create_arqs,
                          'dp1')

    def test_create_refused(self):
        self.requests.post(ARQS, status_code=400,
                           json={'error_message': 'bad profile'})
        exc = self.assertRaises(exception.CyborgError,
                                self.client.create_arqs, 'dp1')
        self.assertEqual(400, exc.status)
        self.assertIn('bad profile', exc.format_message())


class BindTest(ClientTestBase):

    BINDINGS = {uuids.a0: {'hostname': 'h1', 'device_rp_uuid': uuids.rp,
                           'instance_uuid': uuids.inst}}

    def test_bind_sends_service_token_and_patch(self):
        self.enable_service_token()
        self.client = client.get_client(self.context)
        self.requests.patch(ARQS, status_code=202)
        self.client.bind_arqs(self.BINDINGS)
        request = self.requests.last_request
        self.assertEqual('service-token', request.headers['X-Service-Token'])
        self.assertEqual('user-token', request.headers['X-Auth-Token'])
        self.assertEqual({uuids.a0: [
            {'path': '/device_rp_uuid', 'op': 'add', 'value': uuids.rp},
            {'path': '/hostname', 'op': 'add', 'value': 'h1'},
            {'path': '/instance_uuid', 'op': 'add', 'value': uuids.inst},
        ]}, request.json())

    def test_bind_without_service_token_config(self):
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.client.bind_arqs, self.BINDINGS)
        self.assertIn('send_service_user_token', exc.format_message())
        self.assertEqual([uuids.a0], exc.arqs)
        self.assertFalse(self.requests.called)

    def test_bind_failure(self):
        self.enable_service_token()
        self.client = client.get_client(self.context)
        self.requests.patch(ARQS, status_code=403,
                            json={'error_message': 'needs service token'})
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.client.bind_arqs, self.BINDINGS)
        self.assertIn('HTTP 403', exc.format_message())
        self.assertEqual([uuids.a0], exc.arqs)

    NOVA_500 = ('Bad API response from Nova for os-server-external-events '
                'API. Details: Failed to send events: HTTP 500')

    def _refused_by_novas_event(self, arq):
        self.enable_service_token()
        self.client = client.get_client(self.context)
        self.requests.patch(ARQS, status_code=400,
                            json={'error_message': self.NOVA_500})
        self.requests.get(ARQS + '?instance=' + uuids.inst,
                          json={'arqs': [arq]})

    def test_bound_although_nova_refused_the_event(self):
        # A bind without programming completes inside Cyborg's PATCH, which
        # answers 400 when Nova refuses the bind event (500 for a server
        # not yet mapped to its cell): read back, the ARQ is Bound as asked.
        self._refused_by_novas_event(_arq(
            uuids.a0, state='Bound', hostname='h1', device_rp_uuid=uuids.rp,
            instance_uuid=uuids.inst))
        self.client.bind_arqs(self.BINDINGS)
        self.assertEqual('GET', self.requests.last_request.method)

    def test_refused_and_not_bound_as_asked(self):
        for arq in (
                _arq(uuids.a0, state='BindFailed', hostname='h1',
                     device_rp_uuid=uuids.rp, instance_uuid=uuids.inst),
                _arq(uuids.a0, state='Bound', hostname='h2',
                     device_rp_uuid=uuids.rp, instance_uuid=uuids.inst),
                _arq(uuids.a0, state='Bound', hostname='h1',
                     device_rp_uuid=uuids.other, instance_uuid=uuids.inst),
                _arq(uuids.a1, state='Bound', hostname='h1',
                     device_rp_uuid=uuids.rp, instance_uuid=uuids.inst)):
            self._refused_by_novas_event(arq)
            exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                    self.client.bind_arqs, self.BINDINGS)
            self.assertIn('HTTP 400', exc.format_message())
            self.assertIn('os-server-external-events', exc.format_message())

    def test_refused_and_read_back_fails(self):
        self._refused_by_novas_event({})
        self.requests.get(ARQS + '?instance=' + uuids.inst, status_code=503)
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.client.bind_arqs, self.BINDINGS)
        self.assertIn('HTTP 400', exc.format_message())

    def test_other_refusals_are_not_read_back(self):
        self.enable_service_token()
        self.client = client.get_client(self.context)
        for status in (403, 409, 500):
            self.requests.patch(ARQS, status_code=status,
                                json={'error_message': 'boom'})
            self.assertRaises(exception.AcceleratorRequestBindingFailed,
                              self.client.bind_arqs, self.BINDINGS)
            self.assertEqual('PATCH', self.requests.last_request.method)


class QueryTest(ClientTestBase):

    def test_only_resolved(self):
        self.requests.get(ARQS + '?instance=' + uuids.inst, json={'arqs': [
            _arq(uuids.a0, state='Bound'), _arq(uuids.a1, state='BindStarted'),
            _arq(uuids.a2, state='BindFailed')]})
        arqs = self.client.get_arqs_for_instance(uuids.inst,
                                                 only_resolved=True)
        self.assertEqual([uuids.a0, uuids.a2], [a['uuid'] for a in arqs])

    def test_none_is_empty(self):
        self.requests.get(ARQS, json={'arqs': []})
        self.assertEqual([], self.client.get_arqs_for_instance(uuids.inst))


class DeleteTest(ClientTestBase):

    def setUp(self):
        super().setUp()
        self.enable_service_token()
        self.client = client.get_client(self.context)

    def test_delete_for_instance(self):
        # Those bound under the server's UUID and under its alias (where a
        # live migration binds the destination's).
        self.requests.delete(ARQS, status_code=204)
        self.client.delete_arqs_for_instance(uuids.inst)
        self.assertEqual([[uuids.inst], [bookkeeping.alias(uuids.inst)]],
                         [r.qs['instance']
                          for r in self.requests.request_history])
        for request in self.requests.request_history:
            self.assertEqual('service-token',
                             request.headers['X-Service-Token'])

    def test_delete_for_instance_under_the_owners_asked(self):
        # The caller read the server's holders (nova_cyborg.model.bookkeeping):
        # one call for a server that never live-migrated.
        self.requests.delete(ARQS, status_code=204)
        self.client.delete_arqs_for_instance(uuids.inst,
                                             owners=(uuids.inst,))
        self.assertEqual([[uuids.inst]],
                         [r.qs['instance']
                          for r in self.requests.request_history])

    def test_delete_for_instance_failure_raises(self):
        self.requests.delete(ARQS, status_code=500)
        self.assertRaises(exception.CyborgError,
                          self.client.delete_arqs_for_instance, uuids.inst)

    def test_delete_by_uuid(self):
        self.requests.delete(ARQS, status_code=204)
        self.client.delete_arqs_by_uuid([uuids.a0, uuids.a1])
        self.assertEqual(
            {'arqs': ['%s,%s' % (uuids.a0, uuids.a1)]},
            self.requests.last_request.qs)

    def test_delete_by_uuid_one_missing_deletes_the_rest(self):
        def answer(request, context):
            context.status_code = (404 if ',' in request.qs['arqs'][0] or
                                   uuids.a1 in request.qs['arqs'][0]
                                   else 204)
            return ''
        self.requests.delete(ARQS, text=answer)
        self.client.delete_arqs_by_uuid([uuids.a0, uuids.a1])
        deleted = [r.qs['arqs'][0] for r in self.requests.request_history]
        self.assertEqual(['%s,%s' % (uuids.a0, uuids.a1), uuids.a0,
                          uuids.a1], deleted)

    def test_delete_by_uuid_nothing(self):
        self.client.delete_arqs_by_uuid([])
        self.client.delete_arqs_by_uuid(None)
        self.assertFalse(self.requests.called)

    def test_delete_by_uuid_never_raises(self):
        self.requests.delete(ARQS, status_code=500)
        self.client.delete_arqs_by_uuid([uuids.a0])

    def test_delete_by_uuid_without_service_token_config(self):
        # Never-bound ARQs: Cyborg deletes them without a service token, so
        # a boot refused for want of one leaves nothing behind.
        self.flags(send_service_user_token=False, group='service_user')
        self.requests.delete(ARQS, status_code=204)
        self.assertEqual([], self.client.delete_arqs_by_uuid([uuids.a0]))
        self.assertNotIn('X-Service-Token',
                         self.requests.last_request.headers)


class ContextWithoutTokenTest(ClientTestBase):
    """A service's own context (get_admin_context()) has no user token."""

    def setUp(self):
        super().setUp()
        self.client = client.get_client(nova_context.get_admin_context())
        self.requests.delete(ARQS, status_code=204)

    def test_service_user_stands_in(self):
        self.enable_service_token()
        self.client.delete_arqs_for_instance(uuids.inst)
        headers = self.requests.last_request.headers
        self.assertEqual('service-token', headers['X-Auth-Token'])
        self.assertEqual('service-token', headers['X-Service-Token'])

    def test_service_user_without_send_service_user_token(self):
        # The service user still authenticates the call; binding and
        # deleting are refused for want of a service token, as for users.
        self.enable_service_token()
        self.flags(send_service_user_token=False, group='service_user')
        self.requests.get(ARQS + '?instance=' + uuids.inst, json={'arqs': []})
        self.assertEqual([], self.client.get_arqs_for_instance(uuids.inst))
        headers = self.requests.last_request.headers
        self.assertEqual('service-token', headers['X-Auth-Token'])
        self.assertNotIn('X-Service-Token', headers)

    def test_not_allowed(self):
        self.enable_service_token()
        self.flags(service_user_without_user_token=False,
                   group='nova_cyborg')
        e = self.assertRaises(exception.CyborgError,
                              self.client.delete_arqs_for_instance, uuids.inst)
        self.assertIn('service_user_without_user_token is false', str(e))
        self.assertFalse(self.requests.called)

    def test_no_service_user_configured(self):
        self.flags(require_service_token=False, group='nova_cyborg')
        e = self.assertRaises(exception.CyborgError,
                              self.client.delete_arqs_for_instance, uuids.inst)
        self.assertIn('set [service_user] auth_type', str(e))
        self.assertFalse(self.requests.called)

    def test_context_with_token_keeps_user_token(self):
        # Creating ARQs: as the user (deleting is as the service user
        # whoever calls, see ProjectTest).
        self.enable_service_token()
        self.requests.post(ARQS, status_code=201,
                           json={'arqs': [_arq(uuids.a0)]})
        client.get_client(self.context).create_arqs('dp1')
        headers = self.requests.last_request.headers
        self.assertEqual('user-token', headers['X-Auth-Token'])
        self.assertEqual('service-token', headers['X-Service-Token'])


class ProjectTest(ClientTestBase):
    """A server's ARQs belong to its project, whoever acts on it."""

    BINDINGS = BindTest.BINDINGS

    def setUp(self):
        super().setUp()
        self.enable_service_token()
        self.client = client.get_client(self.context)
        self.requests.patch(ARQS, status_code=202)
        self.useFixture(test.fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg._version_header',
            [client.PROJECT_ID_VERSION]))

    def test_bind_for_another_project_on_cyborg_16(self):
        # Cyborg 16's parse_headers reads "accelerator 2.1" as 2.0 and
        # refuses /project_id there (cyborg/api/controllers/v2/arqs.py,
        # 406); it reads the bare "2.1".
        def cyborg_16(request, context):
            if request.headers['OpenStack-API-Version'] != '2.1':
                context.status_code = 406
                return {'faultcode': 'Client', 'faultstring': (
                    'Request not acceptable. The minimal required API '
                    'version should be 2.1'), 'debuginfo': None}
            context.status_code = 202
            return None
        self.requests.patch(ARQS, json=cyborg_16)
        self.client.bind_arqs(self.BINDINGS, project_id='owner-project')
        self.assertEqual(['accelerator 2.1', '2.1'], [
            r.headers['OpenStack-API-Version']
            for r in self.requests.request_history])
        # The next bind of this process sends the bare version at once.
        self.client.bind_arqs(self.BINDINGS, project_id='owner-project')
        self.assertEqual(3, self.requests.call_count)
        self.assertEqual('2.1', self.requests.last_request.headers[
            'OpenStack-API-Version'])

    def test_other_refusals_of_a_project_bind_are_not_retried(self):
        self.requests.patch(ARQS, status_code=403, json={
            'faultstring': 'Policy does not allow cyborg:arq:update'})
        self.assertRaises(exception.AcceleratorRequestBindingFailed,
                          self.client.bind_arqs, self.BINDINGS,
                          project_id='owner-project')
        self.assertEqual(1, self.requests.call_count)

    def test_bind_in_own_project_as_user_at_the_base_version(self):
        self.client.bind_arqs(self.BINDINGS, project_id='project')
        request = self.requests.last_request
        self.assertEqual('user-token', request.headers['X-Auth-Token'])
        self.assertNotIn('OpenStack-API-Version', request.headers)
        self.assertNotIn('/project_id', [
            op['path'] for op in request.json()[uuids.a0]])

    def test_bind_for_another_project_sets_it_as_service_user(self):
        # An admin of another project acting on a user's server.
        self.client.bind_arqs(self.BINDINGS, project_id='owner-project')
        request = self.requests.last_request
        self.assertEqual('service-token', request.headers['X-Auth-Token'])
        self.assertEqual('service-token', request.headers['X-Service-Token'])
        self.assertEqual('accelerator 2.1',
                         request.headers['OpenStack-API-Version'])
        self.assertEqual({uuids.a0: [
            {'path': '/device_rp_uuid', 'op': 'add', 'value': uuids.rp},
            {'path': '/hostname', 'op': 'add', 'value': 'h1'},
            {'path': '/instance_uuid', 'op': 'add', 'value': uuids.inst},
            {'path': '/project_id', 'op': 'add', 'value': 'owner-project'},
        ]}, request.json())
        # The caller's bindings are left as they were.
        self.assertNotIn('project_id', self.BINDINGS[uuids.a0])

    def test_service_project_creates_and_binds_as_service_user(self):
        # [nova_cyborg] arq_project = service: in the service user's
        # project whoever acts, never with /project_id (no admin needed).
        self.flags(arq_project='service', group='nova_cyborg')
        self.requests.post(ARQS, status_code=201,
                           json={'arqs': [{'uuid': uuids.a0}]})
        self.client.create_arqs('dp1')
        request = self.requests.last_request
        self.assertEqual('service-token', request.headers['X-Auth-Token'])
        for project_id in ('project', 'owner-project'):
            self.client.bind_arqs(self.BINDINGS, project_id=project_id)
            request = self.requests.last_request
            self.assertEqual(('PATCH', 'service-token', 'service-token'),
                             (request.method,
                              request.headers['X-Auth-Token'],
                              request.headers['X-Service-Token']))
            self.assertNotIn('OpenStack-API-Version', request.headers)
            self.assertNotIn('/project_id', [
                op['path'] for op in request.json()[uuids.a0]])

    def test_server_project_creates_as_the_caller(self):
        self.requests.post(ARQS, status_code=201,
                           json={'arqs': [{'uuid': uuids.a0}]})
        self.client.create_arqs('dp1')
        self.assertEqual('user-token',
                         self.requests.last_request.headers['X-Auth-Token'])

    def test_bind_for_another_project_without_service_user(self):
        # Without [service_user], the caller (an admin, or Cyborg says
        # 403) sets the project.
        self.flags(require_service_token=False, group='nova_cyborg')
        self.flags(send_service_user_token=False, auth_type=None,
                   group='service_user')
        self.client.bind_arqs(self.BINDINGS, project_id='owner-project')
        request = self.requests.last_request
        self.assertEqual('user-token', request.headers['X-Auth-Token'])
        self.assertEqual('accelerator 2.1',
                         request.headers['OpenStack-API-Version'])
        self.assertIn('/project_id', [
            op['path'] for op in request.json()[uuids.a0]])

    def test_client_for_an_instance_binds_in_its_project(self):
        instance = objects.Instance(uuid=uuids.inst,
                                    project_id='owner-project')
        client.get_client(self.context, instance=instance).bind_arqs(
            self.BINDINGS)
        request = self.requests.last_request
        self.assertEqual('service-token', request.headers['X-Auth-Token'])
        self.assertIn({'path': '/project_id', 'op': 'add',
                       'value': 'owner-project'}, request.json()[uuids.a0])

    def test_client_for_an_instance_without_project(self):
        client.get_client(self.context, instance=objects.Instance(
            uuid=uuids.inst)).bind_arqs(self.BINDINGS)
        request = self.requests.last_request
        self.assertEqual('user-token', request.headers['X-Auth-Token'])
        self.assertNotIn('OpenStack-API-Version', request.headers)

    def test_reads_unbinds_and_deletes_as_service_user(self):
        # Every ARQ of the server is seen, in whatever project it is.
        self.requests.get(ARQS, json={'arqs': []})
        self.requests.delete(ARQS, status_code=204)
        calls = (
            lambda: self.client.get_arqs_for_instance(uuids.inst),
            self.client.list_arqs,
            lambda: self.client.unbind_arqs([uuids.a0]),
            lambda: self.client.delete_arqs_for_instance(uuids.inst),
            lambda: self.client.delete_arqs_by_uuid([uuids.a0]),
            lambda: self.client.delete_arqs_strictly([uuids.a0]))
        for call in calls:
            call()
        for request in self.requests.request_history:
            headers = request.headers
            self.assertEqual('service-token', headers['X-Auth-Token'])
            self.assertEqual('service-token', headers['X-Service-Token'])
            self.assertNotIn('OpenStack-API-Version', headers)
        # The delete by instance is one call per owner (server, alias).
        self.assertEqual(len(calls) + 1, self.requests.call_count)

    def test_without_service_user_the_caller_reads(self):
        self.flags(send_service_user_token=False, auth_type=None,
                   group='service_user')
        self.useFixture(test.fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg_auth._WARNED', False))
        log = self.useFixture(test.fixtures.MockPatch(
            'nova_cyborg.clients.cyborg_auth.LOG')).mock
        self.requests.get(ARQS, json={'arqs': []})
        self.client.get_arqs_for_instance(uuids.inst)
        self.client.get_arqs_for_instance(uuids.inst)
        headers = self.requests.last_request.headers
        self.assertEqual('user-token', headers['X-Auth-Token'])
        self.assertNotIn('X-Service-Token', headers)
        # Said once, not at every call.
        self.assertEqual(1, log.warning.call_count)
        self.assertIn('[service_user] is not configured',
                      log.warning.call_args[0][0])


class UnbindAndDeleteStrictlyTest(ClientTestBase):

    def setUp(self):
        super().setUp()
        self.enable_service_token()
        self.client = client.get_client(self.context)

    def history(self):
        return [(r.method, r.qs.get('arqs')) for r in
                self.requests.request_history]

    def test_unbind_sends_service_token_and_patch(self):
        self.requests.patch(ARQS, status_code=202)
        self.client.unbind_arqs([uuids.a0, uuids.a1])
        request = self.requests.last_request
        self.assertEqual('service-token', request.headers['X-Service-Token'])
        # As the service user: the ARQs may be in any project.
        self.assertEqual('service-token', request.headers['X-Auth-Token'])
        remove = [{'path': '/device_rp_uuid', 'op': 'remove'},
                  {'path': '/hostname', 'op': 'remove'},
                  {'path': '/instance_uuid', 'op': 'remove'}]
        self.assertEqual({uuids.a0: remove, uuids.a1: remove},
                         request.json())
        self.assertEqual(1, self.requests.call_count)

    def test_unbind_nothing(self):
        self.flags(send_service_user_token=False, group='service_user')
        self.client.unbind_arqs([])
        self.assertFalse(self.requests.called)

    def test_unbind_without_service_token_config(self):
        self.flags(send_service_user_token=False, group='service_user')
        exc = self.assertRaises(exception.CyborgError,
                                self.client.unbind_arqs, [uuids.a0])
        self.assertIn('requires a service token to unbind',
                      exc.format_message())
        self.assertFalse(self.requests.called)

    def test_unbind_failure_raises(self):
        self.requests.patch(ARQS, status_code=409,
                            json={'error_message': 'ARQ is in use'})
        exc = self.assertRaises(exception.CyborgError,
                                self.client.unbind_arqs, [uuids.a0])
        self.assertEqual(409, exc.status)
        self.assertIn('HTTP 409', exc.format_message())
        self.assertIn('ARQ is in use', exc.format_message())

    def test_delete_strictly(self):
        self.requests.delete(ARQS, status_code=204)
        self.client.delete_arqs_strictly([uuids.a0, uuids.a1])
        self.assertEqual([('DELETE', ['%s,%s' % (uuids.a0, uuids.a1)])],
                         self.history())
        self.assertEqual('service-token',
                         self.requests.last_request.headers['X-Service-Token'])

    def test_delete_strictly_nothing(self):
        self.flags(send_service_user_token=False, group='service_user')
        for nothing in ([], None, [None, '']):
            self.client.delete_arqs_strictly(nothing)
        self.assertFalse(self.requests.called)

    def test_delete_strictly_without_service_token_config(self):
        self.flags(send_service_user_token=False, group='service_user')
        exc = self.assertRaises(exception.CyborgError,
                                self.client.delete_arqs_strictly, [uuids.a0])
        self.assertIn('requires a service token to delete',
                      exc.format_message())
        self.assertFalse(self.requests.called)

    def test_delete_strictly_404_one_by_one(self):
        def answer(request, context):
            arqs = request.qs['arqs'][0]
            context.status_code = 404 if ',' in arqs or arqs == uuids.a1 \
                else 204
            return ''
        self.requests.delete(ARQS, text=answer)
        self.client.delete_arqs_strictly([uuids.a0, uuids.a1, uuids.a2])
        self.assertEqual(
            [('DELETE', [','.join([uuids.a0, uuids.a1, uuids.a2])]),
             ('DELETE', [uuids.a0]), ('DELETE', [uuids.a1]),
             ('DELETE', [uuids.a2])], self.history())

    def test_delete_strictly_one_by_one_failure_raises(self):
        def answer(request, context):
            arqs = request.qs['arqs'][0]
            context.status_code = (404 if ',' in arqs else
                                   500 if arqs == uuids.a0 else 204)
            return ''
        self.requests.delete(ARQS, text=answer)
        exc = self.assertRaises(exception.CyborgError,
                                self.client.delete_arqs_strictly,
                                [uuids.a0, uuids.a1])
        self.assertEqual(500, exc.status)
        self.assertEqual(
            [('DELETE', ['%s,%s' % (uuids.a0, uuids.a1)]),
             ('DELETE', [uuids.a0])], self.history())

    def test_delete_strictly_other_error_raises(self):
        self.requests.delete(ARQS, status_code=500,
                             json={'error_message': 'database is down'})
        exc = self.assertRaises(exception.CyborgError,
                                self.client.delete_arqs_strictly,
                                [uuids.a0, uuids.a1])
        self.assertEqual(500, exc.status)
        self.assertIn('database is down', exc.format_message())
        # Not retried one by one.
        self.assertEqual(1, self.requests.call_count)

    def test_delete_strictly_unreachable_raises(self):
        import requests
        self.requests.delete(ARQS, exc=requests.exceptions.ConnectionError)
        exc = self.assertRaises(exception.CyborgError,
                                self.client.delete_arqs_strictly, [uuids.a0])
        self.assertIsNone(exc.status)
        self.assertIn('could not reach Cyborg', exc.format_message())


class RetryPolicyTest(ClientTestBase):
    """Only reads and deletions are retried, and only so many times.

    keystoneauth applies the adapter's ``[cyborg]`` retry options to every
    method; a create or bind sent again after its answer was lost would
    make duplicate ARQs or meet ARQs Cyborg is already binding.
    """

    BINDINGS = {uuids.a0: {'hostname': 'h1', 'device_rp_uuid': uuids.rp,
                           'instance_uuid': uuids.inst}}

    def setUp(self):
        super().setUp()
        self.enable_service_token()
        self.flags(connect_retries=2, status_code_retries=2,
                   connect_retry_delay=0.01, status_code_retry_delay=0.01,
                   group='cyborg')
        self.client = client.get_client(self.context)
        self.mark()

    def mark(self):
        self._seen = len(self.requests.request_history)

    def calls(self):
        """Requests sent since the last mark()."""
        return len(self.requests.request_history) - self._seen

    @staticmethod
    def _failures():
        import requests
        return [{'exc': requests.exceptions.ConnectionError},
                {'exc': requests.exceptions.ReadTimeout},
                {'status_code': 503, 'json': {'error_message': 'busy'}}]

    def test_get_retried_until_it_works(self):
        for failure in self._failures():
            self.mark()
            self.requests.get(ARQS, [failure, {'json': {'arqs': []}}])
            self.assertEqual([], self.client.get_arqs_for_instance(
                uuids.inst))
            self.assertEqual(2, self.calls(), failure)

    def test_get_retries_are_bounded(self):
        import requests
        self.requests.get(ARQS, exc=requests.exceptions.ConnectionError)
        exc = self.assertRaises(exception.CyborgError,
                                self.client.get_arqs_for_instance, uuids.inst)
        self.assertIn('could not reach Cyborg', exc.format_message())
        self.assertEqual(3, self.calls())

        self.mark()
        self.requests.get(PROFILES, status_code=503,
                          json={'error_message': 'busy'})
        exc = self.assertRaises(exception.DeviceProfileError,
                                self.client.get_device_profile_groups, 'dp1')
        self.assertIn('HTTP 503', exc.format_message())
        self.assertEqual(3, self.calls())

    def test_timeout_says_so(self):
        import requests
        self.requests.get(ARQS, exc=requests.exceptions.ReadTimeout)
        exc = self.assertRaises(exception.CyborgError,
                                self.client.get_arqs_for_instance, uuids.inst)
        self.assertIn('Cyborg did not answer GET /accelerator_requests in '
                      'time', exc.format_message())
        self.assertEqual(3, self.calls())

    def test_delete_retried_until_it_works(self):
        for failure in self._failures():
            self.mark()
            self.requests.delete(ARQS, [failure, {'status_code': 204}])
            self.client.delete_arqs_for_instance(uuids.inst)
            # Retried once, then the alias's delete.
            self.assertEqual(3, self.calls(), failure)

    def test_delete_by_uuid_retried_after_a_lost_answer(self):
        # The first answer was lost after Cyborg deleted the ARQs: the
        # retry gets 404, the ARQs one by one 404 too, all counted as gone.
        import requests
        self.requests.delete(ARQS, [
            {'exc': requests.exceptions.ReadTimeout},
            {'status_code': 404, 'json': {'error_message': 'not found'}}])
        self.client.delete_arqs_strictly([uuids.a0, uuids.a1])
        self.assertEqual(
            ['%s,%s' % (uuids.a0, uuids.a1)] * 2 + [uuids.a0, uuids.a1],
            [r.qs['arqs'][0] for r in
             self.requests.request_history[self._seen:]])

    def test_create_never_retried(self):
        for failure in self._failures():
            self.mark()
            self.requests.post(ARQS, [failure, {
                'status_code': 201, 'json': {'arqs': [_arq(uuids.a0)]}}])
            self.assertRaises(exception.CyborgError,
                              self.client.create_arqs, 'dp1')
            self.assertEqual(1, self.calls(), failure)

    def test_bind_and_unbind_never_retried(self):
        for failure in self._failures():
            self.mark()
            self.requests.patch(ARQS, [failure, {'status_code': 202}])
            self.assertRaises(exception.AcceleratorRequestBindingFailed,
                              self.client.bind_arqs, self.BINDINGS)
            self.assertEqual(1, self.calls(), failure)

            self.mark()
            self.requests.patch(ARQS, [failure, {'status_code': 202}])
            self.assertRaises(exception.CyborgError,
                              self.client.unbind_arqs, [uuids.a0])
            self.assertEqual(1, self.calls(), failure)

    def test_unset_options_retry_reads_a_few_times(self):
        import requests
        self.flags(connect_retries=None, status_code_retries=None,
                   group='cyborg')
        self.requests.get(ARQS, exc=requests.exceptions.ConnectionError)
        self.assertRaises(exception.CyborgError,
                          self.client.get_arqs_for_instance, uuids.inst)
        self.assertEqual(1 + client.DEFAULT_RETRIES,
                         self.calls())

        self.mark()
        self.requests.get(ARQS, status_code=503)
        self.assertRaises(exception.CyborgError,
                          self.client.get_arqs_for_instance, uuids.inst)
        self.assertEqual(1 + client.DEFAULT_RETRIES,
                         self.calls())

        self.mark()
        self.requests.post(ARQS, exc=requests.exceptions.ConnectionError)
        self.assertRaises(exception.CyborgError,
                          self.client.create_arqs, 'dp1')
        self.assertEqual(1, self.calls())

    def test_unset_options_ride_out_a_restart(self):
        # Cyborg's API restarting: connections refused, then 503 from a
        # proxy, for about 25 s. With the options unset, a read keeps
        # trying and gets its answer; keystoneauth's delays double from
        # 0.5 s.
        import requests
        self.flags(connect_retries=None, status_code_retries=None,
                   connect_retry_delay=None, status_code_retry_delay=None,
                   group='cyborg')
        self.client = client.get_client(self.context)
        refused = {'exc': requests.exceptions.ConnectionError}
        unavailable = {'status_code': 503, 'json': {'error_message': 'x'}}
        self.requests.get(ARQS, [refused] * 5 + [unavailable] * 5 +
                          [{'json': {'arqs': []}}])
        self.ksa_sleep.reset_mock()
        self.assertEqual([], self.client.get_arqs_for_instance(uuids.inst))
        self.assertEqual(11, self.calls())
        self.assertEqual([0.5, 1, 2, 4, 8] * 2,
                         [c.args[0] for c in self.ksa_sleep.call_args_list])

        # One more failure of each kind than it retries: it gives up,
        # after trying for about 30 s.
        self.mark()
        self.ksa_sleep.reset_mock()
        self.requests.get(ARQS, exc=requests.exceptions.ConnectionError)
        self.assertRaises(exception.CyborgError,
                          self.client.get_arqs_for_instance, uuids.inst)
        self.assertEqual(7, self.calls())
        self.assertEqual(31.5, sum(
            c.args[0] for c in self.ksa_sleep.call_args_list))

        # Deletes too; creates and binds still never.
        self.mark()
        self.requests.delete(ARQS, [refused] * 6 + [{'status_code': 204}])
        self.client.delete_arqs_for_instance(uuids.inst)
        # 7 for the server's own, 1 for its alias.
        self.assertEqual(8, self.calls())
        self.mark()
        self.requests.post(ARQS, [refused, {
            'status_code': 201, 'json': {'arqs': [_arq(uuids.a0)]}}])
        self.assertRaises(exception.CyborgError,
                          self.client.create_arqs, 'dp1')
        self.assertEqual(1, self.calls())

    def test_zero_disables_retries(self):
        import requests
        self.flags(connect_retries=0, status_code_retries=0, group='cyborg')
        self.requests.delete(ARQS, exc=requests.exceptions.ConnectionError)
        self.assertRaises(exception.CyborgError,
                          self.client.delete_arqs_for_instance, uuids.inst)
        self.assertEqual(1, self.calls())
