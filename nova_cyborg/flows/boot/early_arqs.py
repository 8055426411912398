"""ARQs created while the scheduler runs.

Creating an ARQ needs only the flavor's device profile, not a host, so
``ComputeTaskManager.schedule_and_build_instances()`` starts creating the
ARQs of each new server whose flavor names a device profile before it asks
the scheduler for hosts (:func:`start`), in Nova's default thread pool
(:func:`nova_cyborg.compat.spawn`: native threads, or green threads when
Nova runs with eventlet). ``nova_cyborg.flows.boot.conductor`` takes them
(:func:`take`) once the host is known, and binds them; the creation's
failure is raised there, and handled as a failed create always was.

Once the scheduler chose the host and the server's provider mapping is
in its request spec, the bind starts too (:func:`start_binding`), also in
a thread, on copies of the server, its request spec and requested
networks taken before it starts (the conductor's thread goes on changing
them: ``obj_target_cell`` swaps the server's context, notifications
lazy-load its fields), and saving nothing (what the server must remember
is recorded by the conductor's thread, in the server's cell): Cyborg
binds while the conductor records the server (its
action, block device mappings, tags, cell mapping), and the conductor
joins the bind (:func:`join_binding`) before it casts the build, so a
failed bind fails the build in the conductor, as before, unless the build
is cast first (below). Cyborg's
bind event may reach nova-api before the server is mapped to its cell:
nova-api fails it (HTTP 500) and Cyborg answers the bind with 400, yet the
ARQs are Bound; the client reads them back and goes on
(``Client.bind_arqs``), and nova-compute reads the ARQs once it waits for
their events, and finds them Bound (nova_cyborg.steps.bound_arqs).

Cast first: when the chosen compute serves capability 1.2
(:func:`nova_cyborg.model.capability.serves`) and the server has no port
with a device profile (those ports' ARQs are created in the bind, and
their UUIDs go with the build), :func:`join_binding` waits only for the
ARQs created while the scheduler ran, marks the server
(:func:`nova_cyborg.model.bind_outcome.mark`) and returns their UUIDs:
the build is cast while Cyborg binds. When Cyborg answers, the bind's
thread sends the compute the conductor's word
(:func:`nova_cyborg.model.bind_outcome.event`, through
:func:`nova_cyborg.clients.compute_rpc.send_bind_outcome`): completed, or
failed with the reason once it deleted the ARQs; the compute waits for it
before it uses the ARQs and fails the build without a reschedule, as the
conductor did. A bind that ended before the conductor got to join it is
joined as before, and so is every bind where the compute cannot be told.

ARQs that nobody took (no host found, the server deleted during
scheduling, any other failure of the build before its bind) are deleted
(:func:`discard`), before the server is put in ERROR when the scheduler
found no host. A conductor that stops while the scheduler runs discards
nothing; Cyborg's ARQs carry no trace of the server until they are bound,
so the worker records their UUIDs in the server's build request, on a copy
it reads itself from the API database (:func:`_record`): deleting the
server, which deletes its build request, deletes them too
(nova_cyborg.flows.cleanup.delete.delete_early_arqs). Servers without a device
profile start nothing and call nothing. The ARQs of ports with a device
profile are created at bind time, as before.
"""

import threading

from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

from nova_cyborg.clients import allocations
from nova_cyborg.clients import compute_rpc
from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import compat
from nova_cyborg import exception
from nova_cyborg.model import bind_outcome
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import capability

LOG = logging.getLogger(__name__)

DP_EXTRA_SPEC = 'accel:device_profile'

#: instance UUID -> Future of the created ARQs (list of ARQ dicts).
_pending = {}
#: instance UUID -> _Bind of the bind started for it.
_binding = {}
#: The capability version a compute needs for a build cast first.
CAST_FIRST_VERSION = '1.2'
_lock = threading.Lock()


def _create(context, cyclient, instance_uuid, dp_name):
    arqs = cyclient.create_arqs(dp_name)
    _record(context, instance_uuid, arqs)
    return arqs


def _record(context, instance_uuid, arqs):
    """Write the UUIDs of ``arqs`` into the server's build request (a copy
    read here: the conductor's objects are not touched). Never raises: a
    build request already gone (the server deleted, or created in its
    cell) needs no record."""
    uuids = [arq.get('uuid') for arq in arqs if arq.get('uuid')]
    try:
        build_request = objects.BuildRequest.get_by_instance_uuid(
            context, instance_uuid)
        instance = build_request.instance
        if not instance.obj_attr_is_set('system_metadata'):
            instance.system_metadata = {}
        bookkeeping.store(instance, bookkeeping.EARLY_PREFIX, uuids)
        build_request.save()
    except nova_exception.BuildRequestNotFound:
        return
    except Exception as e:  # noqa: B902 (the boot goes on without it)
        LOG.warning('Could not record the ARQs %(arqs)s created for server '
                    '%(uuid)s in its build request: %(err)s',
                    {'arqs': ','.join(uuids), 'uuid': instance_uuid,
                     'err': e})


