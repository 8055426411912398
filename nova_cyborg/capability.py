"""Which computes serve nova-cyborg: a trait on their compute node provider.

A patched nova-compute and an unpatched one report the same Nova service
version, so nothing in Nova's own records tells them apart. A patched
compute therefore reports the trait :data:`TRAIT` on its compute node
resource provider (patch 0013 adds it to the traits the resource tracker
syncs, :func:`report`), the way Nova's computes report
``COMPUTE_ACCELERATORS``. The trait names the version of nova-cyborg's
compute RPC namespace (:mod:`nova_cyborg.rpc`) the compute serves.

Two consumers, both only for servers with accelerators; for any other
server Nova behaves as upstream:

* nova-scheduler requires the trait on the root provider of a request
  whose flavor names a device profile (patch 0014, beside upstream's
  ``COMPUTE_ACCELERATORS`` in ``accelerators_filter``; :func:`require`):
  a boot, resize, cold migration, evacuation or unshelve never picks a
  compute that is not patched.
* nova-api refuses (HTTP 409, :func:`check_hosts`) a resize or cold
  migration whose source compute does not have the trait (the source's
  half of the move runs nova-cyborg code), and a cold migration or
  evacuation to a named host that does not have it, instead of accepting
  a move that would fail later or build the guest without its devices.

A compute that is reverted to an unpatched Nova keeps the trait (an
unpatched resource tracker leaves traits it does not know alone): the
operator removes it (``doc/source/upgrade.rst``).
"""

from keystoneauth1 import exceptions as ks_exc
from nova import exception as nova_exception
from nova import objects
from nova.scheduler.client import report as placement_report

from nova_cyborg.i18n import _
from nova_cyborg import move
from nova_cyborg import rpc

#: The trait a compute serving nova-cyborg's RPC namespace reports.
TRAIT = 'CUSTOM_NOVA_CYBORG_' + rpc.VERSION.replace('.', '_')

DP_EXTRA_SPEC = 'accel:device_profile'

#: Decorated ``nova.compute.api.API`` methods whose hosts are checked, and
#: the name of their destination host argument.
_DESTINATION_ARG = {'resize': 'host_name', 'evacuate': 'host'}
#: Of those, the ones whose source compute runs nova-cyborg code.
_SOURCE_CHECKED = frozenset(['resize'])


class ComputeNotServing(nova_exception.ServiceUnavailable,
                        nova_exception.UnsupportedRPCVersion):
    """A compute a move of a server with accelerators needs is not ready.

    A subclass of the exceptions Nova's migrate, resize (ServiceUnavailable)
    and evacuate (UnsupportedRPCVersion) actions answer with HTTP 409.
    """

    msg_fmt = _("%(reason)s")
    code = 409


def report(traits):
    """Add :data:`TRAIT` to the traits of this compute's node provider.

    :param traits: the set the resource tracker syncs to Placement.
    """
    traits.add(TRAIT)


def require(request_spec):
    """Have the scheduler pick only computes that serve nova-cyborg.

    Only for a request whose flavor names a device profile.

    :returns: True if the trait was required.
    """
    if not request_spec.flavor.extra_specs.get(DP_EXTRA_SPEC):
        return False
    request_spec.root_required.add(TRAIT)
    return True


def check_hosts(context, operation, instance, arguments):
    """Refuse a move of a server with accelerators a host cannot serve.

    :param operation: the name of the ``nova.compute.api.API`` method.
    :param arguments: its arguments by name (``inspect.BoundArguments``).
    :raises: ComputeNotServing (HTTP 409) naming the host and why.
    """
    if (operation not in _DESTINATION_ARG or
            not move.has_accelerators(instance)):
        return
    if operation in _SOURCE_CHECKED:
        node = objects.ComputeNode.get_by_host_and_nodename(
            context, instance.host, instance.node)
        _check_nodes(context, instance.host, [node], _('source'))
    host = arguments.get(_DESTINATION_ARG[operation])
    if host:
        try:
            nodes = objects.ComputeNodeList.get_all_by_host(context, host)
        except nova_exception.ComputeHostNotFound:
            return  # Nova's own checks answer that
        _check_nodes(context, host, nodes, _('destination'))


def _check_nodes(context, host, nodes, role):
    client = placement_report.report_client_singleton()
    for node in nodes:
        try:
            traits = client.get_provider_traits(context, node.uuid).traits
        except (nova_exception.NovaException, ks_exc.ClientException) as e:
            raise ComputeNotServing(reason=_(
                'The traits of the %(role)s host %(host)s could not be read '
                'from Placement (%(error)s): a server with accelerators is '
                'moved only between computes known to run nova-cyborg. Try '
                'again later.') % {
                    'role': role, 'host': host,
                    'error': e})
        if TRAIT not in traits:
            raise ComputeNotServing(reason=_(
                'The %(role)s host %(host)s cannot move a server with '
                'accelerators: its compute node does not report trait '
                '%(trait)s (nova-compute there is not patched by '
                'nova-cyborg, or runs an older nova-cyborg). Upgrade it '
                'first, or choose another host.') % {
                    'role': role, 'host': host, 'trait': TRAIT})
