"""Security of the integration: projects, service tokens.

Cases and outcomes, against the real Cyborg API, which here requires a
service token with the ``service`` role for bind, unbind and delete:

* A project's ARQs carry its project id. Another project's user sees
  neither the server (404 for ``addAccelerator``/``removeAccelerator``) nor
  its ARQs in Cyborg, and cannot delete or unbind them there (refused).
* Nova binds and deletes with a service token: a boot and a delete go
  through Cyborg's service token check.
* ``[service_user] send_service_user_token = false``: with
  ``[nova_cyborg] require_service_token`` (default) the boot fails before
  Cyborg is asked to bind, with a fault naming the missing option; without
  it, Cyborg refuses the bind (403) and the fault says so. Either way
  nothing is left.

The sidecar's privileged writes are checked in
``tests/unit/sidecar/test_privsep_only.py``; its RPC methods' refusals of
malformed arguments in ``test_sidecar.py``.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

from nova.tests.functional.api import client  # noqa: E402

from tests.functional.harness import cyborg_fixture  # noqa: E402
from tests.functional.harness import identity  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


class SecurityTest(base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        self.dp, self.flavor = self.create_profile_flavor(PROFILE)
        self.other_project = identity.project_id('project-b')
        self.other_token = identity.make_token(
            'bob', self.other_project, ['member', 'reader'])

    def test_another_project_cannot_reach_the_arqs(self):
        server = self.boot(self.flavor)
        arqs = self.assert_accelerated(server, 1)
        self.assertEqual(self.api.project_id, arqs[0]['project_id'])

        bob = client.TestOpenStackClient(
            'bob', self.api.base_url, project_id=self.other_project,
            roles=['member', 'reader'])
        bob.microversion = self.api.microversion
        for action in ('addAccelerator', 'removeAccelerator'):
            ex = self.assertRaises(
                client.OpenStackApiException, bob.post_server_action,
                server['id'], {action: {'device_profile': self.dp}})
            self.assertEqual(404, ex.response.status_code)

        # In Cyborg itself, with bob's own token.
        listed = self.cyborg.request(
            'GET', '/accelerator_requests', token=self.other_token,
            params={'instance': server['id']}).json()['arqs']
        self.assertEqual([], listed)
        for params in ({'instance': server['id']},
                       {'arqs': arqs[0]['uuid']}):
            self.assertRaises(
                cyborg_fixture.CyborgError, self.cyborg.request, 'DELETE',
                '/accelerator_requests', token=self.other_token,
                params=params, expected=(204,))
        unbind = {arqs[0]['uuid']: [
            {'path': '/' + f, 'op': 'remove'}
            for f in ('hostname', 'device_rp_uuid', 'instance_uuid')]}
        self.assertRaises(
            cyborg_fixture.CyborgError, self.cyborg.request, 'PATCH',
            '/accelerator_requests', token=self.other_token, json=unbind,
            expected=(200, 202))
        # Still the owner's, still bound.
        self.assert_accelerated(self.api.get_server(server['id']), 1)
        self._delete_server(server)
        self.assert_nothing_left(server['id'])

    def test_bind_and_delete_pass_the_service_token_check(self):
        # The harness's Cyborg requires a service token with the service
        # role for bind and delete (as deployed); a boot and a delete
        # work, so Nova sent one each time.
        server = self.boot(self.flavor)
        self.assert_accelerated(server, 1)
        self._delete_server(server)
        self.assert_nothing_left(server['id'])
        # And without one, Cyborg refuses (the check is live).
        self.assertRaises(
            cyborg_fixture.CyborgError, self.cyborg.request, 'DELETE',
            '/accelerator_requests', params={'instance': server['id']},
            expected=(204,))

    def _boot_fails(self, *reasons):
        server = self.boot(self.flavor, expected_state='ERROR')
        for reason in reasons:
            self.assertIn(reason, server['fault']['message'])
        self.assert_nothing_left(server['id'])
        self.assertEqual([], self.cyborg.list_arqs())

    def test_no_service_token_configured_is_refused_before_cyborg(self):
        self.flags(send_service_user_token=False, group='service_user')
        self._boot_fails('send_service_user_token')

    def test_no_service_token_sent_cyborg_refuses(self):
        self.flags(send_service_user_token=False, group='service_user')
        self.flags(require_service_token=False, group='nova_cyborg')
        self._boot_fails('403')
