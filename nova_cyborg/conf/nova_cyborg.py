"""Options of the ``[nova_cyborg]`` group, and ``[upgrade_levels]
nova_cyborg`` beside Nova's own upgrade levels."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'nova_cyborg',
    title='nova-cyborg options',
    help="""
Options for the nova-cyborg extension, which ties Nova to Cyborg for servers
whose flavor carries ``accel:device_profile``. How nova-cyborg reaches Cyborg
(endpoint, timeouts, connect and status-code retries) is configured in Nova's
own ``[cyborg]`` group; the service token it sends with binding and deletion
requests comes from Nova's ``[service_user]`` group.
""")

ATTACH_TYPES = ('PCI', 'MDEV')

OPTS = [
    cfg.ListOpt(
        'allowed_attach_types',
        default=list(ATTACH_TYPES),
        item_type=cfg.types.String(choices=ATTACH_TYPES),
        help="""
Attach handle types that nova-cyborg passes through to an instance.

``PCI`` passes a whole PCI function (a PF or a VF) through as a libvirt
``<hostdev>``; ``MDEV`` creates the mediated device named by the attach
handle and passes it through. A bound accelerator request whose attach handle
type is not listed fails the build with a clear fault instead of being
silently ignored.
"""),
    cfg.IntOpt(
        'max_accelerators_per_instance',
        default=16,
        min=1,
        help="""
Upper bound on the number of accelerators one instance may have.

The sum of all ``resources:*`` amounts over the groups of a device profile
must not exceed this value; a larger profile is refused at the API with
HTTP 400, before anything is scheduled or created in Cyborg. For the
addAccelerator server action, the accelerators of the server's flavor and
those attached already count too.
"""),
    cfg.BoolOpt(
        'require_service_token',
        default=True,
        help="""
Refuse to bind or delete accelerator requests without a service token.

Cyborg only lets a request that carries a service token bind, unbind or
delete an accelerator request that belongs to an instance. When this is true
and ``[service_user] send_service_user_token`` is false, nova-cyborg fails
those calls with a clear error that names the missing configuration instead
of letting Cyborg answer 403.

Related options:

* ``[service_user] send_service_user_token``
"""),
    cfg.BoolOpt(
        'service_user_without_user_token',
        default=True,
        help="""
Call Cyborg as Nova's service user when there is no user token.

Some of Nova's calls to Cyborg are made by a service itself, with an
administrative context that carries no user token: nova-compute reaping, at
start, the domain of a server deleted while it was down (when the API could
not delete the server's accelerator requests) is one. Cyborg answers 401 to a
request without a token, so the accelerator requests would stay ``Bound`` and
their devices unusable. When this is true, such calls authenticate with the
credentials of ``[service_user]`` (which must be configured, with
``auth_type``) instead; calls made for a user always carry the user's own
token. When false, or when ``[service_user]`` has no credentials, those calls
fail with an error that names the missing configuration.

Related options:

* ``[service_user] auth_type`` and its credentials
"""),
    cfg.StrOpt(
        'arq_project',
        default='server',
        choices=[
            ('server', "A server's accelerator requests belong to the "
                       "server's project: ``[service_user]`` needs the "
                       "``admin`` role."),
            ('service', "Every accelerator request belongs to the project "
                        "of ``[service_user]``: it needs the ``service`` "
                        "and ``reader`` roles there, not ``admin``."),
        ],
        help="""
The Cyborg project nova-cyborg creates and binds accelerator requests in.

Cyborg 17 puts an accelerator request in the project of the caller that
creates and binds it, shows a caller without the ``admin`` role only its own
project's, and lets only an ``admin`` set another project. With ``server``,
a server's requests belong to its project whoever acts on it, and the
owner sees them in Cyborg; for that, nova-cyborg binds those an admin of
another project makes, and reads and deletes every server's, as
``[service_user]``, which must then hold the ``admin`` role. With
``service``, every request is created, bound, read and deleted as
``[service_user]`` in its own project (as Nova's service-to-service calls
are), which then needs only Cyborg's ``service`` role (to create, bind
and delete) and ``reader`` (to list), in that project; the servers'
owners do not see the requests in Cyborg's API.

Choose it when the cloud is deployed. Requests created while it was
``server`` stay in the servers' projects, where a ``[service_user]``
without ``admin`` does not see them: switching an existing cloud to
``service``, keep the ``admin`` role until no server created before
holds a request.

Related options:

* ``[service_user]`` credentials and ``send_service_user_token``
"""),
    cfg.IntOpt(
        'claim_candidates_per_host',
        default=16,
        min=1,
        help="""
How many allocation candidates of one host nova-scheduler tries to claim
for a server with accelerators.

Upstream nova-scheduler claims only a host's first allocation candidate.
When accelerators sit on several nested providers of one host, each holding
part of the total, the servers of a multi-create request (``--min/--max``)
all get that same first candidate and every one after the first fails with
NoValidHost (upstream bug 1874664). nova-cyborg tries the host's next
candidates, up to this many, before moving to the next host. 1 keeps
upstream's behaviour. A server without accelerators always gets upstream's
behaviour.
"""),
    cfg.FloatOpt(
        'function_affinity_weight_multiplier',
        default=10.0,
        help="""
Multiplier of the FPGA function affinity weigher.

