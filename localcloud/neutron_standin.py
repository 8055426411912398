"""A stand-in for Neutron's API: a cloud with no networks at all.

The local cloud boots servers with ``--nic none`` (no ports), so Nova
never creates a port; it still asks Neutron about the instance's ports
when it deletes, moves or heals an instance. This answers those reads as
a Neutron with no resources would: every collection is empty, every item
is a 404, every write is refused with 403. It does not check tokens. It is
no replacement for Neutron: a server cannot get a network here.
"""

import json
import logging
import re

LOG = logging.getLogger('localcloud.neutron')

_COLLECTION = re.compile(r'^/v2\.0/([a-z0-9_-]+?)(?:\.json)?/?$')


def _respond(start_response, status, body):
    data = json.dumps(body).encode()
    start_response(status, [('Content-Type', 'application/json'),
                            ('Content-Length', str(len(data)))])
    return [data]


def _versions(environ):
    host = environ.get('HTTP_HOST', '127.0.0.1')
    return {'versions': [{
        'id': 'v2.0', 'status': 'CURRENT',
        'links': [{'href': 'http://%s/v2.0/' % host, 'rel': 'self'}]}]}


def application(environ, start_response):
    method = environ['REQUEST_METHOD']
    path = environ.get('PATH_INFO') or '/'
    LOG.info('%s %s?%s', method, path, environ.get('QUERY_STRING', ''))
    if method != 'GET':
        return _respond(start_response, '403 Forbidden', {
            'NeutronError': {'type': 'Forbidden', 'detail': '',
                             'message': 'this cloud has no networking: '
                                        'boot servers with --nic none'}})
    if path in ('/', ''):
        return _respond(start_response, '200 OK', _versions(environ))
    if path.rstrip('/') == '/v2.0':
        return _respond(start_response, '200 OK', {'resources': []})
    match = _COLLECTION.match(path)
    if match:
        name = match.group(1).replace('-', '_')
        return _respond(start_response, '200 OK', {name: []})
    return _respond(start_response, '404 Not Found', {
        'NeutronError': {'type': 'NotFound', 'detail': '',
                         'message': 'no such resource: %s' % path}})
