"""The addAccelerator and removeAccelerator server actions.

``POST /v2.1/servers/{server_id}/action`` with::

    {"addAccelerator": {"device_profile": "<name>"}}
    {"removeAccelerator": {"device_profile": "<name>"}}

Both answer ``202 Accepted`` with no body once the request is checked; the
work happens in nova-compute and is recorded as the instance action
``addAccelerator`` or ``removeAccelerator``, whose event
(``compute_add_accelerator``, ``compute_remove_accelerator``) ends in
``Success`` or ``Error`` with the reason. Errors answered at once:

* 400: malformed body; unknown or malformed device profile.
* 403: policy (``os_compute_api:servers:accelerators:add`` and
  ``:remove``, project member or admin by default).
* 404: no such server.
* 409: server locked, not ACTIVE or SHUTOFF, or busy with another task; a
  running server that already has accelerators (stop it first); a profile
  attached already (add) or not attached (remove).

The actions exist only in a Nova patched by nova-cyborg and stand outside
Nova's microversions (the patch adds none, so nothing changes for clients
that do not use them). A client discovers them by posting
``removeAccelerator`` for a profile that is not attached: a patched Nova
answers 409 naming the profile, an unpatched one 400 (no such action).
"""

from nova.api.openstack import common
from nova.api.openstack import wsgi
from nova.api import validation
from nova.compute import api as compute
from nova.compute import rpcapi as compute_rpcapi
from nova.compute import vm_states
from nova import exception as nova_exception
from nova import objects
from webob import exc

from nova_cyborg import client as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg import move
from nova_cyborg import policies
from nova_cyborg import request_groups

ADD = 'addAccelerator'
REMOVE = 'removeAccelerator'
#: The compute manager methods, routed to nova_cyborg.attach.
ADD_METHOD = 'add_accelerator'
REMOVE_METHOD = 'remove_accelerator'


def _schema(action):
    return {
        'type': 'object',
        'properties': {
            action: {
                'type': 'object',
                'properties': {
                    'device_profile': {
                        'type': 'string', 'minLength': 1, 'maxLength': 255,
                        'pattern': '^[A-Za-z0-9_.:-]+$'},
                },
                'required': ['device_profile'],
                'additionalProperties': False,
            },
        },
        'required': [action],
        'additionalProperties': False,
    }


NO_BODY = {'type': 'null'}


def _cast(context, instance, method, dp_name):
    rpcapi = compute_rpcapi.ComputeAPI()
    cctxt = rpcapi.router.client(context).prepare(
        server=instance.host, version='6.0')
    cctxt.cast(context, method, instance=instance, device_profile=dp_name)


class AcceleratorAPI(object):
    """Checks done in nova-api before nova-compute does the work."""

    @compute.check_instance_lock
    @compute.check_instance_state(vm_state=[vm_states.ACTIVE,
                                            vm_states.STOPPED])
    def add(self, context, instance, dp_name):
        if dp_name in move.attached_profiles(instance):
            raise exception.OperationRefused(reason=_(
                'The accelerators of device profile %s are attached '
                'already.') % dp_name)
        # Raises DeviceProfileError for an unknown or malformed profile.
        request_groups.get_device_profile_request_groups(context, dp_name)
        if instance.vm_state == vm_states.ACTIVE:
            if nc_client.get_client(context).get_arqs_for_instance(
                    instance.uuid):
                raise exception.OperationRefused(reason=_(
                    'Cyborg binds no accelerator to a server that already '
                    'has some while it runs: stop the server first.'))
        objects.InstanceAction.action_start(context, instance.uuid, ADD,
                                            want_result=False)
        _cast(context, instance, ADD_METHOD, dp_name)

    @compute.check_instance_lock
    @compute.check_instance_state(vm_state=[vm_states.ACTIVE,
                                            vm_states.STOPPED])
    def remove(self, context, instance, dp_name):
        if dp_name not in move.attached_profiles(instance):
            raise exception.OperationRefused(reason=_(
                'No accelerator of device profile %s is attached to the '
                'server.') % dp_name)
        objects.InstanceAction.action_start(context, instance.uuid, REMOVE,
                                            want_result=False)
        _cast(context, instance, REMOVE_METHOD, dp_name)


@validation.validated
class AcceleratorActionsController(wsgi.Controller):

    def __init__(self):
        super().__init__()
        self.compute_api = compute.API()
        self.accelerator_api = AcceleratorAPI()

    def _act(self, req, server_id, body, action, rule):
        context = req.environ['nova.context']
        server = common.get_instance(self.compute_api, context, server_id)
        context.can(rule, target={'user_id': server.user_id,
                                  'project_id': server.project_id})
        dp_name = body[action]['device_profile']
        method = (self.accelerator_api.add if action == ADD
                  else self.accelerator_api.remove)
        try:
            method(context, server, dp_name)
        except nova_exception.InstanceIsLocked as e:
            raise exc.HTTPConflict(explanation=e.format_message())
        except nova_exception.InstanceInvalidState as state_error:
            common.raise_http_conflict_for_instance_invalid_state(
                state_error, action, server_id)
        except exception.OperationRefused as e:
            raise exc.HTTPConflict(explanation=e.format_message())
        except nova_exception.DeviceProfileError as e:
            raise exc.HTTPBadRequest(explanation=e.format_message())
        except exception.CyborgError as e:
            raise exc.HTTPServiceUnavailable(explanation=e.format_message())

    @wsgi.response(202)
    @wsgi.expected_errors((400, 403, 404, 409, 503))
    @wsgi.action(ADD)
    @validation.schema(_schema(ADD))
    @validation.response_body_schema(NO_BODY)
    def _add_accelerator(self, req, id, body):
        """Attach the accelerators of a device profile to a server."""
        self._act(req, id, body, ADD, policies.ADD)

    @wsgi.response(202)
    @wsgi.expected_errors((400, 403, 404, 409, 503))
    @wsgi.action(REMOVE)
    @validation.schema(_schema(REMOVE))
    @validation.response_body_schema(NO_BODY)
    def _remove_accelerator(self, req, id, body):
        """Detach the accelerators of a device profile from a server."""
        self._act(req, id, body, REMOVE, policies.REMOVE)
