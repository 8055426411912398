"""The Cyborg API client, against answers recorded by requests-mock."""

from oslo_config import fixture as cfg_fixture
import requests
from requests_mock.contrib import fixture as rm_fixture
import testtools

from sidecar import exception
from sidecar.program import cyborg
from tests.unit.sidecar import utils

ENDPOINT = 'http://cyborg.test/accelerator/v2'
SERVER = '4f1c2a4e-3b1f-4f7e-9a0d-1c2b3a4d5e6f'


class AcceleratorClientTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = utils.make_conf()
        self.useFixture(cfg_fixture.Config(conf)).config(
            endpoint_override=ENDPOINT, group='cyborg')
        self.requests = self.useFixture(rm_fixture.Fixture())
        self.client = cyborg.AcceleratorClient(conf)

    def test_arqs_of(self):
        self.requests.get(ENDPOINT + '/accelerator_requests', json={
            'arqs': [{'uuid': 'a1', 'instance_uuid': SERVER},
                     {'uuid': 'a2', 'instance_uuid': 'another'}]})
        self.assertEqual([{'uuid': 'a1', 'instance_uuid': SERVER}],
                         self.client.arqs_of(SERVER))
        request = self.requests.last_request
        self.assertEqual({'instance': [SERVER]}, request.qs)
        self.assertEqual('accelerator 2.0',
                         request.headers['OpenStack-API-Version'])

    def test_device_profile(self):
        profile = {'name': 'dp-a', 'groups': [{'resources:FPGA': '1'}]}
        self.requests.get(ENDPOINT + '/device_profiles',
                          json={'device_profiles': [profile]})
        self.assertEqual(profile, self.client.device_profile('dp-a'))
        self.assertEqual({'name': ['dp-a']}, self.requests.last_request.qs)

    def test_device_profile_missing(self):
        self.requests.get(ENDPOINT + '/device_profiles',
                          json={'device_profiles': []})
        exc = self.assertRaises(exception.CyborgError,
                                self.client.device_profile, 'dp-a')
        self.assertIn("0 device profiles are named 'dp-a'", str(exc))

    def test_errors(self):
        url = ENDPOINT + '/accelerator_requests'
        for kwargs, words in (
                ({'exc': requests.exceptions.ConnectionError('refused')},
                 'Cyborg is unreachable'),
                ({'status_code': 403, 'text': 'policy'}, 'HTTP 403'),
                ({'json': {'arqs': 'nope'}}, "no 'arqs' list"),
                ({'text': 'not json'}, "no 'arqs' list")):
            self.requests.get(url, **kwargs)
            exc = self.assertRaises(exception.CyborgError,
                                    self.client.arqs_of, SERVER)
            self.assertIn(words, str(exc))
