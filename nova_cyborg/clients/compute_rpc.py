"""The RPC that hands an accelerator action to the server's compute.

The ``addAccelerator`` and ``removeAccelerator`` actions' names and task
states are :mod:`nova_cyborg.model.actions`.

RPC: the actions do not use Nova's compute RPC API (its version is Nova's
to bump). nova-compute serves them on an endpoint of its own
(:class:`nova_cyborg.flows.attach.endpoint.AcceleratorEndpoint`), in namespace
``nova_cyborg`` (versions: :data:`VERSIONS`), on the compute topic (patch
0003 adds it to the manager's ``additional_endpoints``). The client goes
through Nova's ``rpc.ClientRouter``, as ``nova.compute.rpcapi.ComputeAPI``
does: once nova-api has looked the server up, its context targets the
server's cell (``context.mq_connection``), and the messages go to that
cell's message queue, where the server's compute listens.

nova-api makes no blocking call to the compute. Before it sets the task
state it reads, from Placement, the capability traits of the server's
compute node (:func:`nova_cyborg.model.capability.check_attach`): a compute not
patched by nova-cyborg reports none and the action is refused with 409
naming the host, instead of a 202 whose cast the compute would drop with
an error in its log. The capability versions the compute reports give the
newest version of this namespace it serves (:data:`SERVED_WITH`,
:func:`served_by`), which caps what is sent to it (:func:`version_cap`);
``[upgrade_levels] nova_cyborg`` pins the cap for every compute during a
rolling upgrade, as Nova's own ``[upgrade_levels]`` options do: a method
is sent only if ``can_send_version`` says the compute serves it, else the
action is refused with 409 before the task state is set. Nova's minimum
nova-compute service version cannot serve as the cap: a patched and an
unpatched compute report the same one. A compute whose service is down
(Nova's servicegroup API, a database read) is refused with 409 too
(:func:`check_compute`). The scheduler and nova-api check the same traits
for moves of servers with accelerators (:mod:`nova_cyborg.model.capability`).
The ``version`` method stays served for a nova-api of an older
nova-cyborg, which asked it before every action.

While a task state is set, Nova's API refuses every other action on the
server (409, "in task_state adding_accelerator"), so a start, stop,
second attach or detach cannot overtake the one under way. nova-compute
clears it when it is done, whatever the outcome, also when its handler
fails before or after the work (recording the action's event, saving the
cleared state); one nothing clears (the cast lost, the conductor away too
long) is cleared by nova-compute's periodic task
(:mod:`nova_cyborg.flows.attach.stuck_actions`).

nova-compute's side, the endpoint and its handlers, is
:mod:`nova_cyborg.flows.attach.endpoint`.

The two values are members of Nova's ``InstanceTaskState`` enum through
patch 0025, so a deployment that sends versioned ``instance.update``
notifications on task state changes (``[notifications]
notify_on_state_change = vm_and_task_state``) gets them for these
transitions too.
"""

import threading

from nova.compute import rpcapi as compute_rpcapi
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova.objects import base as objects_base
from nova import rpc as nova_rpc
from nova import servicegroup
from oslo_log import log as logging
import oslo_messaging as messaging

import nova.conf

from nova_cyborg import conf as nc_conf  # noqa: F401 (registers options)
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import actions


CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_cyborg'
#: Every version of the namespace, oldest first, with what it adds. A
#: compute serves every version up to its own.
VERSIONS = (
    ('1.0', 'version, add_accelerator, remove_accelerator'),
)
#: The version this nova-cyborg serves and sends at most.
VERSION = VERSIONS[-1][0]
#: What ``version`` needs: every compute that serves the namespace answers.
BASE_VERSION = VERSIONS[0][0]
#: The version each method cast to nova-compute needs.
METHOD_VERSIONS = {actions.ADD_METHOD: '1.0', actions.REMOVE_METHOD: '1.0'}
#: For each version of the namespace, the capability version
#: (:data:`nova_cyborg.model.capability.VERSIONS`) a compute that serves it
#: reports as a trait of its compute node: a new version of the namespace
#: comes with a new capability version.
SERVED_WITH = {'1.0': '1.0'}

#: nova.rpc.ClientRouter of the namespace (:func:`router`).
_ROUTER = None
_ROUTER_LOCK = threading.Lock()


def reset_globals():
    """Forget the router (tests, and a change of ``[upgrade_levels]``)."""
    global _ROUTER
    _ROUTER = None


def pinned():
    """The version ``[upgrade_levels] nova_cyborg`` pins, or None (auto).
    """
    level = CONF.upgrade_levels.nova_cyborg
    return None if level in (None, 'auto') else level


