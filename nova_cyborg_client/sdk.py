"""openstacksdk helpers for nova-cyborg's accelerator server actions.

A patched Nova has two server actions outside its microversions,
``addAccelerator`` and ``removeAccelerator`` (doc/source/attach.rst).
openstacksdk has no extension point for a server action it does not know,
so these helpers post them through the compute proxy of an
:class:`openstack.connection.Connection`, and read the server's
accelerator requests (ARQs) from Cyborg's API (``GET
/v2/accelerator_requests?instance=<server uuid>``)::

    import openstack
    from nova_cyborg_client import sdk

    conn = openstack.connect(cloud='mycloud')
    sdk.add_accelerator(conn, 'my-server', 'fpga-profile', wait=True)
    for arq in sdk.list_accelerators(conn, 'my-server'):
        print(arq.uuid, arq.state, arq.hostname, arq.attach_handle_info)
    sdk.remove_accelerator(conn, 'my-server', 'fpga-profile', wait=True)

Errors are openstacksdk's: :class:`openstack.exceptions.HttpException`
subclasses carrying Nova's message (``BadRequestException``,
``NotFoundException``, ``ConflictException`` ...),
:class:`ActionFailed` when nova-compute ended an accepted action in error,
and :class:`openstack.exceptions.ResourceTimeout` when a wait runs out.
"""

import uuid as uuidlib

from openstack.accelerator.v2 import accelerator_request as _arq
from openstack.compute.v2 import server as _server
from openstack import exceptions
from openstack import resource
from openstack import utils

ADD = 'addAccelerator'
REMOVE = 'removeAccelerator'
#: The task states an accepted action sets until nova-compute is done.
TASK_STATES = {ADD: 'adding_accelerator', REMOVE: 'removing_accelerator'}
#: The instance action's event nova-compute records the outcome in.
EVENTS = {ADD: 'compute_add_accelerator', REMOVE: 'compute_remove_accelerator'}
#: Instance action events are shown to the server's owner from 2.51, their
#: details (admin only by default) from 2.84.
ACTION_MICROVERSION = '2.84'
#: An ARQ bound to its device.
BOUND = 'Bound'
#: Seconds a wait lasts at most, and between two looks.
DEFAULT_TIMEOUT = 300
DEFAULT_POLL = 2


class ActionFailed(exceptions.SDKException):
    """nova-compute ended an accepted action in error."""


class AcceleratorRequest(_arq.AcceleratorRequest):
    """A Cyborg ARQ, listed by server: Cyborg filters on ``instance``."""

    _query_mapping = resource.QueryParameters('instance', 'bind_state')


def find_server(conn, server):
    """The :class:`~openstack.compute.v2.server.Server` of a name or ID.

    :raises: NotFoundException, or DuplicateResource for a name that
        several servers have.
    """
    if isinstance(server, _server.Server):
        return server
    return conn.compute.find_server(server, ignore_missing=False)


def list_accelerators(conn, server):
    """The server's ARQs, its flavor's and those attached.

    :param server: a name, an ID or a Server.
    :returns: a list of :class:`AcceleratorRequest` (``uuid``, ``state``,
        ``device_profile_name``, ``device_profile_group_id``,
        ``hostname``, ``device_rp_uuid``, ``attach_handle_type``,
        ``attach_handle_info``).
    """
    server = find_server(conn, server)
    return list(AcceleratorRequest.list(conn.accelerator,
                                        instance=server.id))


def _is_uuid(value):
    try:
        return str(uuidlib.UUID(value)) == value.lower()
    except (TypeError, ValueError, AttributeError):
        return False


def profile_of(conn, server, device_profile_or_arq):
    """The device profile that ``removeAccelerator`` takes.

    Nova detaches by device profile. Given the UUID of one of the server's
    ARQs, this is the profile of that ARQ; anything else is taken as a
    profile name.
    """
    if _is_uuid(device_profile_or_arq):
        for arq in list_accelerators(conn, server):
            if arq.uuid == device_profile_or_arq.lower():
                return arq.device_profile_name
    return device_profile_or_arq