def start(context, build_requests):
    """Start creating the flavor ARQs of each build request's server.

    :param build_requests: nova.objects.BuildRequest list of the request.
    :returns: the UUIDs of the servers whose ARQs are being created.
    """
    started = []
    for build_request in build_requests or ():
        instance = build_request.instance
        dp_name = instance.flavor.extra_specs.get(DP_EXTRA_SPEC)
        if not dp_name:
            continue
        # Created in the server's project, as at bind time.
        cyclient = nc_client.get_client(context, instance=instance)
        future = _spawn(_create, context, cyclient, instance.uuid, dp_name)
        if future is None:
            continue
        with _lock:
            _pending[instance.uuid] = future
        started.append(instance.uuid)
    return started


def take(instance_uuid):
    """The ARQs created early for the server, waiting for their creation.

    :returns: the list of ARQ dicts, or None if none were started (any
        build but a first one, or a server without a device profile).
    :raises: what the creation raised (CyborgError).
    """
    with _lock:
        future = _pending.pop(instance_uuid, None)
    if future is None:
        return None
    return future.result()


def _spawn(func, *args):
    try:
        return compat.spawn(func, *args)
    except RuntimeError as e:
        # The pool is shutting down: done in the caller's thread instead.
        LOG.warning('Not starting %s in a thread: %s', func.__name__, e)
        return None


class _Bind(object):
    """A bind started in a thread (:func:`start_binding`)."""

    def __init__(self, created, hostname, castable):
        #: Future of the ARQs created while the scheduler ran, or None.
        self.created = created
        self.hostname = hostname
        #: Whether the build may be cast before the bind answers.
        self.castable = castable
        self.future = None
        self.lock = threading.Lock()
        #: Set by the conductor's thread: the build was cast without
        #: waiting; the bind's thread reports its end to the compute.
        self.cast_first = False
        #: Set by the bind's thread once the bind ended.
        self.ended = False


def start_binding(bind, context, instance, hostname, request_spec,
                  requested_networks=None):
    """Start ``bind`` (nova_cyborg.flows.boot.conductor.create_and_bind_arqs)
    for a server with a device profile or a port with one; :func:`join_binding`
    joins it or leaves it to its thread. Nothing for any other server.
    """
    dp_name = instance.flavor.extra_specs.get(DP_EXTRA_SPEC)
    ports = [net for net in requested_networks or []
             if net.port_id and net.device_profile]
    if not dp_name and not ports:
        return
    with _lock:
        created = _pending.get(instance.uuid)
    started = _Bind(created, hostname, castable=bool(
        created is not None and dp_name and not ports))
    started.future = _spawn(
        _bind_copies, started, bind, context, instance.obj_clone(),
        hostname, request_spec.obj_clone(),
        requested_networks.obj_clone()
        if requested_networks is not None else None)
    if started.future is not None:
        with _lock:
            _binding[instance.uuid] = started


def _bind_copies(started, bind, context, instance, hostname, request_spec,
                 requested_networks):
    """The worker: ``bind`` on the copies, recording nothing and freeing
    no allocation (the conductor's thread does when it joins a failed
    bind, nova-compute when the build was cast first).

    :returns: (the UUIDs of the bound ARQs, {port ID: ARQ UUID} of the
        ports with a device profile): ``bind`` sets ``arq_uuid`` on the
        copies of the requested networks, which the conductor's thread
        must give its own (:func:`join_binding`).
    """
    try:
        uuids = bind(context, instance, hostname, request_spec,
                     requested_networks, record=False,
                     free_on_failure=False)
    except Exception as e:
        if not _ended(started):
            raise
        _tell_compute(context, instance, hostname, bind_outcome.FAILED, e)
        return [], {}
    if _ended(started):
        _tell_compute(context, instance, hostname, bind_outcome.COMPLETED)
    return uuids, port_arqs(requested_networks)


def _ended(started):
    """Note that the bind ended; whether the build was cast first."""
    with started.lock:
        started.ended = True
        return started.cast_first


