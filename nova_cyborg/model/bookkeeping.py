"""What nova_cyborg keeps about a server's ARQs in its system metadata.

The one owner of what nova-cyborg records about a server's ARQs: every
flow asks here. The lists kept as ``<prefix><n>`` keys of
``instance.system_metadata`` (which travels with the instance between
hosts), and what they say about the server; no service call. Callers
save the instance themselves, but :func:`remember_retired`, which saves
it at once (the ARQs it names are out of reach of a delete by instance
otherwise).

Lists:

* ``PARKED_PREFIX``: "<arq uuid> <device rp uuid> <hostname>" of the
  source's ARQs a resize unbound and keeps (nova_cyborg.flows.move.resize);
* ``RETIRED_PREFIX``: ARQ UUIDs that must be deleted but could not be
  (Cyborg unreachable); deleted at the next move, or with the server;
* ``ATTACHED_PREFIX``: "<arq uuid> <device profile>" of the ARQs that
  addAccelerator added (nova_cyborg.flows.attach.compute);
* ``LIVE_DEST_PREFIX``: the ARQs created for a live migration's
  destination, until it succeeds or rolls back
  (nova_cyborg.flows.live_migration.conductor);
* ``EARLY_PREFIX``, in the instance of the server's build request: the
  ARQs created while the scheduler runs (nova_cyborg.flows.boot.
  early_arqs), deleted with the server if it is deleted before a host
  took them (:func:`early_arqs`).

And the owner of the server's ARQs in Cyborg (``OWNER_KEY``). Cyborg 17
binds no ARQ for an instance UUID that already has ARQs, and the ARQs of
a running guest must stay bound (an unbound attach handle can be handed
to another server). A live migration therefore binds the destination's
ARQs under the *other* of two UUIDs the server owns in Cyborg, its own
or its alias (:func:`alias`, a name-based UUID of it), and the server's
ARQs are those of whichever holds them now (:func:`arq_owner`).
"""

import uuid

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

DP_EXTRA_SPEC = 'accel:device_profile'
#: System metadata: ``<prefix><n>`` holds the n-th entry of a list.
PARKED_PREFIX = 'nova_cyborg_parked_arq_'
RETIRED_PREFIX = 'nova_cyborg_retired_arq_'
#: "<arq uuid> <device profile>" of the ARQs that
# nova_cyborg.flows.attach.compute added.
ATTACHED_PREFIX = 'nova_cyborg_attached_arq_'
#: The ARQs created for a live migration's destination.
LIVE_DEST_PREFIX = 'nova_cyborg_live_dest_arq_'
#: System metadata of the instance in the server's build request: the ARQs
#: created while the scheduler runs.
EARLY_PREFIX = 'nova_cyborg_early_arq_'
#: System metadata: the UUID the server's ARQs are bound under in Cyborg
#: when it is its alias (absent: the server's own UUID).
OWNER_KEY = 'nova_cyborg_arq_owner'
#: Namespace of the aliases (uuid5). Never change it: the alias of a
#: server must be the same on every host and in every release.
ALIAS_NAMESPACE = uuid.UUID('0b5c9e52-6f4e-5d0a-8a43-9d2f6c1e7b31')


def flavor_profile(flavor):
    """The device profile ``flavor`` names, or None (also for no flavor).

    Loads nothing: a server's flavor (and a move's new one) always comes
    with its extra specs; anything else names no profile.
    """
    try:
        if not flavor or not flavor.obj_attr_is_set('extra_specs'):
            return None
    except AttributeError:  # not a nova.objects.Flavor
        return None
    value = flavor.extra_specs.get(DP_EXTRA_SPEC)
    # An empty value names no profile (the flavor boots as upstream's).
    return value if isinstance(value, str) and value else None


def entries(instance, prefix, load=True):
    """The list kept in system metadata as ``<prefix><n>`` keys (none for
    an instance made without system metadata and without a context).

    :param load: False: none either when the instance's system metadata
        is not loaded (see :func:`has_accelerators`).
    """
    meta = _meta(instance, load)
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


def parked(instance, load=True):
    """[(arq_uuid, device_rp_uuid, hostname)] of the parked ARQs;
    ``load`` as :func:`entries`."""
    return [tuple(entry.split(' ', 2))
            for entry in entries(instance, PARKED_PREFIX, load)]


def unbound(instance, load=True):
    """The ARQs of the instance that Cyborg may not tie to it: parked by a
    resize, retired after a failed deletion, or created for a live
    migration's destination (bound, if at all, under the other owner).
    Deleting the server deletes them by UUID. ``load`` as
    :func:`entries`."""
    return ([arq_uuid for arq_uuid, _rp, _host in parked(instance, load)] +
            entries(instance, RETIRED_PREFIX, load) +
            entries(instance, LIVE_DEST_PREFIX, load))


def attached(instance, load=True):
    """[(arq_uuid, device profile)] of the accelerators attached with
    addAccelerator (nova_cyborg.flows.attach.compute); ``load`` as
    :func:`entries`."""
    return [tuple(entry.split(' ', 1))
            for entry in entries(instance, ATTACHED_PREFIX, load)]


def attached_profiles(instance):
    """The device profiles attached with addAccelerator
    (nova_cyborg.flows.attach.compute).
    """
    return sorted({entry.split(' ', 1)[1]
                   for entry in entries(instance, ATTACHED_PREFIX)})