def router():
    """Nova's ``rpc.ClientRouter`` for the namespace, made once.

    Its client honours the context's message queue (``mq_connection``,
    set when nova-api targets the server's cell), else uses the global
    transport; its version cap is :func:`pinned`.
    """
    global _ROUTER
    with _ROUTER_LOCK:
        if _ROUTER is None:
            target = messaging.Target(topic=compute_rpcapi.RPC_TOPIC,
                                      namespace=NAMESPACE,
                                      version=BASE_VERSION)
            _ROUTER = nova_rpc.ClientRouter(nova_rpc.get_client(
                target, version_cap=pinned(),
                serializer=objects_base.NovaObjectSerializer()))
        return _ROUTER


def _client(context, host, **kwargs):
    return router().client(context).prepare(server=host, **kwargs)


def _parse(version):
    return tuple(int(part) for part in version.split('.'))


def serves(cap, version):
    """Whether a compute capped at ``cap`` serves ``version`` (same major,
    as oslo.messaging's ``can_send_version``)."""
    cap, version = _parse(cap), _parse(version)
    return cap[0] == version[0] and cap >= version


def _older(a, b):
    return min(a, b, key=_parse)


def version_cap(served):
    """What nova-api may send a compute that serves version ``served``:
    the oldest of ``served``, :data:`VERSION` and :func:`pinned`."""
    cap = _older(served, VERSION)
    pin = pinned()
    return _older(cap, pin) if pin else cap


def served_by(capabilities):
    """The newest version of the namespace served by a compute that
    reports capability versions ``capabilities`` (None: none)."""
    served = [version for version, _what in VERSIONS
              if SERVED_WITH[version] in capabilities]
    return served[-1] if served else None


def _service_is_up(context, host):
    try:
        service = objects.Service.get_by_compute_host(context, host)
    except nova_exception.ComputeHostNotFound:
        return False
    return servicegroup.API().service_is_up(service)


def check_compute(context, instance, method, capabilities):
    """Refuse unless the server's nova-compute serves ``method`` now.

    No RPC: what the compute serves comes from the capability versions it
    reports in Placement, whether it is up from Nova's servicegroup API.

    :param context: targeted at the server's cell.
    :param method: :data:`ADD_METHOD` or :data:`REMOVE_METHOD`.
    :param capabilities: the capability versions the server's compute node
        reports (:func:`nova_cyborg.model.capability.check_attach`).
    :returns: the version cap to cast ``method`` with (:func:`cast`).
    :raises: OperationRefused (409) naming the host and why.
    """
    host = instance.host
    served = served_by(capabilities)
    if served is None:
        raise exception.OperationRefused(reason=_(
            'nova-compute on host %(host)s cannot attach or detach '
            'accelerators: it does not serve RPC namespace %(ns)s %(ver)s '
            '(it is not patched by nova-cyborg, or runs an older '
            'nova-cyborg). Upgrade it first.') % {
                'host': host, 'ns': NAMESPACE, 'ver': BASE_VERSION})
    if not _service_is_up(context, host):
        raise exception.OperationRefused(reason=_(
            'nova-compute on host %s is down: try again once it is up.') %
            host)
    cap = version_cap(served)
    needed = METHOD_VERSIONS[method]
    if not serves(cap, needed):
        raise exception.OperationRefused(reason=_(
            'nova-compute on host %(host)s cannot run %(method)s: it needs '
            'RPC namespace %(ns)s %(needed)s; the compute serves %(served)s '
            'and [upgrade_levels] nova_cyborg allows %(pin)s. Upgrade the '
            'compute first.') % {
                'host': host, 'method': method, 'ns': NAMESPACE,
                'needed': needed, 'served': served,
                'pin': pinned() or 'auto'})
    return cap


def cast(context, instance, method, dp_name, cap):
    """Have the server's compute run ``method`` for profile ``dp_name``.

    :param cap: what :func:`check_compute` answered for the compute.
    """
    _client(context, instance.host, version=METHOD_VERSIONS[method],
            version_cap=cap).cast(context, method, instance=instance,
                                  device_profile=dp_name)


# Nova's own compute RPC: the conductor's word on a bind.

_compute_api = None


def _nova_compute_api():
    """One nova.compute.rpcapi.ComputeAPI for this process (creating one
    reads the minimum compute service version)."""
    global _compute_api
    with _ROUTER_LOCK:
        if _compute_api is None:
            _compute_api = compute_rpcapi.ComputeAPI()
        return _compute_api


def send_bind_outcome(context, instance, nodename, event):
    """Cast ``event`` (nova_cyborg.model.bind_outcome.event) to the
    compute of node ``nodename``, where the instance is being built,
    through Nova's ``external_instance_event``, on the message queue of
    the instance's cell.
    """
    mapping = objects.InstanceMapping.get_by_instance_uuid(
        context, instance.uuid)
    with nova_context.target_cell(context, mapping.cell_mapping) as cctxt:
        host = objects.ComputeNode.get_by_nodename(cctxt, nodename).host
        _nova_compute_api().external_instance_event(
            cctxt, [instance], [event], host=host)