``nova_cyborg.weigher.FunctionAffinityWeigher`` (enabled by adding it to
``[filter_scheduler] weight_classes``) ranks the hosts of a server whose
device profile asks for an FPGA function (``accel:function_id``, or
``accel:bitstream_id`` whose Glance image names it): a host whose card
already holds that function first, then a host whose card is idle (no
allocation; blank or holding another function), then one whose blank card
is already allocated (a function is about to be loaded on it), and a host
whose card holds another function in use last. So boots of two functions
land on two cards instead of racing for one and being rescheduled. A host
weighs 1 (holds the function), 0.5 (idle), 0.25 (blank, allocated) or 0
(another function in use), times this multiplier. The default, 10, outweighs
Nova's resource weighers (RAM, CPU, disk, ...: each adds at most its own
multiplier, 1.0 by default) so that a host's free RAM never sends a server
to a card that has to be reprogrammed; the build failure weigher still
outweighs it. 0 disables the weigher; a negative value inverts it. An
aggregate's ``function_affinity_weight_multiplier`` metadata overrides it
for its hosts.

Related options:

* ``[filter_scheduler] weight_classes``
"""),
    cfg.IntOpt(
        'stuck_accelerator_action_timeout',
        default=300,
        min=1,
        help="""
Seconds after which nova-compute ends an addAccelerator or removeAccelerator
action that nothing is working on any more.

nova-api sets the server's task state (``adding_accelerator`` or
``removing_accelerator``) and casts the action to the server's
nova-compute, which clears it when it is done. When the cast was lost (a
RabbitMQ restart drops its queues) or the compute could not record the
action's end (the conductor or RabbitMQ down), nothing would clear it, and
every other action on the server is refused while it is set. Every
``stuck_accelerator_action_interval`` seconds nova-compute looks for servers
of its host left in one of those task states for longer than this, with no
handler of the action running: a half-done attach is rolled back, a detach
whose accelerators are gone completed, and the task state cleared. It must
be well above the time a cast takes to reach nova-compute.

Related options:

* ``stuck_accelerator_action_interval``
"""),
    cfg.IntOpt(
        'stuck_accelerator_action_interval',
        default=60,
        min=0,
        help="""
Seconds between two runs of nova-compute's periodic task that ends the
addAccelerator and removeAccelerator actions nothing would end (see
``stuck_accelerator_action_timeout``). 0 disables the task: such an action
then holds its server until nova-compute restarts.

The task reads the database while an action may be set on a server of its
host: after an action's cast reached this nova-compute, and after
nova-compute found such an action when it started, until it finds nothing
left to end. To find a cast that never arrived it also looks once every
``stuck_accelerator_action_timeout`` seconds on a host whose compute node
has child providers (devices; as the report client's cache refreshed them
last, every ``[compute] resource_provider_association_refresh`` seconds).
A compute without devices does not query. Read when nova-compute
starts.

Related options:

* ``stuck_accelerator_action_timeout``
"""),
    cfg.IntOpt(
        'unbound_arq_max_age',
        default=3600,
        min=0,
        deprecated_for_removal=True,
        deprecated_reason="""
Unused. nova-compute no longer deletes accelerator requests never bound to
anything: Nova cannot tell those it made from those someone else made. The
accelerator requests of deleted servers are deleted by
nova-cyborg-sweep-arqs.
""",
        help="""
Unused (see the deprecation). It was the age in seconds after which
nova-compute deleted accelerator requests never bound to anything.

Nova creates an accelerator request and binds it a moment later. When the
answer to the create is lost (Cyborg slow or the connection cut after
Cyborg created it), Nova fails the build and cannot know the request's
UUID; the request stays in Cyborg, in state Initial, bound to nothing. Each
nova-compute looks for such requests older than this when it checks for
running deleted instances (``[DEFAULT]
running_deleted_instance_poll_interval``) and deletes them. It must be well
above the few seconds between a create and its bind. 0 disables it.
"""),
]


#: Nova's group (nova.conf registers it first, with its help).
UPGRADE_LEVELS = cfg.OptGroup('upgrade_levels', title='Upgrade levels')
#: The versions of nova-cyborg's RPC namespace
# (nova_cyborg.clients.compute_rpc.VERSIONS;
#: not imported: nova_cyborg.clients.compute_rpc imports Nova's compute RPC
# API).
RPC_VERSIONS = ('1.0',)

UPGRADE_OPTS = [
    cfg.StrOpt(
        'nova_cyborg',
        default='auto',
        choices=('auto',) + RPC_VERSIONS,
        help="""
The newest version of nova-cyborg's RPC namespace nova-api sends to a
nova-compute (the addAccelerator and removeAccelerator actions).

``auto`` sends each compute at most the version it serves, as the
capability traits of its compute node in Placement say (nova-api reads them
before every action; it makes no call to the compute). A version pins every
compute to it during a rolling upgrade of nova-cyborg, as Nova's own
``[upgrade_levels] compute`` does: an action that needs a newer version is
refused with HTTP 409 until the pin is raised. Nova's minimum nova-compute
service version cannot serve here: a compute patched by nova-cyborg and one
that is not report the same.
Set it in nova-api's configuration.
"""),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)
    conf.register_group(UPGRADE_LEVELS)
    conf.register_opts(UPGRADE_OPTS, group=UPGRADE_LEVELS)


def list_opts():
    return {GROUP: OPTS, UPGRADE_LEVELS: UPGRADE_OPTS}
