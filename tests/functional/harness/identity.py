"""Stand-in for keystonemiddleware's auth_token in functional tests.

Keystone is not run in functional tests. Instead a token *is* the identity:

    "<user_id>:<project_id>:<role>[,<role>...]"

e.g. ``make_token('alice', project_id('project-a'), ['member'])``. Project
ids that reach Cyborg must look like UUIDs (see :func:`project_id`).

:class:`IdentityMiddleware` turns ``X-Auth-Token`` (and optionally
``X-Service-Token``) into the WSGI environ headers auth_token sets after
validating a real token, after first removing every identity header the
client sent, so that they cannot be spoofed.

Stdlib only: both the Nova and the Cyborg side of the harness use it.
"""

from importlib import metadata
import json
import uuid

PUBLIC_ROUTES = ('/', '/v2')

# Every header auth_token may set (and therefore strips from requests),
# as WSGI environ keys.
_USER_FIELDS = (
    'DOMAIN_ID', 'DOMAIN_NAME',
    'PROJECT_ID', 'PROJECT_NAME', 'PROJECT_DOMAIN_ID', 'PROJECT_DOMAIN_NAME',
    'USER_ID', 'USER_NAME', 'USER_DOMAIN_ID', 'USER_DOMAIN_NAME', 'ROLES',
)
_AUTH_ENVIRON_KEYS = (
    tuple('HTTP_X_%s' % f for f in _USER_FIELDS)
    + tuple('HTTP_X_SERVICE_%s' % f for f in _USER_FIELDS)
    + ('HTTP_X_ROLE', 'HTTP_X_USER', 'HTTP_X_TENANT_ID', 'HTTP_X_TENANT_NAME',
       'HTTP_X_TENANT', 'HTTP_X_IDENTITY_STATUS',
       'HTTP_X_SERVICE_IDENTITY_STATUS', 'HTTP_X_IS_ADMIN_PROJECT',
       'HTTP_X_SERVICE_CATALOG', 'HTTP_OPENSTACK_SYSTEM_SCOPE')
)


def make_token(user_id, project_id, roles):
    """Return a token for ``user_id`` in ``project_id`` with ``roles``.

    :param roles: a list of role names, or a comma separated string.
    """
    if not isinstance(roles, str):
        roles = ','.join(roles)
    return '%s:%s:%s' % (user_id, project_id, roles)


def parse_token(token):
    """Return ``(user_id, project_id, [roles])``.

    All three are None if ``token`` is missing or malformed.
    """
    parts = (token or '').split(':')
    if len(parts) == 3:
        user_id, project_id, roles = (p.strip() for p in parts)
        roles = [r.strip() for r in roles.split(',') if r.strip()]
        if user_id and project_id and roles:
            return user_id, project_id, roles
    return None, None, None


def project_id(name):
    """Return a stable Keystone-style (32 hex digits) project id for ``name``.

    Use it for project ids that reach Cyborg: its API types ARQ
    ``project_id`` as a UUID, so an ARQ created under a project id like
    ``"admin-project"`` is stored and then breaks every ARQ response (400
    "Expected a uuid"), including admin listings.
    """
    return uuid.uuid5(uuid.NAMESPACE_DNS, name + '.project.test').hex


ADMIN_PROJECT_ID = project_id('admin-project')
SERVICE_PROJECT_ID = project_id('service')


def _cyborg_major():
    return int(metadata.version('openstack-cyborg').split('.')[0])


#: The roles Nova's service user holds in its own project with
#: ``[nova_cyborg] arq_project = service`` (doc/source/configuration.rst):
#: Cyborg's ``service`` role (create, bind, unbind, delete: Cyborg 17's
#: ``cyborg:arq:create`` is ``project_member_or_service``) and ``reader``
#: (list). Cyborg 16's ``cyborg:arq:create`` is ``project_member_or_admin``
#: (cyborg/common/policy.py): there it needs ``member`` too.
ARQ_SERVICE_ROLES = ['service', 'reader'] + (
    ['member'] if _cyborg_major() < 17 else [])
