"""nova_cyborg_client.sdk against an exchange recorded with the cloud."""

import json

import fixtures
from openstack import exceptions as sdk_exc
import testtools

from nova_cyborg_client import sdk
from tests.unit.client import exchange


class SdkTestBase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.replay = exchange.Replay(self)
        self.conn = self.replay.connection()
        self.server = self.replay.data['server']
        self.profile = self.replay.data['profile']
        # The waits' pauses between two looks: counted, not slept.
        self.sleep = self.useFixture(fixtures.MockPatch(
            'openstack.utils.time.sleep')).mock

    def arqs(self, step):
        """The ARQs of the last ARQ list answered in a step."""
        for entry in reversed(self.replay.data['steps'][step]):
            if '/accelerator_requests' in entry['url']:
                return json.loads(entry['text'])['arqs']
        raise AssertionError('no ARQ list in step %s' % step)


class ListTest(SdkTestBase):

    def test_no_accelerators(self):
        entries = self.replay.steps('list_empty')
        self.assertEqual([], sdk.list_accelerators(
            self.conn, self.server['name']))
        self.assertEqual(self.replay.expected(entries), self.replay.sent())
        # Cyborg filters by server: the query names it.
        self.assertIn('instance=%s' % self.server['id'],
                      self.replay.sent()[-1][1])

    def test_bound_accelerator(self):
        self.replay.steps('list')
        arqs = sdk.list_accelerators(self.conn, self.server['name'])
        recorded = self.arqs('list')
        self.assertEqual(1, len(recorded))
        self.assertEqual(
            [(a['uuid'], a['state'], a['device_profile_name'],
              a['hostname'], a['device_rp_uuid'], a['attach_handle_type'],
              a['attach_handle_info']) for a in recorded],
            [(a.uuid, a.state, a.device_profile_name, a.hostname,
              a.device_rp_uuid, a.attach_handle_type, a.attach_handle_info)
             for a in arqs])
        self.assertEqual('Bound', arqs[0].state)
        self.assertEqual(self.server['id'], arqs[0].instance_uuid)


class AddTest(SdkTestBase):

    def test_add_and_wait(self):
        entries = self.replay.steps('add_wait')
        arqs = sdk.add_accelerator(self.conn, self.server['name'],
                                   self.profile, wait=True)
        self.assertEqual(self.replay.expected(entries), self.replay.sent())
        post = [e for e in entries if e['method'] == 'POST']
        self.assertEqual(1, len(post))
        self.assertEqual({'addAccelerator': {'device_profile': self.profile}},
                         post[0]['request_json'])
        self.assertEqual([(a['uuid'], 'Bound')
                          for a in self.arqs('add_wait')],
                         [(a.uuid, a.state) for a in arqs])
        # One pause between two looks, as many as the recorded looks
        # that found the action under way.
        polls = sum(1 for e in entries if e['method'] == 'GET' and
                    e['url'].endswith('/servers/' + self.server['id']))
        self.assertEqual(polls - 1, self.sleep.call_count)

    def test_add_without_wait_returns_the_request_id(self):
        entries = self.replay.steps('add_wait')
        request_id = sdk.add_accelerator(self.conn, self.server['name'],
                                         self.profile)
        post = [e for e in entries if e['method'] == 'POST'][0]
        self.assertEqual(post['headers']['x-openstack-request-id'],
                         request_id)
        self.assertEqual('POST', self.replay.sent()[-1][0])

    def test_conflict_carries_novas_reason(self):
        self.replay.steps('add_conflict')
        error = self.assertRaises(sdk_exc.ConflictException,
                                  sdk.add_accelerator, self.conn,
                                  self.server['name'], self.profile)
        self.assertEqual(409, error.status_code)
        self.assertIn('attached already', error.details)

    def test_unknown_profile_is_a_bad_request(self):
        self.replay.steps('add_unknown_profile')
        error = self.assertRaises(sdk_exc.BadRequestException,
                                  sdk.add_accelerator, self.conn,
                                  self.server['name'], 'no-such-profile')
        self.assertIn('no-such-profile', error.details)

    def test_unpatched_nova_is_named(self):
        # What Nova answers for an action it does not have (recorded with
        # an action name no Nova has).
        entry = self.replay.data['steps']['no_such_action'][-1]
        self.assertEqual(400, entry['status_code'])
        self.replay.steps('list_empty')
        self.replay.requests.post(
            entry['url'], status_code=400, headers=entry['headers'],
            text=entry['text'].replace('noSuchAction', 'addAccelerator'))
        error = self.assertRaises(sdk_exc.BadRequestException,
                                  sdk.add_accelerator, self.conn,
                                  self.server['name'], self.profile)
        self.assertIn('not patched by nova-cyborg', error.message)
        self.assertIn('There is no such action: addAccelerator',
                      error.details)

    def test_a_profile_name_is_needed(self):
        self.replay.steps('list_empty')
        self.assertRaises(sdk_exc.SDKException, sdk.add_accelerator,
                          self.conn, self.server['name'], '')

    def test_failed_action_raises(self):
        # The recorded add, but nova-compute ended its event in error.
        entries = self.replay.steps('add_wait')
        for entry in entries:
            if '/os-instance-actions/' in entry['url']:
                body = json.loads(entry['text'])
                for event in body['instanceAction']['events']:
                    event['result'] = 'Error'
                    event['details'] = 'Cyborg could not bind'
                self.replay.requests.get(
                    entry['url'], status_code=200, headers=entry['headers'],
                    json=body)
                break
        error = self.assertRaises(sdk.ActionFailed, sdk.add_accelerator,
                                  self.conn, self.server['name'],
                                  self.profile, wait=True)
        self.assertIn('ended in Error: Cyborg could not bind',
                      error.message)

    def test_wait_runs_out(self):
        entries = self.replay.steps('add_wait')
        # The server never leaves its task state.
        first = next(e for e in entries if e['method'] == 'GET' and
                     e['url'].endswith('/servers/' + self.server['id']) and
                     'adding_accelerator' in e['text'])
        self.replay.requests.get(first['url'], status_code=200,
                                 headers=first['headers'], text=first['text'])
        self.assertRaises(sdk_exc.ResourceTimeout, sdk.add_accelerator,
                          self.conn, self.server['name'], self.profile,
                          wait=True, timeout=0.5, poll=0.1)


class RemoveTest(SdkTestBase):

    def test_remove_by_arq_uuid_detaches_its_profile(self):
        entries = self.replay.steps('remove_by_arq_wait')
        arq = self.arqs('list')[0]
        self.assertEqual([], sdk.remove_accelerator(
            self.conn, self.server['name'], arq['uuid'], wait=True))
        self.assertEqual(self.replay.expected(entries), self.replay.sent())
        post = [body for method, _, body in self.replay.sent()
                if method == 'POST']
        self.assertEqual([{'removeAccelerator': {
            'device_profile': arq['device_profile_name']}}], post)

    def test_not_attached(self):
        self.replay.steps('remove_conflict')
        error = self.assertRaises(sdk_exc.ConflictException,
                                  sdk.remove_accelerator, self.conn,
                                  self.server['name'], self.profile)
        self.assertIn('is attached', error.details)
