"""Which computes serve nova-cyborg: versioned traits on their node provider.

A patched nova-compute and an unpatched one report the same Nova service
version, so nothing in Nova's own records tells them apart. A patched
compute therefore reports one trait per capability version it serves
(:data:`VERSIONS`) on its compute node resource provider (patch 0013 adds
them to the traits the resource tracker syncs, :func:`report`), the way
Nova's computes report ``COMPUTE_ACCELERATORS``, and only where it does:
the node of a virt driver without ``supports_accelerators`` (ironic)
reports none. A compute reports every
version up to its own: a newer one serves all that an older one does.
What a server needs is the *minimum* version of what is asked
(:func:`needed`), so during a rolling upgrade the computes of the old and
the new version both take the work the old one can do, and the accelerator
capacity is not split.

Consumers, all only for servers with accelerators (a device profile in
the flavor, or accelerators added with addAccelerator); for any other
server Nova behaves as upstream:

* nova-scheduler requires the 1.0 trait on the root provider of a request
  whose flavor names a device profile (patch 0014, beside upstream's
  ``COMPUTE_ACCELERATORS`` in ``accelerators_filter``; :func:`require`);
  the conductor requires what an evacuation or a live migration needs for
  any server with accelerators (:func:`require_for`): no move lands on a
  compute that cannot serve it.
* nova-api refuses a move whose source or named destination does not
  report what the move needs (:func:`check_hosts`): a resize or cold
  migration (source and destination), an evacuation (destination) with
  HTTP 409, a live migration (source and destination) with HTTP 400 as
  its other refusals, each naming the host and the trait, instead of
  accepting a move that would fail later or build the guest without its
  devices.

A compute that is reverted to an unpatched Nova keeps the traits (an
unpatched resource tracker leaves traits it does not know alone): the
operator removes them (``doc/source/upgrade.rst``).
"""

import threading
import time
from urllib import parse

from keystoneauth1 import exceptions as ks_exc
from nova import exception as nova_exception
from nova import objects
from nova.scheduler.client import report as placement_report
import os_traits

from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping

TRAIT_PREFIX = 'CUSTOM_NOVA_CYBORG_'

#: Every capability version a compute patched by this release serves,
#: oldest first, with what it adds.
VERSIONS = (
    ('1.0', 'boot, resize, cold migration, evacuation, shelve and unshelve '
            'of a server with accelerators; addAccelerator and '
            'removeAccelerator (patches 0001 to 0014)'),
    ('1.1', 'live migration of a server with accelerators: the '
            'destination\'s accelerator requests bound before the move, '
            'the source\'s released after it (patches 0020a to 0020c)'),
    ('1.2', 'a first build cast before Cyborg answers its bind: the '
            'compute waits for the conductor\'s word on the bind '
            '(patch 0028, nova_cyborg.model.bind_outcome)'),
)


def trait(version):
    """The trait naming capability ``version`` ('1.1')."""
    return TRAIT_PREFIX + version.replace('.', '_')


#: The traits a patched compute reports, one per version it serves.
TRAITS = tuple(trait(version) for version, _what in VERSIONS)
#: What any server with accelerators needs of its compute.
TRAIT = trait('1.0')

#: The version each decorated ``nova.compute.api.API`` method needs of its
#: hosts, if more than 1.0.
_NEEDS = {'live_migrate': '1.1'}

DP_EXTRA_SPEC = 'accel:device_profile'

#: Decorated ``nova.compute.api.API`` methods whose hosts are checked, and
#: the name of their destination host argument.
_DESTINATION_ARG = {'resize': 'host_name', 'evacuate': 'host',
                    'live_migrate': 'host_name', 'unshelve': 'host'}
#: Of those, the ones whose source compute runs nova-cyborg code.
_SOURCE_CHECKED = frozenset(['resize', 'live_migrate'])


def needed(operation):
    """The trait a host must report to serve ``operation`` of a server
    with accelerators (the minimum version that does)."""
    return trait(_NEEDS.get(operation, '1.0'))