def _tell_compute(context, instance, nodename, status, exc=None):
    """Send the compute the conductor's word on the bind. Never raises:
    a compute that never hears fails the build when its wait for the word
    times out."""
    reason, arqs = None, ()
    if exc is not None:
        reason = exception.reason(exc, 'msg')
        arqs = [u for u in getattr(exc, 'arqs', None) or ()
                if isinstance(u, str)]
    try:
        compute_rpc.send_bind_outcome(
            context, instance, nodename,
            bind_outcome.event(instance.uuid, status, reason, arqs))
    except Exception as e:  # noqa: B902 (logged; the compute times out)
        LOG.error('Could not tell the compute that the bind of the '
                  'accelerator requests %(status)s: %(err)s',
                  {'status': status, 'err': e}, instance=instance)


def port_arqs(requested_networks):
    """{port ID: ARQ UUID} of the requested networks given an ARQ."""
    return {net.port_id: net.arq_uuid for net in requested_networks or []
            if net.port_id and net.obj_attr_is_set('arq_uuid') and
            net.arq_uuid}


def take_binding(instance_uuid):
    """The bind started for the server (a _Bind), or None."""
    with _lock:
        return _binding.pop(instance_uuid, None)


def _cast_first(context, instance, started):
    """Leave the bind to its thread, if the build may be cast first.

    :returns: the UUIDs of the ARQs being bound, or None when the build
        must wait for the bind (it cannot be cast first, the compute
        cannot be told, the creation failed, the bind ended already).
    """
    if not started.castable or started.future.done():
        return None
    if not capability.serves(context, started.hostname, CAST_FIRST_VERSION):
        return None
    try:
        created = started.created.result()
    except Exception:  # noqa: B902 (the bind raises it too: joined)
        return None
    with started.lock:
        if started.ended:
            return None
        started.cast_first = True
    bind_outcome.mark(context, instance, started.hostname)
    uuids = [arq.get('uuid') for arq in created]
    LOG.info('Casting the build while Cyborg binds ARQs %s',
             ','.join(uuids), instance=instance)
    return uuids


def join_binding(context, instance, requested_networks):
    """Wait for the bind started for the server (:func:`start_binding`),
    or leave it to its thread (cast first, above).

    The ARQ UUIDs the bind gave the ports with a device profile are set on
    ``requested_networks``, the conductor's own objects that go to
    nova-compute with the build (its port bindings and the guest's
    interfaces need them), as upstream's bind in the conductor's thread
    set them.

    :returns: the UUIDs of the bound (or being bound) ARQs, or None when
        no bind was started for the server.
    :raises: what the bind raised.
    """
    started = take_binding(instance.uuid)
    if started is None:
        return None
    uuids = _cast_first(context, instance, started)
    if uuids is not None:
        return uuids
    uuids, given = started.future.result()
    for net in requested_networks or []:
        if net.port_id in given:
            net.arq_uuid = given[net.port_id]
    return uuids


def _free(context, instance_uuid):
    try:
        allocations.free(context, instance_uuid)
    except Exception as e:  # noqa: B902 (logged)
        LOG.error('Could not free the allocation of server %(uuid)s after '
                  'its bind failed: %(err)s',
                  {'uuid': instance_uuid, 'err': e})


def discard(context, instance_uuids):
    """Delete the ARQs created early for these servers and not taken.

    Waits for creations still under way. Never raises: a failure to delete
    is logged with the ARQs (``delete_arqs_by_uuid`` logs and returns
    them); they stay unbound, holding no device.
    """
    for instance_uuid in instance_uuids or ():
        with _lock:
            created = _pending.pop(instance_uuid, None)
            bound = _binding.pop(instance_uuid, None)
        try:
            uuids = []
            if bound:
                try:
                    uuids = list(bound.future.result()[0])
                except Exception:  # noqa: B902 (it deleted its ARQs)
                    # The server was not built: nothing holds its
                    # allocation any more (retried: see allocations.free).
                    _free(context, instance_uuid)
                    raise
            if created:
                uuids += [arq.get('uuid') for arq in created.result()]
        except Exception:  # noqa: B902 (raised to nobody: it had no use)
            continue
        uuids = [uuid for uuid in uuids if uuid]
        if not uuids:
            continue
        LOG.info('Deleting ARQs %s created while scheduling server %s, '
                 'which did not get to bind them', ','.join(uuids),
                 instance_uuid)
        left = nc_client.get_client(context).delete_arqs_by_uuid(uuids)
        if left:
            LOG.error('Could not delete ARQs %(arqs)s created while '
                      'scheduling server %(uuid)s; Cyborg keeps them '
                      'unbound', {'arqs': ','.join(left),
                                  'uuid': instance_uuid})