ADMIN_TOKEN = make_token('admin', ADMIN_PROJECT_ID,
                         ['admin', 'member', 'reader'])
SERVICE_TOKEN = make_token('nova', SERVICE_PROJECT_ID, ['service', 'admin'])

#: The three people of tests that act on one server as different callers,
#: as ``(user_id, project_id, roles)``: the server's owner, a member of
#: project A; another tenant, a member of project B; and a cloud admin,
#: whose own project is a third one, C.
OWNER = ('owner', project_id('project-a'), ['reader', 'member'])
OTHER_TENANT = ('other-tenant', project_id('project-b'), ['reader', 'member'])
CLOUD_ADMIN = ('cloud-admin', project_id('project-c'),
               ['reader', 'member', 'admin'])


def _normalize(path):
    return (path or '/').rstrip('/') or '/'


class IdentityMiddleware:
    """WSGI middleware trusting tokens of the form ``user:project:roles``."""

    def __init__(self, app, public_routes=PUBLIC_ROUTES):
        self.app = app
        self.public_routes = {_normalize(r) for r in public_routes}

    def __call__(self, environ, start_response):
        for key in _AUTH_ENVIRON_KEYS:
            environ.pop(key, None)

        if _normalize(environ.get('PATH_INFO')) in self.public_routes:
            return self.app(environ, start_response)

        user_id, project, roles = parse_token(
            environ.get('HTTP_X_AUTH_TOKEN'))
        if user_id is None:
            return self._unauthorized(environ, start_response,
                                      'missing or malformed X-Auth-Token')
        service_token = environ.get('HTTP_X_SERVICE_TOKEN')
        s_user_id, s_project_id, s_roles = parse_token(service_token)
        if service_token and s_user_id is None:
            return self._unauthorized(environ, start_response,
                                      'malformed X-Service-Token')

        environ.update({
            'HTTP_X_IDENTITY_STATUS': 'Confirmed',
            'HTTP_X_USER_ID': user_id,
            'HTTP_X_USER_NAME': user_id,
            'HTTP_X_USER': user_id,
            'HTTP_X_USER_DOMAIN_ID': 'default',
            'HTTP_X_USER_DOMAIN_NAME': 'Default',
            'HTTP_X_PROJECT_ID': project,
            'HTTP_X_PROJECT_NAME': project,
            'HTTP_X_PROJECT_DOMAIN_ID': 'default',
            'HTTP_X_PROJECT_DOMAIN_NAME': 'Default',
            'HTTP_X_TENANT_ID': project,
            'HTTP_X_TENANT_NAME': project,
            'HTTP_X_TENANT': project,
            'HTTP_X_ROLES': ','.join(roles),
            'HTTP_X_ROLE': ','.join(roles),
        })
        if s_user_id is not None:
            environ.update({
                'HTTP_X_SERVICE_IDENTITY_STATUS': 'Confirmed',
                'HTTP_X_SERVICE_USER_ID': s_user_id,
                'HTTP_X_SERVICE_USER_NAME': s_user_id,
                'HTTP_X_SERVICE_USER_DOMAIN_ID': 'default',
                'HTTP_X_SERVICE_PROJECT_ID': s_project_id,
                'HTTP_X_SERVICE_PROJECT_NAME': s_project_id,
                'HTTP_X_SERVICE_PROJECT_DOMAIN_ID': 'default',
                'HTTP_X_SERVICE_ROLES': ','.join(s_roles),
            })
        return self.app(environ, start_response)

    @staticmethod
    def _unauthorized(environ, start_response, reason):
        body = json.dumps({'error': {
            'code': 401,
            'title': 'Unauthorized',
            'message': 'The request you have made requires authentication '
                       '(%s).' % reason,
        }}).encode('utf-8')
        start_response('401 Unauthorized', [
            ('Content-Type', 'application/json'),
            ('Content-Length', str(len(body))),
            ('WWW-Authenticate', 'Keystone uri="http://127.0.0.1/identity"'),
        ])
        return [body]
