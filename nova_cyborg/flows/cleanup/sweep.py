"""One sweep of the accelerator requests of servers that are gone.

A server's ARQs outlive it when its delete could not reach Cyborg (the
delete is not failed for that, as upstream: the ARQs are named in
nova-compute's log). Nothing else would ever release their devices.

The sweep is run in one place, by the operator or a cron job
(``nova-cyborg-sweep-arqs``, see ``doc/source/operations.rst``), not by
every compute. It only touches ARQs this Nova can attribute to itself:
those bound to (or parked or retired for) a server of one of this Nova's
cells that is deleted. ARQs Cyborg holds for anything else, other Novas,
other services or ARQs never bound, are left alone.

Cyborg 17's ``GET /accelerator_requests`` has no paging (no ``limit`` nor
``marker``) and no filter but ``instance`` (and ``bind_state`` with it):
the sweep therefore pages through Nova's deleted servers instead, cell by
cell, ``batch`` at a time, and asks Cyborg about each server with
accelerators by ``?instance=<uuid>``: one bounded query per such server,
however many ARQs Cyborg holds in all. Only servers deleted within the
last ``since`` seconds are looked at (Nova's ``changes-since`` filter, on
the deleted row's last update); run it more often than that window, and
before ``nova-manage db archive_deleted_rows`` moves the rows away.
"""

import datetime

from nova import context as nova_context
from nova import objects
from oslo_log import log as logging
from oslo_utils import timeutils

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.flows.cleanup import delete as cleanup
from nova_cyborg.model import bookkeeping

LOG = logging.getLogger(__name__)

#: Deleted servers read from a cell database at a time.
BATCH = 200


def _sweep_instance(cyclient, instance):
    """Delete the ARQs of one deleted server; return how many it had."""
    # Under either owner: a live migration may have stopped between the
    # destination's bind (under the other owner) and its record.
    bound = [arq for owner in bookkeeping.owners(instance.uuid)
             for arq in cyclient.get_arqs_for_instance(owner)]
    if bound:
        cyclient.delete_arqs_for_instance(instance.uuid)
    unbound = cleanup.unbound_arqs_of_deleted(instance)
    failed = cyclient.delete_arqs_by_uuid(unbound) if unbound else []
    found = len(bound) + len(unbound) - len(failed)
    if found:
        LOG.info('Deleted %(n)d accelerator requests of deleted instance '
                 '%(uuid)s', {'n': found, 'uuid': instance.uuid})
    return found


def _deleted_instances(cctxt, since, batch):
    marker = None
    while True:
        page = objects.InstanceList.get_by_filters(
            # Not soft-deleted servers: they can still be restored.
            cctxt, {'deleted': True, 'soft_deleted': False,
                    'changes-since': since},
            sort_keys=['created_at', 'uuid'], sort_dirs=['asc', 'asc'],
            limit=batch, marker=marker,
            expected_attrs=['system_metadata', 'flavor'])
        yield from page
        if len(page) < batch:
            return
        marker = page[-1].uuid


def sweep(since, batch=BATCH):
    """Delete the ARQs of this Nova's servers deleted in the last ``since``
    seconds.

    :returns: a dict: ``servers`` (deleted servers that had accelerators,
        looked at), ``arqs`` (ARQs deleted), ``failed`` (UUIDs of servers
        Cyborg could not answer for; a later sweep tries again).
    """
    context = nova_context.get_admin_context(read_deleted='yes')
    cutoff = timeutils.utcnow() - datetime.timedelta(seconds=since)
    result = {'servers': 0, 'arqs': 0, 'failed': []}
    cyclient = nc_client.get_client(context)
    for cell in objects.CellMappingList.get_all(context):
        with nova_context.target_cell(context, cell) as cctxt:
            for instance in _deleted_instances(cctxt, cutoff, batch):
                if not cleanup.may_have_arqs(instance):
                    continue
                result['servers'] += 1
                try:
                    result['arqs'] += _sweep_instance(cyclient, instance)
                except exception.CyborgError as e:
                    LOG.error('Could not delete the accelerator requests '
                              'of deleted instance %(uuid)s: %(err)s',
                              {'uuid': instance.uuid, 'err': e})
                    result['failed'].append(instance.uuid)
    return result
