"""A scheduler weigher for FPGA function affinity (seed 004).

A single-program FPGA holds one function for all its regions and cannot be
reprogrammed while any of them is in use. Two servers asking two different
functions, scheduled one after the other to the same host (the RAM weigher
prefers the same one), race for that card: the second server's programming
is refused and it is rescheduled. :class:`FunctionAffinityWeigher` ranks
each host by the card its allocation candidates would give the server:

* ``WANTED`` (1.0): the card already holds the wanted function;
* ``IDLE`` (0.5): nothing is allocated on it (blank, or holding another
  function that may be replaced);
* ``BLANK_BUSY`` (0.25): no function yet but already allocated, so a
  function (maybe another) is about to be loaded on it;
* ``OTHER_BUSY`` (0.0): it holds another function and is in use.

A card whose data cannot be read weighs ``NEUTRAL``; the weigher never
fails scheduling. Enable it with::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,
        nova_cyborg.weigher.FunctionAffinityWeigher

The wanted function comes from the device profile named by the flavor's
``accel:device_profile``: a group's ``accel:function_id``, or the
``accel:function_id`` property of the Glance image of its
``accel:bitstream_id`` (cyborg-conductor's rules). It is computed once per
scheduling request. A card's function is its provider's
``CUSTOM_FPGA_FUNCTION_ID_<DRIVER>_<FUNCTION>`` trait, set by the sidecar
and cyborg-conductor when they program it. Placement is asked once per sort
for the function traits and their holders (three requests whatever the
number of hosts), plus once per candidate card not holding the wanted
function for its usages. A group that already requires a function trait
needs nothing: all its candidates hold the function.

The weigher also puts, within a host, the best-ranked allocation candidate
first, so that the claim takes that card.
"""

from urllib import parse

from oslo_context import context as o_context
from oslo_log import log as logging

from nova import context as nova_context
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights

from nova_cyborg import conf
from nova_cyborg.model import fpga_function
from nova_cyborg.model import request_groups

CONF = conf.CONF
LOG = logging.getLogger(__name__)

DP_EXTRA_SPEC = fpga_function.DP_EXTRA_SPEC
FUNCTION_ID = fpga_function.FUNCTION_KEY
BITSTREAM_ID = fpga_function.BITSTREAM_KEY
TRAIT_PREFIX = fpga_function.TRAIT_PREFIX

WANTED = 1.0
IDLE = 0.5
BLANK_BUSY = 0.25
OTHER_BUSY = 0.0
NEUTRAL = IDLE

#: ``in:`` lists of traits in ``required`` (Placement 1.39).
PLACEMENT_VERSION = '1.39'


def _current_context():
    ctx = o_context.get_current()
    if isinstance(ctx, nova_context.RequestContext):
        return ctx
    return nova_context.get_admin_context()


def _function_of_image(context, image_id):
    try:
        return fpga_function.function_of_image(context, image_id)
    except fpga_function.NoFunction:
        return None


def wanted_functions(context, spec_obj):
    """``{requester_id: FUNCTION_ID (upper case)}`` of the device profile
    groups of ``spec_obj`` that ask for an FPGA function by property.

    Empty when the server has no device profile, or when its groups require
    a function trait already (every candidate then holds the function).
    """
    if ('requested_resources' not in spec_obj or
            not spec_obj.requested_resources):
        return {}
    ours = [g for g in spec_obj.requested_resources
            if (g.requester_id or '').startswith(
                request_groups.REQUESTER_PREFIX)]
    if not ours or any(t.startswith(TRAIT_PREFIX) for g in ours
                       for t in g.required_traits):
        return {}
    flavor = spec_obj.flavor if 'flavor' in spec_obj else None
    dp_name = flavor and (flavor.extra_specs or {}).get(DP_EXTRA_SPEC)
    if not dp_name:
        return {}
    from nova_cyborg.clients import cyborg as client
    groups = client.get_client(context).get_device_profile_groups(dp_name)
    result = {}
    for index, group in enumerate(groups or []):
        if not isinstance(group, dict):
            continue
        function_id = group.get(FUNCTION_ID)
        if not function_id and group.get(BITSTREAM_ID):
            function_id = _function_of_image(context, group[BITSTREAM_ID])
        if function_id and isinstance(function_id, str):
            result[request_groups.requester_id(index)] = function_id.upper()
    return result


def holds(trait, function_id):
    """Whether function trait ``trait`` names ``function_id``."""
    return fpga_function.names(trait, function_id)


