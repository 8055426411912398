"""Who calls Cyborg: the request's user or Nova's service user.

Used by :mod:`nova_cyborg.clients.cyborg`. Cyborg 17 decides an ARQ's project,
and which ARQs a caller sees, from the caller's token:

* a call made for a user carries the user's token, plus a service token
  when ``[service_user] send_service_user_token`` is set (Cyborg requires
  one to bind, unbind or delete the ARQs of an instance);
* a context without a user token (a service's own admin context) calls as
  the ``[service_user]`` instead, if ``[nova_cyborg]
  service_user_without_user_token`` allows it;
* calls that must see, or set, the ARQs of any project call as the
  ``[service_user]``, which must have the ``admin`` role: Cyborg shows an
  admin every project's ARQs and lets it set an ARQ's project on bind.
"""

from oslo_log import log as logging

import nova.conf
from nova import service_auth

from nova_cyborg import exception
from nova_cyborg.i18n import _

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

_WARNED = False


def service_user():
    """The ``[service_user]`` auth plugin, None if it is not configured.

    Without it, the context's user calls instead, and sees only its own
    project's ARQs (logged once).
    """
    global _WARNED
    auth = service_auth.get_service_auth_plugin(
        nova.conf.service_token.SERVICE_USER_GROUP)
    if auth is None and not _WARNED:
        _WARNED = True
        LOG.warning('[service_user] is not configured: nova-cyborg calls '
                    'Cyborg as the request\'s user, who sees only the '
                    'accelerator requests of its own project')
    return auth


def as_service_user(context):
    """The auth of a call as the service user (with its service token if
    configured), None to call as the context's user."""
    user_auth = service_user()
    if user_auth is None:
        return None
    return service_auth.get_service_user_token_auth_plugin(
        context, user_auth=user_auth)


def stand_in(context, op):
    """The service user's auth plugin if the context has no user token.

    A context made by a service (``get_admin_context()``) has no token;
    Cyborg would answer it 401. Return None for a context with a token,
    whose own token is used.

    :raises: CyborgError if the context has no token and the service user
        may not or cannot stand in for it.
    """
    if getattr(context, 'auth_token', None):
        return None
    if not CONF.nova_cyborg.service_user_without_user_token:
        raise exception.CyborgError(op=op, msg=_(
            'the request context has no user token and [nova_cyborg] '
            'service_user_without_user_token is false'))
    auth = service_auth.get_service_auth_plugin(
        nova.conf.service_token.SERVICE_USER_GROUP)
    if auth is None:
        raise exception.CyborgError(op=op, msg=_(
            'the request context has no user token and the service user '
            'cannot stand in for it: set [service_user] auth_type and '
            'its credentials in nova.conf'))
    return auth


def require_service_token(op):
    """:raises: CyborgError if Cyborg would refuse ``op`` for want of a
        service token (see ``[nova_cyborg] require_service_token``)."""
    if (CONF.nova_cyborg.require_service_token and
            not CONF.service_user.send_service_user_token):
        raise exception.CyborgError(op=op, msg=_(
            'Cyborg requires a service token to %s accelerator requests '
            'of an instance; set [service_user] send_service_user_token '
            'and its credentials in nova.conf') % op)
