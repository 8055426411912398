"""Replay an exchange recorded between openstacksdk and the local cloud.

``exchange.json`` was recorded by running ``nova_cyborg_client.sdk``
against the local cloud (``tools/cloud up --keep``) as a project member,
with a response hook on the connection's session: each request's method,
URL and JSON body, and each answer's status, a few headers and body.
Identity is not recorded: a keystoneauth token fixture stands in for it,
with the recorded endpoints in its catalog.
"""

import collections
import json
import os
import urllib.parse

from keystoneauth1 import fixture as ks_fixture
import openstack
from requests_mock.contrib import fixture as rm_fixture

AUTH_URL = 'http://identity.test/v3'
_HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    with open(os.path.join(_HERE, 'exchange.json')) as f:
        return json.load(f)


def _base(url):
    return url.split('?', 1)[0].rstrip('/')


class Replay(object):
    """requests-mock answering as the cloud answered, in order."""

    def __init__(self, test):
        self.test = test
        self.data = load()
        self.requests = test.useFixture(rm_fixture.Fixture())
        endpoints = self.data['endpoints']
        roots = set()
        for url in endpoints.values():
            parsed = urllib.parse.urlsplit(url)
            roots.add(_base(url))
            roots.add('%s://%s%s' % (parsed.scheme, parsed.netloc,
                                     parsed.path.rsplit('/', 1)[0]))
        self.discovery = roots
        token = ks_fixture.V3Token(project_id='project', user_id='user')
        for service, url in endpoints.items():
            token.add_service(service).add_standard_endpoints(
                public=url, region='RegionOne')
        self.requests.post(AUTH_URL + '/auth/tokens', json=token,
                           headers={'X-Subject-Token': 'token'})
        self.requests.get(AUTH_URL, json=ks_fixture.V3Discovery(AUTH_URL))
        # Version discovery, answered as recorded whenever asked.
        for entries in self.data['steps'].values():
            for entry in entries:
                if self.is_discovery(entry['url']):
                    self.requests.register_uri(
                        entry['method'], entry['url'],
                        **self._response(entry))

    def is_discovery(self, url):
        return _base(url) in self.discovery

    @staticmethod
    def _response(entry):
        return {'status_code': entry['status_code'],
                'text': entry['text'], 'headers': entry['headers']}

    def connection(self):
        return openstack.connect(
            auth_url=AUTH_URL, username='user', password='secret',
            project_id='project', user_domain_id='default',
            region_name='RegionOne')

    def steps(self, *names):
        """Answer the requests of these steps; return their entries."""
        entries = [entry for name in names
                   for entry in self.data['steps'][name]
                   if not self.is_discovery(entry['url'])]
        answers = collections.OrderedDict()
        for entry in entries:
            answers.setdefault((entry['method'], entry['url']), []).append(
                self._response(entry))
        for (method, url), responses in answers.items():
            self.requests.register_uri(method, url, responses,
                                       complete_qs=True)
        return entries

    def sent(self):
        """(method, URL, JSON body) of what was sent, but identity and
        version discovery."""
        return [(r.method, r.url, r.json() if r.body else None)
                for r in self.requests.request_history
                if not r.url.startswith(AUTH_URL) and
                not self.is_discovery(r.url)]

    @staticmethod
    def expected(entries):
        return [(e['method'], e['url'], e['request_json'])
                for e in entries]
