"""Hooks of ``nova.compute.api`` (patches 0006, 0012, 0026 and 0027)."""

import threading

from nova_cyborg.flows.cleanup import delete as cleanup
from nova_cyborg.flows import server_actions as api
from nova_cyborg.steps import function_check

#: What :func:`may_have_arqs_before_host` decided for the server the
#: request's thread deletes: (instance UUID, may hold ARQs). One a thread:
#: ``API._delete()`` and the ``_local_delete_cleanup()`` it calls run in
#: the request's thread, and each delete replaces the last.
_decided = threading.local()


def check_operation(operation, instance):
    """Called by the ``block_accelerators`` decorator of ``compute.API``.

    Replaces upstream's refusal of every server operation on a server
    with accelerators by the project's list of supported operations.

    :param operation: the name of the decorated API method ('resize', ...).
    :param instance: the nova.objects.Instance.
    :raises: ForbiddenWithAccelerators for an operation not supported.
    """
    api.check_operation(operation, instance)


def check_hosts(context, func, instance, *args, **kwargs):
    """Called by the ``block_accelerators`` decorator of ``compute.API``
    after :func:`check_operation`, with the decorated method and its
    arguments.

    A patched compute reports the same service version as an unpatched
    one: a resize or cold migration of a server with accelerators from a
    compute that does not report the nova-cyborg trait (patch 0013), or a
    cold migration or evacuation to a named host that does not, is refused
    here. Nothing for a server without accelerators.

    :param func: the decorated ``compute.API`` method.
    :raises: ComputeNotServing (HTTP 409) naming the host and why.
    """
    api.check_hosts(context, func, instance, *args, **kwargs)


def check_unshelve_host(context, instance, host):
    """Called by ``API.unshelve()`` for the host the caller named (API
    microversion 2.91), after Nova's own checks of it.

    :raises: UnshelveHostNotServing (HTTP 409) naming the host and the
        capability trait it does not report. Nothing for a server without
        accelerators.
    """
    api.check_unshelve_host(context, instance, host)


def check_new_flavor(context, flavor, instance=None):
    """Called by ``API.resize()`` for the new flavor (upstream refuses one
    with a device profile).

    :param flavor: the new nova.objects.Flavor.
    :param instance: the server resized; under unified limits its project
        must have room for the profile's devices.
    :raises: OperationRefused if its device profile is invalid;
        TooManyInstances over the project's limits.
    """
    api.check_new_flavor(context, flavor, instance)


def record_profile_asks(instance, dp_name, dp_request_groups):
    """Called by ``API._provision_instances()`` (patch 0027) for each new
    server whose flavor names a device profile, once the server's system
    metadata is set and before its build request is written.

    Records on the server (not saved: the build request saves it) what
    each of the profile's groups asks of an FPGA, from the profile as it
    was just read, so that nova-compute's check before the guest starts
    reads no profile (nova_cyborg.steps.function_check).

    :param dp_name: the flavor's device profile name.
    :param dp_request_groups: what ``get_device_profile_request_groups``
        returned for it.
    """
    function_check.record(instance, dp_name, dp_request_groups)


def may_have_arqs_before_host(instance):
    """Called by ``API._delete()`` (patch 0012) for every delete, with the
    server as nova-api loaded it, before it may be replaced.

    Decides from what is loaded (the flavor, the system metadata; never a
    query) whether the server may hold ARQs, and remembers it for this
    thread: :func:`delete_arqs_before_host`, which the
    ``_local_delete_cleanup()`` of the same delete calls, then reads
    nothing for a plain server, whose delete costs no more than
    upstream's. Upstream's signatures stay as they are.
    """
    _decided.value = (instance.uuid,
                      cleanup.may_have_arqs_before_host(instance))


def delete_arqs_before_host(context, instance_uuid):
    """Called by ``API._local_delete_cleanup()`` (patch 0012), which every
    delete of a server that never had a host ends with (the build request
    deleted, the instance destroyed in its cell, or already gone).

    Deletes the server's ARQs: those the conductor bound before it could
    cast the build (it stopped in between), under the server's UUID or
    alias, and the unbound ones its system metadata names. Upstream frees
    only the allocation there. Nothing, and no query, for a server that
    :func:`may_have_arqs_before_host` found plain in the same delete.
    Never raises: what Cyborg fails to delete is logged and left for
    ``nova-cyborg-sweep-arqs``.

    :param instance_uuid: the server's UUID (the instance row may be
        deleted already, or was never written to a cell).
    """
    decided = getattr(_decided, 'value', None)
    _decided.value = None
    if decided == (instance_uuid, False):
        return
    cleanup.delete_arqs_before_host(context, instance_uuid)


def build_request_deleted(context, build_request):
    """Called by ``API._attempt_delete_of_buildrequest()`` (patch 0012)
    once it deleted the build request of a server the conductor has not
    created in a cell yet: the ARQs the conductor created for it while the
    scheduler ran, recorded in the build request, are deleted (a conductor
    that stopped during scheduling left them). Nothing for a server
    without accelerators; never raises.

    :param build_request: the deleted nova.objects.BuildRequest.
    """
    cleanup.delete_early_arqs(context, build_request)
