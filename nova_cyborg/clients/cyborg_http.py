"""Calls to Cyborg's API: the session, who calls, retries and errors.

:class:`CyborgHTTPClient` is the base of
nova_cyborg.clients.cyborg.CyborgClient.

The endpoint, timeout and retries come from Nova's ``[cyborg]`` group
(keystoneauth adapter and session options). Retries: reads (GET) and
deletions (DELETE) are retried on a connection failure or timeout up to
``connect_retries`` times and on HTTP 429/503 (``retriable_status_codes``)
up to ``status_code_retries`` times, :data:`DEFAULT_RETRIES` times each if
unset (long enough to ride out a restart of Cyborg's API); creating (POST)
and binding or unbinding (PATCH) are never retried,
whatever those options say, because keystoneauth cannot tell a request
Cyborg never received from one whose answer was lost: a create sent again
makes duplicate ARQs, a bind sent again meets ARQs Cyborg is already
binding.
"""

import threading

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading

import nova.conf
from nova import service_auth
from nova import utils as nova_utils

from nova_cyborg.clients import cyborg_auth as client_auth
from nova_cyborg import conf as nc_conf  # noqa: F401 (registers options)
from nova_cyborg import exception
from nova_cyborg.i18n import _

CONF = nova.conf.CONF

#: HTTP methods whose calls are retried: repeating one has the effect of
#: one call. Reads; and deletions, which Cyborg makes idempotent by
#: instance, and this client by UUID (an ARQ already gone counts as
#: deleted).
RETRIED_METHODS = frozenset(('get', 'delete'))

#: Retries of a call of RETRIED_METHODS when the ``[cyborg]`` option is
#: unset. keystoneauth waits 0.5 s before the first retry and twice as long
#: before each next one (unless ``connect_retry_delay`` or
#: ``status_code_retry_delay`` is set), so 6 retries keep trying for about
#: 30 s: a restart of Cyborg's API (connections refused, or 503 from a
#: proxy, for several seconds) no longer fails the boots, moves and deletes
#: that read or delete ARQs meanwhile. 3, as Nova's own ``[cinder]`` and
#: ``[neutron]`` ``http_retries``, gave up after 3.5 s.
DEFAULT_RETRIES = 6

_SESSION = None
_SESSION_LOCK = threading.Lock()


def _get_session():
    """Return the keystoneauth session shared by all clients.

    The session holds the connection pool; the auth plugin is per request
    context and is given to each adapter instead.
    """
    global _SESSION
    with _SESSION_LOCK:
        if _SESSION is None:
            _SESSION = ks_loading.load_session_from_conf_options(
                CONF, nova.conf.cyborg.CYBORG_GROUP)
        return _SESSION


def _retries(method):
    """keystoneauth's retry arguments for one call with ``method``.

    Per request, so they override the adapter's, which applies the
    ``[cyborg]`` options to every method.
    """
    if method not in RETRIED_METHODS:
        return {'connect_retries': 0, 'status_code_retries': 0}
    retries = {}
    for option in ('connect_retries', 'status_code_retries'):
        value = getattr(CONF.cyborg, option)
        retries[option] = DEFAULT_RETRIES if value is None else value
    return retries


def _error_text(resp):
    """Return Cyborg's error message from a response, bounded in size."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:500]
    if isinstance(body, dict):
        for key in ('error_message', 'faultstring', 'message', 'title'):
            if key in body:
                return str(body[key])[:500]
    return str(body)[:500]


class CyborgHTTPClient(object):
    """Calls Cyborg's v2 API for one request context."""

    def __init__(self, context, project_id=None):
        self._context = context
        self._project_id = project_id
        self._adapter = None

    def _get_adapter(self, op):
        # Built lazily: creating a client must not contact Cyborg, so
        # instances without accelerators never need Cyborg to be reachable.
        if self._adapter is None:
            auth = service_auth.get_service_user_token_auth_plugin(
                self._context, user_auth=client_auth.stand_in(
                    self._context, op))
            self._adapter = nova_utils.get_ksa_adapter(
                'accelerator', ksa_auth=auth, ksa_session=_get_session())
        return self._adapter

    def _call(self, op, method, url, expected, as_service=False, **kwargs):
        """Call Cyborg and return the response if its status is expected.

        Retried only if ``method`` is in RETRIED_METHODS (see
        :func:`_retries`). As the service user if ``as_service``.

        :raises: CyborgError naming ``op``, on a connection failure, a
            timeout or an unexpected status.
        """
        kwargs.update(_retries(method))
        call = '%s %s' % (method.upper(), url)
        try:
            adapter = self._get_adapter(op)
            auth = (client_auth.as_service_user(self._context)
                    if as_service else None)
            if auth is not None:
                kwargs['auth'] = auth
            resp = getattr(adapter, method)(url, **kwargs)
        except ks_exc.ConnectTimeout as e:
            # Connecting or reading took longer than [cyborg] timeout.
            raise exception.CyborgError(op=op, msg=_(
                'Cyborg did not answer %(call)s in time: %(error)s') % {
                    'call': call, 'error': e})
        except ks_exc.ClientException as e:
            raise exception.CyborgError(op=op, msg=_(
                'could not reach Cyborg for %(call)s: %(error)s') % {
                    'call': call, 'error': e})
        if resp.status_code not in expected:
            msg = _('Cyborg answered HTTP %(status)s to %(call)s: '
                    '%(error)s') % {'status': resp.status_code, 'call': call,
                                    'error': _error_text(resp)}
            raise exception.CyborgError(op=op, status=resp.status_code,
                                        msg=msg)
        return resp

    @staticmethod
    def _json_list(op, resp, key):
        try:
            value = resp.json().get(key)
        except (ValueError, AttributeError):
            value = None
        if not isinstance(value, list):
            raise exception.CyborgError(op=op, msg=_(
                'Cyborg sent no "%s" list in its answer') % key)
        return value