class CardView(object):
    """What Placement says of the cards of one scheduling pass."""

    def __init__(self, client, context, functions):
        self._client = client
        self._context = context
        self.holders = {}    # function id -> providers holding it
        self.programmed = set()  # providers holding any function
        self._used = {}      # provider -> bool, None if unreadable
        traits = self._function_traits()
        for function_id in set(functions):
            wanted = [t for t in traits if holds(t, function_id)]
            self.holders[function_id] = self._holding(wanted)
        self.programmed = self._holding(traits)

    def _get(self, url):
        resp = self._client.get(url, version=PLACEMENT_VERSION,
                                global_request_id=self._context.global_id)
        if resp is None or resp.status_code != 200:
            raise ValueError('Placement answered %s to GET %s' % (
                getattr(resp, 'status_code', None), url))
        return resp.json()

    def _function_traits(self):
        body = self._get('/traits?name=startswith:' + TRAIT_PREFIX)
        return sorted(body['traits'])

    def _holding(self, traits):
        if not traits:
            return set()
        body = self._get('/resource_providers?required=' + parse.quote(
            'in:' + ','.join(traits), safe=':,'))
        return {rp['uuid'] for rp in body['resource_providers']}

    def used(self, rp_uuid):
        """Whether anything is allocated on ``rp_uuid``; None if unknown."""
        if rp_uuid not in self._used:
            try:
                body = self._get('/resource_providers/%s/usages' % rp_uuid)
                self._used[rp_uuid] = any(body['usages'].values())
            except Exception as e:
                LOG.warning('Function affinity: no usages of provider %s: '
                            '%s', rp_uuid, e)
                self._used[rp_uuid] = None
        return self._used[rp_uuid]

    def rank(self, rp_uuid, function_id):
        if rp_uuid in self.holders.get(function_id, ()):
            return WANTED
        used = self.used(rp_uuid)
        if used is None:
            return NEUTRAL
        if not used:
            return IDLE
        return OTHER_BUSY if rp_uuid in self.programmed else BLANK_BUSY


def rank_candidate(view, candidate, functions):
    """Mean rank of the cards ``candidate`` maps the function groups to."""
    mappings = candidate.get('mappings') or {}
    ranks = [view.rank(rp, function_id)
             for requester, function_id in functions.items()
             for rp in mappings.get(requester, ())]
    return sum(ranks) / len(ranks) if ranks else NEUTRAL


class FunctionAffinityWeigher(weights.BaseHostWeigher):
    """Prefer the host whose card already holds the wanted FPGA function."""

    minval = OTHER_BUSY
    maxval = WANTED

    def __init__(self):
        self._wanted = (None, {})

    def weight_multiplier(self, host_state):
        return scheduler_utils.get_weight_multiplier(
            host_state, 'function_affinity_weight_multiplier',
            CONF.nova_cyborg.function_affinity_weight_multiplier)

    def _functions(self, context, spec_obj):
        """The wanted functions, computed once per request."""
        key = (id(spec_obj), spec_obj.instance_uuid
               if 'instance_uuid' in spec_obj else None)
        if self._wanted[0] != key:
            self._wanted = (key, wanted_functions(context, spec_obj))
        return self._wanted[1]

    def _weigh_object(self, host_state, weight_properties):
        return 0.0

    def weigh_objects(self, weighed_obj_list, weight_properties):
        hosts = [obj.obj for obj in weighed_obj_list]
        try:
            context = _current_context()
            functions = self._functions(context, weight_properties)
            if not functions:
                return [NEUTRAL] * len(hosts)
            view = CardView(report.report_client_singleton(), context,
                            functions.values())
        except Exception as e:
            LOG.warning('Function affinity weigher: every host weighs the '
                        'same: %s', e)
            return [NEUTRAL] * len(hosts)
        return [self._weigh_host(view, host, functions) for host in hosts]

    @staticmethod
    def _weigh_host(view, host, functions):
        candidates = host.allocation_candidates or []
        if not candidates:
            return NEUTRAL
        try:
            ranks = [rank_candidate(view, c, functions) for c in candidates]
        except Exception as e:
            LOG.warning('Function affinity weigher: host %s weighs %s: %s',
                        host.nodename, NEUTRAL, e)
            return NEUTRAL
        # The claim takes the host's candidates in order: best card first.
        order = sorted(range(len(candidates)), key=lambda i: -ranks[i])
        host.allocation_candidates = [candidates[i] for i in order]
        return ranks[order[0]]
