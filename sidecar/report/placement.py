"""The few Placement calls the sidecar makes itself.

While an FPGA is being reprogrammed its inventory is fully reserved so that
nothing is scheduled to it, and its function traits are replaced once the
new bitstream runs. The reconciler (:mod:`sidecar.report.reconcile`) reads the
host's providers and repairs what cyborg-conductor left wrong. Every write
carries the provider generation; on a generation conflict the provider is
read again and the write retried, a bounded number of times.
"""

from keystoneauth1 import exceptions as ksa_exc
from oslo_log import log as logging

from sidecar import conf as sidecar_conf
from sidecar import exception

LOG = logging.getLogger(__name__)

GROUP = 'placement'
# 1.26: an inventory's reserved may equal its total.
MICROVERSION = '1.26'
# 1.37: a provider's parent may be changed.
REPARENT_MICROVERSION = '1.37'
MAX_ATTEMPTS = 5
CONCURRENT_UPDATE = 'placement.concurrent_update'


class _Conflict(Exception):
    """A write lost a generation race; read again and retry."""


class PlacementClient:
    """Placement calls on a keystoneauth1 Adapter from ``[placement]``."""

    def __init__(self, conf):
        self.adapter = sidecar_conf.adapter(
            conf, GROUP, default_microversion=MICROVERSION)

    # HTTP ------------------------------------------------------------------

    def _request(self, method, url, **kwargs):
        try:
            return self.adapter.request(url, method, **kwargs)
        except ksa_exc.ClientException as e:
            raise exception.PlacementError(
                reason='Placement is unreachable (%s %s): %s'
                % (method, url, e))

    def _call(self, method, url, ok=(200,), **kwargs):
        return self._check(method, url, self._request(method, url, **kwargs),
                           ok)

    @staticmethod
    def _check(method, url, resp, ok=(200,)):
        if resp.status_code in ok:
            return resp
        if resp.status_code == 409 and _error_code(resp) == CONCURRENT_UPDATE:
            raise _Conflict()
        if resp.status_code == 404 and '/resource_providers/' in url:
            raise exception.PlacementError(
                reason='resource provider %s not found'
                % url.split('/')[2])
        raise exception.PlacementError(
            reason='%s %s answered HTTP %d: %s'
            % (method, url, resp.status_code, _error_detail(resp)))

    def _retrying(self, what, func):
        """Run ``func()`` until it does not raise _Conflict, at most
        MAX_ATTEMPTS times."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return func()
            except _Conflict:
                LOG.debug('Generation conflict %(what)s (attempt %(n)d)',
                          {'what': what, 'n': attempt})
        raise exception.PlacementError(
            reason='%s: the provider kept changing; gave up after %d '
            'generation conflicts' % (what, MAX_ATTEMPTS))

    # Providers -------------------------------------------------------------

    def find_provider(self, name):
        """The UUID of the provider named ``name``, or None."""
        resp = self._call('GET', '/resource_providers',
                          params={'name': name})
        providers = resp.json().get('resource_providers', [])
        return providers[0]['uuid'] if providers else None

    def providers_in_tree(self, root_uuid):
        """Every provider of the tree rooted at ``root_uuid``: dicts with
        ``uuid``, ``name``, ``generation`` and ``parent_provider_uuid``."""
        resp = self._call('GET', '/resource_providers',
                          params={'in_tree': root_uuid})
        return resp.json().get('resource_providers', [])

    def get_provider(self, rp_uuid):
        """The provider ``rp_uuid`` as Placement shows it, or None."""
        url = '/resource_providers/%s' % rp_uuid
        resp = self._request('GET', url)
        if resp.status_code == 404:
            return None
        return self._check('GET', url, resp).json()

    def create_provider(self, rp_uuid, name, parent_uuid):
        """Create the provider ``rp_uuid`` named ``name`` under
        ``parent_uuid``."""
        self._call('POST', '/resource_providers', json={
            'uuid': rp_uuid, 'name': name,
            'parent_provider_uuid': parent_uuid})
        LOG.info('Created resource provider %(name)s (%(rp)s) under '
                 '%(parent)s', {'name': name, 'rp': rp_uuid,
                                'parent': parent_uuid})

    def set_parent(self, rp_uuid, name, parent_uuid):
        """Move the provider ``rp_uuid`` under ``parent_uuid``."""
        self._call('PUT', '/resource_providers/%s' % rp_uuid,
                   json={'name': name, 'parent_provider_uuid': parent_uuid},
                   microversion=REPARENT_MICROVERSION)
        LOG.info('Moved resource provider %(name)s (%(rp)s) under '
                 '%(parent)s', {'name': name, 'rp': rp_uuid,
                                'parent': parent_uuid})

    def read_provider(self, rp_uuid):
        """``(inventories, traits)`` of ``rp_uuid``."""
        inventories = self._call(
            'GET', self._inventories_url(rp_uuid)).json().get(
                'inventories', {})
        traits = self._call(
            'GET', '/resource_providers/%s/traits' % rp_uuid).json().get(
                'traits', [])
        return inventories, set(traits)

    def allocations(self, rp_uuid):
        """``{consumer uuid: {resource class: amount}}`` of what is
        allocated on ``rp_uuid``."""
        body = self._call(
            'GET', '/resource_providers/%s/allocations' % rp_uuid).json()
        allocations = body.get('allocations')
        if not isinstance(allocations, dict):
            raise exception.PlacementError(
                reason='the allocations of %s are not an object' % rp_uuid)
        return {consumer: dict((alloc or {}).get('resources') or {})
                for consumer, alloc in allocations.items()}

    # Inventories -----------------------------------------------------------

    def _inventories_url(self, rp_uuid):
        return '/resource_providers/%s/inventories' % rp_uuid

    def _put_reserved(self, rp_uuid, reserved_of):
        """Read the inventories, set each one's reserved to
        ``reserved_of(rc, inventory)`` and write them back. Returns the
        reserved values read."""
        url = self._inventories_url(rp_uuid)
        body = self._call('GET', url).json()
        inventories = body.get('inventories', {})
        previous = {rc: inv.get('reserved', 0)
                    for rc, inv in inventories.items()}
        new = {}
        for rc, inv in inventories.items():
            inv = dict(inv)
            inv['reserved'] = reserved_of(rc, inv)
            new[rc] = inv
        if new != inventories:
            self._call('PUT', url, json={
                'resource_provider_generation':
                    body['resource_provider_generation'],
                'inventories': new})
        return previous

    def reserve_all(self, rp_uuid):
        """Set reserved = total on every inventory of ``rp_uuid``.

        Returns the reserved values before, ``{resource class: reserved}``,
        for :meth:`restore_reserved`.
        """
        previous = self._retrying(
            'reserving the inventory of %s' % rp_uuid,
            lambda: self._put_reserved(rp_uuid,
                                       lambda rc, inv: inv['total']))
        LOG.info('Reserved all inventory of provider %s', rp_uuid)
        return previous

    def restore_reserved(self, rp_uuid, previous):
        """Put back the reserved values :meth:`reserve_all` returned.

        Resource classes no longer in the inventory are skipped; a value is
        capped at the current total.
        """
        def reserved_of(rc, inv):
            if rc not in previous:
                return inv.get('reserved', 0)
            return min(previous[rc], inv['total'])

        self._retrying('restoring the reserved inventory of %s' % rp_uuid,
                       lambda: self._put_reserved(rp_uuid, reserved_of))
        LOG.info('Restored the reserved inventory of provider %s', rp_uuid)

    def set_inventory(self, rp_uuid, resource_class, total, reserved):
        """Make the ``resource_class`` inventory of ``rp_uuid`` offer
        ``total`` units with ``reserved`` of them reserved (``max_unit`` =
        ``total``, as cyborg-conductor writes it), creating it if it is not
        there; other inventories are kept. Returns True if it changed."""
        url = self._inventories_url(rp_uuid)

        def put():
            body = self._call('GET', url).json()
            inventories = body.get('inventories', {})
            old = inventories.get(resource_class)
            new_inv = dict(old or {}, total=total, max_unit=total,
                           reserved=min(reserved, total))
            if new_inv == old:
                return False
            self._call('PUT', url, json={
                'resource_provider_generation':
                    body['resource_provider_generation'],
                'inventories': dict(inventories,
                                    **{resource_class: new_inv})})
            return True

        self.ensure_resource_class(resource_class)
        return self._retrying(
            'setting the %s inventory of %s' % (resource_class, rp_uuid),
            put)

    def ensure_resource_class(self, resource_class):
        """Create the custom ``resource_class`` if it is not there."""
        if resource_class.startswith('CUSTOM_'):
            self._call('PUT', '/resource_classes/%s' % resource_class,
                       ok=(201, 204))

    # Traits ----------------------------------------------------------------

    def ensure_traits(self, traits):
        """Create the ``CUSTOM_`` traits among ``traits``. Idempotent: 201
        (created) and 204 (already there) both mean done, so hosts doing
        it at the same moment all succeed."""
        for trait in sorted(set(traits)):
            if trait.startswith('CUSTOM_'):
                self._call('PUT', '/traits/%s' % trait, ok=(201, 204))

    def _put_traits(self, rp_uuid, prefix, new_traits):
        url = '/resource_providers/%s/traits' % rp_uuid
        body = self._call('GET', url).json()
        current = set(body.get('traits', []))
        wanted = {t for t in current if not t.startswith(prefix)}
        wanted |= set(new_traits)
        if wanted != current:
            self._call('PUT', url, json={
                'resource_provider_generation':
                    body['resource_provider_generation'],
                'traits': sorted(wanted)})
        return sorted(wanted)

    def replace_traits_with_prefix(self, rp_uuid, prefix, new_traits):
        """Replace the traits of ``rp_uuid`` starting with ``prefix`` by
        ``new_traits``; other traits are kept. ``CUSTOM_`` traits are
        created first. Returns the provider's traits after the change."""
        if not prefix:
            raise exception.InvalidArgument(
                name='trait prefix', reason='it must not be empty')
        new_traits = list(new_traits)
        self.ensure_traits(new_traits)
        traits = self._retrying(
            'replacing the %s* traits of %s' % (prefix, rp_uuid),
            lambda: self._put_traits(rp_uuid, prefix, new_traits))
        LOG.info('Provider %(rp)s now has the %(prefix)s* traits %(traits)s',
                 {'rp': rp_uuid, 'prefix': prefix,
                  'traits': [t for t in traits if t.startswith(prefix)]})
        return traits


def _error_code(resp):
    try:
        return resp.json()['errors'][0].get('code')
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def _error_detail(resp):
    try:
        return resp.json()['errors'][0]['detail']
    except (ValueError, KeyError, IndexError, TypeError):
        return (resp.text or '').strip()[:200] or 'no detail'
