"""Conductor side: create the instance's ARQs and start binding them.

Routed from ``ComputeTaskManager._create_and_bind_arq_for_instance``, which
every conductor path that places an instance on a host calls (initial
build, reschedule, unshelve, evacuate). The binding itself completes
asynchronously in Cyborg, which then sends Nova the
``accelerator-request-bound`` event that the compute manager waits for.

Unlike upstream, a failure at any step (creating, mapping a group to its
provider, binding) deletes every ARQ created so far before raising, so no
caller has to know which ARQs exist, and the error says which step failed.
For an instance that has never run on a host (first build, reschedule,
unshelve of an offloaded server) it also frees the Placement allocation
the scheduler made: upstream's first-build failure path leaves the server
in ERROR still holding its devices. For an evacuation it frees the
destination's part of the allocation, which nothing else frees when the
conductor fails.

Before an offloaded server is unshelved, the ARQs it still has in Cyborg
are deleted: an offloaded server has none, so they are left from an
earlier unshelve that failed while Cyborg was binding (Nova timed out and
Cyborg finished later). Cyborg refuses to bind ARQs for an instance that
already has some, so they would make every later unshelve fail.
"""

from oslo_log import log as logging

from nova.compute import vm_states
from nova import objects
from nova.scheduler.client import report

from nova_cyborg.clients import allocations
from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.flows.boot import early_arqs
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping
from nova_cyborg.steps import evacuation as evacuate

LOG = logging.getLogger(__name__)

DP_EXTRA_SPEC = 'accel:device_profile'


def _binding(hostname, rp_uuid, instance_uuid):
    return {'hostname': hostname, 'device_rp_uuid': rp_uuid,
            'instance_uuid': instance_uuid}


def _flavor_bindings(cyclient, instance, hostname, mapping, created):
    dp_name = instance.flavor.extra_specs.get(DP_EXTRA_SPEC)
    if not dp_name:
        return {}
    # Created while the scheduler ran (first builds), or now.
    arqs = early_arqs.take(instance.uuid)
    if arqs is None:
        arqs = cyclient.create_arqs(dp_name)
    created.extend(arq.get('uuid') for arq in arqs)
    return {arq['uuid']: _binding(
                hostname, cyclient.get_arq_device_rp_uuid(arq, mapping, None),
                instance.uuid)
            for arq in arqs}


def _port_bindings(cyclient, instance, hostname, mapping, requested_networks,
                   created):
    bindings = {}
    for request_net in requested_networks or []:
        if not (request_net.port_id and request_net.device_profile):
            continue
        arqs = cyclient.create_arqs(request_net.device_profile)
        created.extend(arq.get('uuid') for arq in arqs)
        if len(arqs) != 1:
            raise exception.CyborgError(op=_('create'), msg=_(
                'device profile %(dp)s of port %(port)s asks for %(n)d '
                'devices; a port takes exactly one') % {
                    'dp': request_net.device_profile,
                    'port': request_net.port_id, 'n': len(arqs)})
        arq = arqs[0]
        request_net.arq_uuid = arq['uuid']
        bindings[arq['uuid']] = _binding(
            hostname,
            cyclient.get_arq_device_rp_uuid(arq, mapping,
                                            request_net.port_id),
            instance.uuid)
    return bindings


def free_allocation(context, instance, nodename):
    """Free what the scheduler allocated on ``nodename`` for the instance.

    An instance not yet on a host loses its whole allocation. An instance
    on a host (evacuation) keeps that of its current host, which the
    scheduler merged with the destination's, and loses the destination's.
    """
    client = report.report_client_singleton()
    try:
        if not (instance.obj_attr_is_set('host') and instance.host):
            # (retried: Placement can answer 500 on a database deadlock)
            allocations.free(context, instance.uuid)
            return
        if instance.obj_attr_is_set('node') and instance.node == nodename:
            return
        node = objects.ComputeNode.get_by_nodename(context, nodename)
        if not client.remove_provider_tree_from_instance_allocation(
                context, instance.uuid, node.uuid):
            LOG.error('Could not free the allocation of the instance on '
                      '%s after its accelerators failed', nodename,
                      instance=instance)
    except Exception as e:
        LOG.error('Could not free the allocation of the instance after its '
                  'accelerators failed: %s', e, instance=instance)


def _delete_leftovers(cyclient, instance):
    """Delete the ARQs an offloaded instance is left with (see above)."""
    if instance.obj_attr_is_set('vm_state') and (
            instance.vm_state == vm_states.SHELVED_OFFLOADED):
        cyclient.delete_arqs_for_instance(
            instance.uuid, owners=bookkeeping.holders(instance))


def create_and_bind_arqs(context, instance, hostname, request_spec,
                         requested_networks=None, record=True,
                         free_on_failure=True):
    """Create the instance's ARQs, map them to providers, start binding.

    :param hostname: the selected node's name, as Cyborg knows the host.
    :param request_spec: carries the request group -> provider mapping that
        the scheduler's allocation produced.
    :param record: save what the instance must remember (who owns its
        ARQs, the ARQs Cyborg could not delete). False in the early bind's
        worker thread (nova_cyborg.flows.boot.early_arqs), which works on
        copies and never saves: the ARQs it could not delete travel in the
        raised exception's ``arqs`` and the conductor's thread records them
        (nova_cyborg.hooks.conductor.build_arqs_failed).
    :param free_on_failure: free the allocation of ``hostname`` when this
        fails (see :func:`free_allocation`). False in the early bind's
        worker thread: the conductor's thread frees it when it joins the
        failed bind, nova-compute when the build was cast first.
    :returns: the UUIDs of the ARQs whose binding was started; None for
        a server with nothing for nova-cyborg to create (no device profile
        in its flavor or ports, nothing attached that an evacuation takes
        along), for which the patched conductor runs upstream's code
        (patch 0002a).
    :raises: AcceleratorRequestBindingFailed, after deleting every ARQ
        created here.
    """
    dp_name = instance.flavor.extra_specs.get(DP_EXTRA_SPEC)
    ports = [net for net in requested_networks or []
             if net.port_id and net.device_profile]
    if not dp_name and not ports and not evacuate.carries(instance,
                                                          hostname):
        return None
    # Bound in the instance's project, whoever acts.
    cyclient = nc_client.get_client(context, instance=instance)
    mapping = request_spec.get_request_group_mapping()
    created = []
    try:
        _delete_leftovers(cyclient, instance)
        bindings = _flavor_bindings(cyclient, instance, hostname, mapping,
                                    created)
        bindings.update(_port_bindings(cyclient, instance, hostname, mapping,
                                       ports, created))
        # An evacuation takes what was attached along
        # (nova_cyborg.steps.evacuation)
        bindings.update(evacuate.attached_bindings(
            context, instance, hostname, cyclient, created))
        if bindings:
            cyclient.bind_arqs(bindings)
            if bookkeeping.own_arqs(instance) and record:
                instance.save()
    except Exception as e:
        msg = exception.reason(e, 'msg')
        LOG.error('Creating or binding accelerator requests on %(host)s '
                  'failed; deleting ARQs %(arqs)s: %(err)s',
                  {'host': hostname, 'arqs': ','.join(created), 'err': msg},
                  instance=instance)
        left = cyclient.delete_arqs_by_uuid(created)
        if record:
            bookkeeping.remember_retired_quietly(instance, left)
        if free_on_failure:
            free_allocation(context, instance, hostname)
        raise exception.AcceleratorRequestBindingFailed(
            arqs=[] if record else left, msg=msg)
    LOG.info('Started binding ARQs %s on %s', ','.join(bindings), hostname,
             instance=instance)
    return list(bindings)
