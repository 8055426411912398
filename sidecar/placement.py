"""The few Placement calls the sidecar makes itself.

While an FPGA is being reprogrammed its inventory is fully reserved so that
nothing is scheduled to it, and its function traits are replaced once the
new bitstream runs. Every write carries the provider generation; on a
generation conflict the provider is read again and the write retried, a
bounded number of times.
"""

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import loading as ks_loading
from oslo_log import log as logging

from sidecar import exception

LOG = logging.getLogger(__name__)

GROUP = 'placement'
# 1.26: an inventory's reserved may equal its total.
MICROVERSION = '1.26'
MAX_ATTEMPTS = 5
CONCURRENT_UPDATE = 'placement.concurrent_update'


class _Conflict(Exception):
    """A write lost a generation race; read again and retry."""


class PlacementClient:
    """Placement calls on a keystoneauth1 Adapter from ``[placement]``."""

    def __init__(self, conf):
        session = ks_loading.load_session_from_conf_options(conf, GROUP)
        auth = ks_loading.load_auth_from_conf_options(conf, GROUP)
        self.adapter = ks_loading.load_adapter_from_conf_options(
            conf, GROUP, session=session, auth=auth, raise_exc=False,
            default_microversion=MICROVERSION,
            client_name='nova-cyborg-sidecar')

    # HTTP ------------------------------------------------------------------

    def _request(self, method, url, **kwargs):
        try:
            return self.adapter.request(url, method, **kwargs)
        except ksa_exc.ClientException as e:
            raise exception.PlacementError(
                reason='Placement is unreachable (%s %s): %s'
                % (method, url, e))

    def _call(self, method, url, ok=(200,), **kwargs):
        resp = self._request(method, url, **kwargs)
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

    def set_total(self, rp_uuid, resource_class, total):
        """Make the ``resource_class`` inventory of ``rp_uuid`` offer
        ``total`` units, as cyborg-conductor writes it (``total`` and
        ``max_unit``; ``reserved`` is capped at the total). An inventory
        that is not there is left alone. Returns True if it was changed.
        """
        url = self._inventories_url(rp_uuid)

        def put():
            body = self._call('GET', url).json()
            inventories = body.get('inventories', {})
            inv = inventories.get(resource_class)
            if inv is None or (inv['total'], inv.get('max_unit')) == (
                    total, total):
                return False
            new = dict(inventories)
            new[resource_class] = dict(
                inv, total=total, max_unit=total,
                reserved=min(inv.get('reserved', 0), total))
            self._call('PUT', url, json={
                'resource_provider_generation':
                    body['resource_provider_generation'],
                'inventories': new})
            return True

        changed = self._retrying(
            'setting the %s total of %s' % (resource_class, rp_uuid), put)
        if changed:
            LOG.warning('Provider %(rp)s offered a %(rc)s total other than '
                        'the %(total)d reported; set it',
                        {'rp': rp_uuid, 'rc': resource_class,
                         'total': total})
        return changed

    # Traits ----------------------------------------------------------------

    def _ensure_traits(self, traits):
        for trait in traits:
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
        self._ensure_traits(new_traits)
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
