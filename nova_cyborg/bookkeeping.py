"""What nova_cyborg keeps about a server's ARQs in its system metadata.

The model of the bookkeeping, with no service call: the lists kept as
``<prefix><n>`` keys of ``instance.system_metadata`` (which travels with
the instance between hosts), and what they say about the server. The
services that change them (nova_cyborg.move, attach, cleanup, evacuate)
save the instance themselves.

Lists:

* ``PARKED_PREFIX``: "<arq uuid> <device rp uuid> <hostname>" of the
  source's ARQs a resize unbound and keeps (nova_cyborg.move);
* ``RETIRED_PREFIX``: ARQ UUIDs that must be deleted but could not be
  (Cyborg unreachable); deleted at the next move, or with the server;
* ``ATTACHED_PREFIX``: "<arq uuid> <device profile>" of the ARQs that
  addAccelerator added (nova_cyborg.attach).
"""

DP_EXTRA_SPEC = 'accel:device_profile'
#: System metadata: ``<prefix><n>`` holds the n-th entry of a list.
PARKED_PREFIX = 'nova_cyborg_parked_arq_'
RETIRED_PREFIX = 'nova_cyborg_retired_arq_'
#: "<arq uuid> <device profile>" of the ARQs that nova_cyborg.attach added.
ATTACHED_PREFIX = 'nova_cyborg_attached_arq_'


def flavor_profile(flavor):
    """The device profile ``flavor`` names, or None (also for no flavor)."""
    return flavor.extra_specs.get(DP_EXTRA_SPEC) if flavor else None


def entries(instance, prefix):
    """The list kept in system metadata as ``<prefix><n>`` keys."""
    meta = instance.system_metadata
    keys = sorted((k for k in meta if k.startswith(prefix)),
                  key=lambda k: int(k[len(prefix):]))
    return [meta[k] for k in keys]


def store(instance, prefix, values):
    """Replace the list kept as ``<prefix><n>`` keys (not saved)."""
    meta = instance.system_metadata
    for key in [k for k in meta if k.startswith(prefix)]:
        del meta[key]
    for index, entry in enumerate(values):
        meta['%s%d' % (prefix, index)] = entry


def parked(instance):
    """[(arq_uuid, device_rp_uuid, hostname)] of the parked ARQs."""
    return [tuple(entry.split(' ', 2))
            for entry in entries(instance, PARKED_PREFIX)]


def attached_profiles(instance):
    """The device profiles attached with addAccelerator (nova_cyborg.attach).
    """
    return sorted({entry.split(' ', 1)[1]
                   for entry in entries(instance, ATTACHED_PREFIX)})


def has_accelerators(instance):
    """True if ARQs may be bound to the instance: its flavor names a
    device profile, or accelerators were attached with addAccelerator."""
    return bool(flavor_profile(instance.flavor) or
                entries(instance, ATTACHED_PREFIX))


def hostnames(instance):
    """The names Cyborg may know the instance's current host by: ARQs
    are bound with the compute node's name (the conductor, a move) or the
    service's host name."""
    return {name for name in (instance.host, instance.node) if name}


def on_host(instance, arqs):
    """The ARQs of ``arqs`` bound to the host the instance is on now."""
    here = hostnames(instance)
    return [arq for arq in arqs if arq.get('hostname') in here]
