"""The addAccelerator and removeAccelerator server actions.

``POST /v2.1/servers/{server_id}/action`` with::

    {"addAccelerator": {"device_profile": "<name>"}}
    {"removeAccelerator": {"device_profile": "<name>"}}

Both answer ``202 Accepted`` with no body once the request is checked; the
work happens in nova-compute and is recorded as the instance action
``addAccelerator`` or ``removeAccelerator``, whose event
(``compute_add_accelerator``, ``compute_remove_accelerator``) ends in
``Success`` or ``Error`` with the reason. Errors answered at once:

* 400: malformed body; unknown or malformed device profile; a profile
  that would take the server over ``[nova_cyborg]
  max_accelerators_per_instance`` (its flavor's and attached accelerators
  count); a profile name too long to be recorded (see
  :func:`check_recordable`).
* 403: policy (``nova_cyborg:servers:accelerators:add`` and
  ``:remove``, project member or admin by default); a device profile that
  no flavor the server's project can use carries, for a caller without
  ``nova_cyborg:servers:accelerators:add:any_profile`` (admin by
  default; see :func:`check_offered`). The rules' old names
  (``os_compute_api:servers:accelerators:*``) are deprecated aliases
  (:mod:`nova_cyborg.policies`).
* 404: no such server.
* 409: server locked, not ACTIVE or SHUTOFF, or busy with another task
  (an attach or detach under way included); the server's nova-compute
  does not serve these actions (not patched by nova-cyborg, or older
  than the action needs or ``[upgrade_levels] nova_cyborg`` allows, see
  :mod:`nova_cyborg.clients.compute_rpc`) or does not answer; a running server
  that already has accelerators (stop it first); a profile attached already
  (add) or not attached (remove); removing a mediated device from a running
  server (stop it first).

An accepted action sets the server's task state (``adding_accelerator``,
``removing_accelerator``, see :mod:`nova_cyborg.clients.compute_rpc`) until
nova-compute is done, so no other action can overtake it.

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
from nova.compute import vm_states
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from webob import exc

from nova_cyborg.clients import compute_rpc as rpc
from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import actions
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.bookkeeping import arq_owner
from nova_cyborg.model import capability
from nova_cyborg.model import request_groups
from nova_cyborg import policies
from nova_cyborg.steps import quota

ADD = 'addAccelerator'
REMOVE = 'removeAccelerator'
ADD_METHOD = actions.ADD_METHOD
REMOVE_METHOD = actions.REMOVE_METHOD
#: System metadata values are String(255); what attach records must fit.
SYSMETA_MAX = 255
#: "<arq uuid> <profile>" and "<profile> <rp uuid> <rc> <amount>".
_UUID_LEN = 36


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


def check_recordable(dp_name, groups):
    """Refuse a profile whose bookkeeping would not fit system metadata.

    nova-compute records each attached ARQ as "<uuid> <profile>" and each
    allocation added as "<profile> <rp uuid> <resource class> <amount>",
    in values of at most 255 characters.

    :raises: DeviceProfileError (HTTP 400) naming the limit.
    """
    longest = _UUID_LEN + 1 + len(dp_name)
    for rg in groups:
        for rc, amount in rg.resources.items():
            longest = max(longest, len(dp_name) + 1 + _UUID_LEN + 1 +
                          len(rc) + 1 + len(str(amount)))
    if longest > SYSMETA_MAX:
        raise exception.DeviceProfileError(name=dp_name, msg=_(
            'the server cannot record this profile: its name and resource '
            'classes need %(need)d characters, at most %(max)d fit; use a '
            'shorter profile name') % {'need': longest, 'max': SYSMETA_MAX})


def _server_count(context, instance):
    """Accelerators the server has: its flavor's profile and attached."""
    total = 0
    dp_name = instance.flavor.extra_specs.get(bookkeeping.DP_EXTRA_SPEC)
    if dp_name:
        total += request_groups.count(
            nc_client.get_device_profile_request_groups(context, dp_name))
    for entry in bookkeeping.entries(instance, actions.ALLOC_PREFIX):
        total += int(entry.rsplit(' ', 1)[1])
    return total


def offered(project_id, dp_name):
    """Whether a flavor ``project_id`` can boot with names ``dp_name``:
    a public flavor or a private one the project has access to, not
    disabled (Nova's own rule for which flavors a project may use)."""
    lookup = nova_context.RequestContext(project_id=project_id,
                                         overwrite=False)
    flavors = objects.FlavorList.get_all(
        lookup, inactive=False,
        filters={'is_public': True, 'disabled': False})
    return any(bookkeeping.flavor_profile(f) == dp_name for f in flavors)