def _post_action(conn, server, action, device_profile):
    if not isinstance(device_profile, str) or not device_profile:
        raise exceptions.SDKException(
            'a device profile name is needed, got %r' % (device_profile,))
    response = conn.compute.post(
        '/servers/%s/action' % server.id,
        json={action: {'device_profile': device_profile}})
    # Nova's answer for an action it does not have.
    if (response.status_code == 400 and
            'There is no such action: %s' % action in response.text):
        exceptions.raise_from_response(
            response, error_message='this cloud\'s Nova does not have '
            'nova-cyborg\'s %s action (it is not patched by nova-cyborg)'
            % action)
    exceptions.raise_from_response(response)
    return (response.headers.get('x-openstack-request-id') or
            response.headers.get('x-compute-request-id'))


def add_accelerator(conn, server, device_profile, wait=False,
                    timeout=DEFAULT_TIMEOUT, poll=DEFAULT_POLL):
    """Attach the accelerators of a device profile to a server.

    :param server: a name, an ID or a Server.
    :param wait: wait until nova-compute is done and the profile's ARQs
        are ``Bound``.
    :returns: the request ID of the action (its instance action's ID);
        with ``wait``, the profile's ARQs.
    """
    server = find_server(conn, server)
    request_id = _post_action(conn, server, ADD, device_profile)
    if not wait:
        return request_id
    return wait_for_action(conn, server, ADD, device_profile, request_id,
                           timeout=timeout, poll=poll)


def remove_accelerator(conn, server, device_profile_or_arq, wait=False,
                       timeout=DEFAULT_TIMEOUT, poll=DEFAULT_POLL):
    """Detach the accelerators of a device profile from a server.

    :param device_profile_or_arq: the device profile attached, or the UUID
        of one of its ARQs: every ARQ of that profile is detached.
    :param wait: wait until nova-compute is done and the profile's ARQs
        are gone.
    :returns: the request ID of the action; with ``wait``, ``[]``.
    """
    server = find_server(conn, server)
    device_profile = profile_of(conn, server, device_profile_or_arq)
    request_id = _post_action(conn, server, REMOVE, device_profile)
    if not wait:
        return request_id
    return wait_for_action(conn, server, REMOVE, device_profile, request_id,
                           timeout=timeout, poll=poll)


def _event(conn, server, action, request_id):
    """The action's event as the caller may see it, None if not there."""
    if not request_id:
        return None
    response = conn.compute.get(
        '/servers/%s/os-instance-actions/%s' % (server.id, request_id),
        microversion=ACTION_MICROVERSION)
    if response.status_code == 404:
        return None
    exceptions.raise_from_response(response)
    for event in response.json()['instanceAction'].get('events') or ():
        if event.get('event') == EVENTS[action]:
            return event
    return None


def _done(conn, server, action, device_profile, request_id):
    """The profile's ARQs once the action is over, None until then."""
    current = conn.compute.get_server(server.id)
    if current.task_state == TASK_STATES[action]:
        return None
    event = _event(conn, server, action, request_id)
    if request_id and (event is None or not event.get('result')):
        return None
    if event and event['result'] != 'Success':
        raise ActionFailed(
            '%s of device profile %s on server %s ended in %s%s (see '
            '"openstack server event show %s %s")' % (
                action, device_profile, server.id, event['result'],
                ': %s' % event['details'] if event.get('details') else '',
                server.id, request_id))
    mine = [arq for arq in list_accelerators(conn, server)
            if arq.device_profile_name == device_profile]
    if action == ADD:
        if mine and all(arq.state == BOUND for arq in mine):
            return mine
        return None
    return None if mine else []


def wait_for_action(conn, server, action, device_profile, request_id=None,
                    timeout=DEFAULT_TIMEOUT, poll=DEFAULT_POLL):
    """Wait until nova-compute is done with an accepted action.

    Done is: the server's task state no longer the action's, the action's
    event (when its request ID is known) ended, and the profile's ARQs
    ``Bound`` (add) or gone (remove).

    :returns: the profile's ARQs (add) or ``[]`` (remove).
    :raises: ActionFailed if the event ended in error; ResourceTimeout
        after ``timeout`` seconds.
    """
    server = find_server(conn, server)
    for _ in utils.iterate_timeout(
            timeout, 'Timeout waiting for %s of device profile %s on server '
            '%s' % (action, device_profile, server.id), wait=poll):
        result = _done(conn, server, action, device_profile, request_id)
        if result is not None:
            return result
