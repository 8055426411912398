"""The Neutron stand-in answers as a Neutron without any resource."""

import json

import testtools

from localcloud import neutron_standin


def _call(method, path, query=''):
    seen = {}

    def start_response(status, headers):
        seen['status'] = int(status.split()[0])

    body = b''.join(neutron_standin.application(
        {'REQUEST_METHOD': method, 'PATH_INFO': path, 'QUERY_STRING': query,
         'HTTP_HOST': '127.0.0.1:25005'}, start_response))
    return seen['status'], json.loads(body)


class NeutronStandinTest(testtools.TestCase):

    def test_version_document(self):
        status, body = _call('GET', '/')
        self.assertEqual(200, status)
        self.assertEqual('http://127.0.0.1:25005/v2.0/',
                         body['versions'][0]['links'][0]['href'])

    def test_collections_are_empty(self):
        for path, key in (('/v2.0/ports', 'ports'),
                          ('/v2.0/ports.json', 'ports'),
                          ('/v2.0/security-groups', 'security_groups'),
                          ('/v2.0/networks/', 'networks')):
            self.assertEqual((200, {key: []}),
                             _call('GET', path, 'device_id=x'), path)

    def test_items_are_not_found(self):
        status, body = _call('GET', '/v2.0/ports/1b6d3e08')
        self.assertEqual(404, status)
        self.assertEqual('NotFound', body['NeutronError']['type'])

    def test_writes_are_refused_with_the_reason(self):
        for method in ('POST', 'PUT', 'DELETE'):
            status, body = _call(method, '/v2.0/ports')
            self.assertEqual(403, status)
            self.assertIn('--nic none', body['NeutronError']['message'])