class ComputeNotServing(nova_exception.ServiceUnavailable,
                        nova_exception.UnsupportedRPCVersion):
    """A compute a move of a server with accelerators needs is not ready.

    A subclass of the exceptions Nova's migrate, resize (ServiceUnavailable)
    and evacuate (UnsupportedRPCVersion) actions answer with HTTP 409.
    """

    msg_fmt = _("%(reason)s")
    code = 409


class UnshelveHostNotServing(nova_exception.UnshelveHostNotInAZ):
    """The host an unshelve names cannot serve the server's accelerators.

    A subclass of the exception Nova's unshelve action answers with HTTP
    409 (``nova/api/openstack/compute/shelve.py``), with its own message.
    """

    msg_fmt = _("%(reason)s")
    code = 409


class LiveMigrationHostNotServing(exception.OperationRefused):
    """A host of a live migration of a server with accelerators is not
    ready.

    Answered with HTTP 400 at every microversion, as the live migrations
    nova-cyborg refuses for their devices
    (:mod:`nova_cyborg.flows.server_actions`); Nova's own
    ``MigrationPreCheckError`` would be a 500 from nova-api at microversion
    2.34 and later, where Nova expects it from the conductor.
    """

    msg_fmt = _("Live migration of this server with accelerators is "
                "refused: %(reason)s")


def report(traits):
    """Add :data:`TRAITS` to the traits of this compute's node provider,
    if its virt driver supports accelerators.

    The resource tracker has already set the driver's capability traits:
    ``COMPUTE_ACCELERATORS`` is there exactly when the driver's
    capabilities say ``supports_accelerators`` (libvirt does; ironic and
    VMware do not). A node of any other driver gets none, and loses those
    an earlier nova-cyborg reported there.

    :param traits: the set the resource tracker syncs to Placement.
    """
    if os_traits.COMPUTE_ACCELERATORS in traits:
        traits.update(TRAITS)
    else:
        traits.difference_update(TRAITS)


def require(request_spec):
    """Have the scheduler pick only computes that serve nova-cyborg.

    Only for a request whose flavor names a device profile.

    :returns: True if the trait was required.
    """
    if not request_spec.flavor.extra_specs.get(DP_EXTRA_SPEC):
        return False
    request_spec.root_required.add(TRAIT)
    return True


def require_for(request_spec, instance, operation):
    """Have the scheduler pick only computes that can serve ``operation``
    of ``instance``, whatever its accelerators came from (its flavor's
    device profile or addAccelerator).

    :param operation: the ``nova.compute.api.API`` method, for
        :func:`needed`.
    :returns: True if a trait was required.
    """
    # The conductor's instance comes from nova-api with its system
    # metadata loaded: nothing to load for a server without accelerators.
    if not bookkeeping.has_accelerators(instance, load=False):
        return False
    request_spec.root_required.add(needed(operation))
    return True


def check_hosts(context, operation, instance, arguments):
    """Refuse a move of a server with accelerators a host cannot serve.

    :param operation: the name of the ``nova.compute.api.API`` method.
    :param arguments: its arguments by name (``inspect.BoundArguments``).
    :raises: ComputeNotServing (HTTP 409), for a live migration
        LiveMigrationHostNotServing (HTTP 400), for an unshelve
        UnshelveHostNotServing (HTTP 409),
        naming the host, the trait it lacks and why.
    """
    if (operation not in _DESTINATION_ARG or
            not bookkeeping.has_accelerators(instance)):
        return
    error = {'live_migrate': LiveMigrationHostNotServing,
             'unshelve': UnshelveHostNotServing}.get(operation,
                                                     ComputeNotServing)
    wanted = needed(operation)
    if operation in _SOURCE_CHECKED:
        node = objects.ComputeNode.get_by_host_and_nodename(
            context, instance.host, instance.node)
        _check_nodes(context, instance.host, [node], _('source'), wanted,
                     error)
    host = arguments.get(_DESTINATION_ARG[operation])
    if host:
        try:
            nodes = objects.ComputeNodeList.get_all_by_host(context, host)
        except nova_exception.ComputeHostNotFound:
            return  # Nova's own checks answer that
        _check_nodes(context, host, nodes, _('destination'), wanted, error)


