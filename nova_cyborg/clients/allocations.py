"""Placement: allocate a device profile to a server where it already runs.

Used when an accelerator is attached to an existing server: the profile's
request groups are asked of Placement inside the tree of the server's
compute node, and the chosen candidate is added to the server's
allocation (retrying on a consumer generation conflict). Removing puts the
allocation back as it was before.

:func:`free` deletes an instance's whole allocation when a host failed its
accelerators (nova_cyborg.steps.bound_arqs before a reschedule,
nova_cyborg.flows.boot.conductor after a failed bind). Placement can answer 500
to that DELETE (a database deadlock was seen) or be briefly unreachable: it is
retried ``FREE_ATTEMPTS`` times with a doubling backoff, and then fails with an
error that says why, so that the caller ends the build in ERROR with that
fault instead of leaving the server in BUILD.
"""

import json
import time
import urllib.parse

from oslo_log import log as logging

from nova import exception as nova_exception
from nova.scheduler.client import report

from nova_cyborg import exception
from nova_cyborg.i18n import _

LOG = logging.getLogger(__name__)

#: mappings (1.34), in_tree per group (1.31), consumer generations (1.28).
CANDIDATES_VERSION = '1.36'
ALLOCATIONS_VERSION = '1.28'
RETRIES = 3
#: Attempts to delete an allocation, and the first pause between two
#: (doubled after each failure): 0.5 + 1 + 2 s at most in all.
FREE_ATTEMPTS = 4
FREE_BACKOFF = 0.5


class AllocationFreeFailed(nova_exception.NovaException):
    """Placement did not delete the instance's allocation, retries
    included."""

    msg_fmt = _("Placement did not free the allocation after %(attempts)d "
                "attempts: %(error)s")


def _error_text(exc):
    """What Placement said, without the report client's wrapping."""
    text = (getattr(exc, 'kwargs', None) or {}).get('error')
    if isinstance(text, str):
        try:
            errors = json.loads(text).get('errors')
            text = errors[0]['detail']
        except (ValueError, AttributeError, LookupError, TypeError):
            pass
    if not isinstance(text, str) or not text.strip():
        text = str(exc) or type(exc).__name__
    return ' '.join(text.split())


def _suffix(group):
    return '_' + group.requester_id


def candidates_query(groups, tree_uuid):
    """The allocation candidates query for ``groups`` in one tree."""
    params = [('group_policy', 'none'), ('limit', '16')]
    for group in groups:
        suffix = _suffix(group)
        params.append(('resources' + suffix, ','.join(
            '%s:%d' % (rc, amount)
            for rc, amount in sorted(group.resources.items()))))
        traits = sorted(group.required_traits) + [
            '!' + trait for trait in sorted(group.forbidden_traits)]
        if traits:
            params.append(('required' + suffix, ','.join(traits)))
        params.append(('in_tree' + suffix, tree_uuid))
    return urllib.parse.urlencode(params)


def _fail(msg):
    return exception.AcceleratorAttachFailed(reason=msg)


def _choose(reportclient, context, groups, tree_uuid):
    resp = reportclient.get(
        '/allocation_candidates?' + candidates_query(groups, tree_uuid),
        version=CANDIDATES_VERSION, global_request_id=context.global_id)
    if resp is None or resp.status_code != 200:
        raise _fail(_('Placement answered %s to the allocation candidates '
                      'query') % getattr(resp, 'status_code', None))
    requests = resp.json().get('allocation_requests') or []
    if not requests:
        raise _fail(_('no free device on this host matches the device '
                      'profile'))
    chosen = requests[0]
    mapping = {suffix[1:]: rps
               for suffix, rps in chosen.get('mappings', {}).items()}
    return chosen['allocations'], mapping


def _combine(current, delta, sign):
    result = {rp: dict(alloc['resources'])
              for rp, alloc in current.items()}
    for rp, alloc in delta.items():
        resources = result.setdefault(rp, {})
        for rc, amount in alloc['resources'].items():
            left = resources.get(rc, 0) + sign * amount
            if left > 0:
                resources[rc] = left
            else:
                resources.pop(rc, None)
        if not resources:
            del result[rp]
    return {rp: {'resources': res} for rp, res in result.items()}


def _update(reportclient, context, instance, delta, sign):
    for _attempt in range(RETRIES):
        current = reportclient.get_allocs_for_consumer(context,
                                                       instance.uuid)
        body = {'allocations': _combine(current.get('allocations', {}),
                                        delta, sign),
                'consumer_generation': current.get('consumer_generation'),
                'project_id': instance.project_id,
                'user_id': instance.user_id}
        resp = reportclient.put('/allocations/%s' % instance.uuid, body,
                                version=ALLOCATIONS_VERSION,
                                global_request_id=context.global_id)
        if resp is not None and resp.status_code == 204:
            return
        text = getattr(resp, 'text', '')
        if resp is None or resp.status_code != 409 or (
                'consumer generation conflict' not in text):
            raise _fail(_('Placement refused the allocation: %s')
                        % (text or getattr(resp, 'status_code', None))[:300])
        LOG.info('Allocation of %s changed meanwhile; retrying',
                 instance.uuid)
    raise _fail(_('the allocation kept changing in Placement'))


def add(reportclient, context, instance, groups, tree_uuid):
    """Allocate ``groups`` in ``tree_uuid`` to the instance.

    :returns: (added, mapping): the allocations added, as Placement writes
        them ({rp: {'resources': {rc: n}}}), and {requester_id: [rp]}.
    :raises: AcceleratorAttachFailed
    """
    added, mapping = _choose(reportclient, context, groups, tree_uuid)
    _update(reportclient, context, instance, added, 1)
    LOG.info('Added %s to the allocation', added, instance=instance)
    return added, mapping


def remove(reportclient, context, instance, added):
    """Take ``added`` (from :func:`add`) out of the instance's allocation.

    :raises: AcceleratorAttachFailed
    """
    _update(reportclient, context, instance, added, -1)
    LOG.info('Removed %s from the allocation', added, instance=instance)


def free(context, instance_uuid, sleep=time.sleep):
    """Delete the whole allocation of ``instance_uuid`` in Placement.

    Placement errors (HTTP 5xx, a deadlock in its database) and failures to
    reach it are retried ``FREE_ATTEMPTS`` times with a doubling backoff.

    :returns: True if an allocation was deleted, False if there was none.
    :raises: AllocationFreeFailed after the last attempt, naming its error.
    """
    client = report.report_client_singleton()
    pause = FREE_BACKOFF
    for attempt in range(1, FREE_ATTEMPTS + 1):
        try:
            return client.delete_allocation_for_instance(
                context, instance_uuid, force=True)
        except Exception as exc:  # noqa: B902 (5xx, unreachable: retried)
            error = _error_text(exc)
            if attempt == FREE_ATTEMPTS:
                raise AllocationFreeFailed(attempts=attempt,
                                           error=error[:100])
            LOG.warning('Placement did not delete the allocation of '
                        '%(uuid)s (attempt %(n)d of %(max)d, next in '
                        '%(pause).1f s): %(err)s',
                        {'uuid': instance_uuid, 'n': attempt,
                         'max': FREE_ATTEMPTS, 'pause': pause,
                         'err': error})
            sleep(pause)
            pause *= 2