def has_accelerators(instance, load=True):
    """True if ARQs may be bound to the instance: its flavor names a
    device profile, or accelerators were attached with addAccelerator.

    :param load: False where Nova always hands over the instance with its
        system metadata loaded: an instance without it then has no records
        to read, and reading them must not cost a server without
        accelerators a database (or conductor) round trip. The instances
        of nova-compute's init_host (``expected_attrs``), and those the API
        loads (``compute.api.API.get`` adds ``system_metadata``) and sends
        to the conductor and the computes, all have it. Nor is the flavor
        loaded then: nova-api loads it for every server action it checks
        (``block_accelerators``), before the conductor gets the server.
    """
    flavor = (instance.flavor if load or instance.obj_attr_is_set('flavor')
              else None)
    return bool(flavor_profile(flavor) or
                entries(instance, ATTACHED_PREFIX, load))


def hostnames(instance):
    """The names Cyborg may know the instance's current host by: ARQs
    are bound with the compute node's name (the conductor, a move) or the
    service's host name."""
    return {name for name in (instance.host, instance.node) if name}


def on_host(instance, arqs):
    """The ARQs of ``arqs`` bound to the host the instance is on now."""
    here = hostnames(instance)
    return [arq for arq in arqs if arq.get('hostname') in here]


def _meta(instance, load=True):
    """The system metadata, or {} for an instance made without it and
    without a context to load it (one Nova never saved), and with
    ``load`` False for any instance without it loaded."""
    if not instance.obj_attr_is_set('system_metadata') and (
            not load or getattr(instance, '_context', None) is None):
        return {}
    return instance.system_metadata


def alias(instance_uuid):
    """The second UUID a server's ARQs may be bound under in Cyborg."""
    return str(uuid.uuid5(ALIAS_NAMESPACE, str(instance_uuid)))


def owners(instance_uuid):
    """Both UUIDs a server's ARQs may be bound under: its own, its alias."""
    return (instance_uuid, alias(instance_uuid))


def holders(instance):
    """The owners the server's ARQs may be bound under, for deleting them
    all: its current owner (:func:`arq_owner`), and the other one only
    where its system metadata shows a live migration's traces, an owner
    record (the alias holds them, or did) or the destination's ARQs of one
    under way. A server that never live-migrated holds ARQs under its own
    UUID only: one delete. The ARQs a finished live migration could not
    delete from the other owner are retired (:func:`unbound`), and go by
    UUID.
    """
    meta = _meta(instance)
    if OWNER_KEY in meta or entries(instance, LIVE_DEST_PREFIX):
        return owners(instance.uuid)
    return (arq_owner(instance),)


def arq_owner(instance):
    """The UUID the server's ARQs are bound under in Cyborg now.

    Anything but the server's alias recorded in its system metadata means
    the server's own UUID.
    """
    owner = _meta(instance).get(OWNER_KEY)
    return owner if owner == alias(instance.uuid) else instance.uuid


def other_owner(instance):
    """The owner that holds none of the server's ARQs: a live migration
    binds the destination's ARQs under it (Cyborg binds none for an
    instance UUID that has ARQs)."""
    mine, its_alias = owners(instance.uuid)
    return its_alias if arq_owner(instance) == mine else mine


def own_arqs(instance):
    """Record that the server's own UUID holds its ARQs (not saved).

    Called once ARQs are bound under the server's UUID: Cyborg bound them,
    so none is left under the alias.

    :returns: True if that changed the record (the caller saves).
    """
    return _meta(instance).pop(OWNER_KEY, None) is not None


def set_owner(instance, owner):
    """Record that the server's ARQs are bound under ``owner`` (not saved).

    :raises: ValueError if ``owner`` is neither the server's UUID nor its
        alias.
    """
    if owner not in owners(instance.uuid):
        raise ValueError('%s is not an owner of the ARQs of instance %s'
                         % (owner, instance.uuid))
    if owner == instance.uuid:
        instance.system_metadata.pop(OWNER_KEY, None)
    else:
        instance.system_metadata[OWNER_KEY] = owner


def remember_retired(instance, arq_uuids):
    """Keep ARQs that must be deleted but could not be: they are deleted
    at the instance's next move, or with it
    (nova_cyborg.flows.cleanup.delete)."""
    retired = entries(instance, RETIRED_PREFIX)
    store(instance, RETIRED_PREFIX,
          retired + [u for u in arq_uuids if u not in retired])
    instance.save()


def remember_retired_quietly(instance, arq_uuids):
    """:func:`remember_retired`, never raising: for ARQs Cyborg could not
    delete as a build fails, which deleting the server must delete (no
    longer bound to the instance, they would be out of reach of a delete
    by instance). A failure is logged; the build's own error stands."""
    arq_uuids = [u for u in arq_uuids or () if isinstance(u, str)]
    if not arq_uuids:
        return
    try:
        remember_retired(instance, arq_uuids)
    except Exception as e:  # noqa: B902 (cleanup must not mask the error)
        LOG.error('Could not remember ARQs %(arqs)s for deletion with the '
                  'server: %(err)s', {'arqs': ','.join(arq_uuids), 'err': e},
                  instance=instance)


def early_arqs(build_request):
    """The UUIDs of the ARQs created while the scheduler ran that
    nova_cyborg.flows.boot.early_arqs recorded in ``build_request``."""
    instance = build_request.instance
    if not instance.obj_attr_is_set('system_metadata'):
        return []
    return entries(instance, EARLY_PREFIX)