#: Seconds the conductor trusts what it read of a node's traits
#: (:func:`serves`): a rolling upgrade adds versions, and a reverted
#: compute keeps its traits until the operator removes them.
SERVES_CACHE_SECONDS = 300

_SERVES_LOCK = threading.Lock()
#: (node name, trait) -> (monotonic time, whether the node reports it)
_SERVES = {}


def serves(context, nodename, version, clock=time.monotonic):
    """Whether compute node ``nodename`` reports capability ``version``.

    Read from Placement (one ``GET /resource_providers?name=&required=``,
    the compute node provider being named after its node), then kept for
    :data:`SERVES_CACHE_SECONDS`. False when Placement cannot be read:
    the caller then does what every version serves.
    """
    wanted = trait(version)
    key = (nodename, wanted)
    now = clock()
    with _SERVES_LOCK:
        at, answer = _SERVES.get(key, (None, None))
    if at is not None and now - at < SERVES_CACHE_SECONDS:
        return answer
    client = placement_report.report_client_singleton()
    url = '/resource_providers?%s' % parse.urlencode(
        {'name': nodename, 'required': wanted})
    try:
        resp = client.get(url, version='1.18',
                          global_request_id=context.global_id)
        if not resp:
            return False
        answer = bool(resp.json().get('resource_providers'))
    except (nova_exception.NovaException, ks_exc.ClientException,
            ValueError):
        return False
    with _SERVES_LOCK:
        _SERVES[key] = (now, answer)
    return answer


def check_attach(context, instance):
    """Refuse addAccelerator or removeAccelerator on a compute that does
    not report :data:`TRAIT`, from Placement (the cast would reach a
    compute that drops it with an error in its log).

    :returns: the capability versions the server's compute node reports,
        from which nova-api caps the RPC it sends
        (:func:`nova_cyborg.clients.compute_rpc.served_by`).
    :raises: OperationRefused (HTTP 409 from the action) naming the host
        and the trait.
    """
    node = objects.ComputeNode.get_by_host_and_nodename(
        context, instance.host, instance.node)
    return _check_nodes(context, instance.host, [node], _("server's"), TRAIT,
                        exception.OperationRefused,
                        what=_('attach or detach accelerators'))[0]


def _served(traits):
    """The capability versions of :data:`VERSIONS` that ``traits`` name."""
    return [version for version, _what in VERSIONS
            if trait(version) in traits]


def _check_nodes(context, host, nodes, role, wanted, error, what=None):
    """:returns: for each node, the capability versions it reports."""
    client = placement_report.report_client_singleton()
    reported = []
    for node in nodes:
        try:
            traits = client.get_provider_traits(context, node.uuid).traits
        except (nova_exception.NovaException, ks_exc.ClientException) as e:
            raise error(reason=_(
                'The traits of the %(role)s host %(host)s could not be read '
                'from Placement (%(error)s): a server with accelerators is '
                'moved only between computes known to run nova-cyborg. Try '
                'again later.') % {
                    'role': role, 'host': host,
                    'error': e})
        served = _served(traits)
        reported.append(served)
        if wanted in traits:
            continue
        why = (_('it runs an older nova-cyborg, which serves versions %s') %
               ', '.join(served) if served else
               _('nova-compute there is not patched by nova-cyborg'))
        raise error(reason=_(
            'The %(role)s host %(host)s cannot %(what)s: its compute node '
            'does not report trait %(trait)s (%(why)s). Upgrade it first, '
            'or choose another host.') % {
                'role': role, 'host': host, 'trait': wanted, 'why': why,
                'what': what or _('move a server with accelerators')})
    return reported