def check_offered(context, instance, dp_name):
    """Refuse a profile the server's project is not offered.

    Operators decide which projects get accelerators with flavors
    (private flavors and their access lists); addAccelerator must not
    bypass that. A caller allowed ``add:any_profile`` (admin by default)
    may add any profile.

    :raises: webob HTTPForbidden
    """
    if policies.authorize(context, policies.ADD_ANY_PROFILE,
                          {'user_id': instance.user_id,
                           'project_id': instance.project_id}, fatal=False):
        return
    if not offered(instance.project_id, dp_name):
        raise exc.HTTPForbidden(explanation=_(
            'No flavor that project %(project)s can use offers device '
            'profile %(profile)s; ask an operator to attach it or to give '
            'the project a flavor with it.') % {
                'project': instance.project_id, 'profile': dp_name})


def _start(context, instance, method, action, dp_name):
    """Set the task state, record the action, hand over to the compute."""
    # No call to the compute: what it serves is in Placement.
    capabilities = capability.check_attach(context, instance)
    cap = rpc.check_compute(context, instance, method, capabilities)
    instance.task_state = actions.TASK_STATES[method]
    instance.save(expected_task_state=[None])
    objects.InstanceAction.action_start(context, instance.uuid, action,
                                        want_result=False)
    rpc.cast(context, instance, method, dp_name, cap)


class AcceleratorAPI(object):
    """Checks done in nova-api before nova-compute does the work."""

    @compute.check_instance_lock
    @compute.check_instance_state(vm_state=[vm_states.ACTIVE,
                                            vm_states.STOPPED])
    def add(self, context, instance, dp_name):
        if dp_name in bookkeeping.attached_profiles(instance):
            raise exception.OperationRefused(reason=_(
                'The accelerators of device profile %s are attached '
                'already.') % dp_name)
        # Raises DeviceProfileError for an unknown or malformed profile.
        groups = nc_client.get_device_profile_request_groups(
            context, dp_name)
        check_recordable(dp_name, groups)
        request_groups.check_limit(dp_name, request_groups.count(groups),
                                   _server_count(context, instance))
        check_offered(context, instance, dp_name)
        # Under unified limits, as a boot with the profile would be.
        quota.check_attach(context, instance, groups)
        if instance.vm_state == vm_states.ACTIVE:
            if nc_client.get_client(context).get_arqs_for_instance(
                    arq_owner(instance)):
                raise exception.OperationRefused(reason=_(
                    'Cyborg binds no accelerator to a server that already '
                    'has some while it runs: stop the server first.'))
        _start(context, instance, ADD_METHOD, ADD, dp_name)

    @compute.check_instance_lock
    @compute.check_instance_state(vm_state=[vm_states.ACTIVE,
                                            vm_states.STOPPED])
    def remove(self, context, instance, dp_name):
        if dp_name not in bookkeeping.attached_profiles(instance):
            raise exception.OperationRefused(reason=_(
                'No accelerator of device profile %s is attached to the '
                'server.') % dp_name)
        if instance.vm_state == vm_states.ACTIVE:
            mine = actions.attached_arqs(instance, dp_name)
            arqs = [arq for arq in nc_client.get_client(
                context).get_arqs_for_instance(arq_owner(instance))
                if arq.get('uuid') in mine]
            actions.refuse_unpluggable(arqs)
        _start(context, instance, REMOVE_METHOD, REMOVE, dp_name)


@validation.validated
class AcceleratorActionsController(wsgi.Controller):

    def __init__(self):
        super().__init__()
        self.compute_api = compute.API()
        self.accelerator_api = AcceleratorAPI()

    def _act(self, req, server_id, body, action, rule):
        context = req.environ['nova.context']
        server = common.get_instance(self.compute_api, context, server_id)
        policies.authorize(context, rule, {'user_id': server.user_id,
                                           'project_id': server.project_id})
        dp_name = body[action]['device_profile']
        method = (self.accelerator_api.add if action == ADD
                  else self.accelerator_api.remove)
        try:
            method(context, server, dp_name)
        except nova_exception.InstanceIsLocked as e:
            raise exc.HTTPConflict(explanation=e.format_message())
        except nova_exception.OverQuota as e:
            raise exc.HTTPForbidden(explanation=e.format_message())
        except nova_exception.InstanceInvalidState as state_error:
            common.raise_http_conflict_for_instance_invalid_state(
                state_error, action, server_id)
        except nova_exception.UnexpectedTaskStateError as e:
            # Another action started between the check and the save.
            raise exc.HTTPConflict(explanation=e.format_message())
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
