"""Servers whose accelerator requests are bound under their alias.

A live migration binds the destination's ARQs under the server's alias
(:func:`nova_cyborg.model.bookkeeping.alias`), because Cyborg binds none for an
instance UUID that still holds ARQs, and the server's system metadata
records it (:data:`nova_cyborg.model.bookkeeping.OWNER_KEY`). They stay there
until the next live migration, which binds the new destination's ARQs
under the server's own UUID again. Upstream Nova looks ARQs up by the
server's UUID only: with the series reverted, such a server would start
without its devices, and its delete would leave its ARQs Bound for good.
``nova-cyborg-patch revert`` therefore refuses while one exists
(:mod:`nova_cyborg_patch.aliases`).

Two scopes, as Nova's own services see the database:

- :func:`in_cells`: every cell, where the API database is configured
  (a controller); one indexed query of the system metadata per cell.
- :func:`on_host`: the servers of one compute host, through
  nova-conductor (a compute node has no database access).
"""

from nova import context as nova_context
from nova.db.main import api as main_db
from nova.db.main import models
from nova import objects

from nova_cyborg.model import bookkeeping


@main_db.pick_context_manager_reader
def _owner_records(context):
    """``(instance uuid, recorded owner)`` of the cell's live servers."""
    return main_db.model_query(
        context, models.InstanceSystemMetadata,
        (models.InstanceSystemMetadata.instance_uuid,
         models.InstanceSystemMetadata.value),
        read_deleted='no').filter_by(key=bookkeeping.OWNER_KEY).all()


def _aliased(records):
    return sorted(uuid for uuid, owner in records
                  if owner == bookkeeping.alias(uuid))


def in_cells(context):
    """Servers of every cell whose ARQs are under their alias.

    :returns: a list of Instance objects, cell by cell.
    """
    found = []
    for cell in objects.CellMappingList.get_all(context):
        with nova_context.target_cell(context, cell) as cctxt:
            uuids = _aliased(_owner_records(cctxt))
            if uuids:
                found.extend(objects.InstanceList.get_by_filters(
                    cctxt, {'uuid': uuids, 'deleted': False},
                    sort_keys=['uuid'], sort_dirs=['asc']))
    return found


def on_host(context, host):
    """Servers of compute ``host`` whose ARQs are under their alias."""
    servers = objects.InstanceList.get_by_host(
        context, host, expected_attrs=['system_metadata'])
    return sorted((i for i in servers
                   if bookkeeping.arq_owner(i) != i.uuid),
                  key=lambda i: i.uuid)
