"""The two Cyborg API reads the sidecar makes before programming an FPGA.

Which function a server wants is not in the ``fpga_program`` call: it is in
the server's accelerator requests (ARQs) and their device profile. The
sidecar reads them with its own service user (``[cyborg]`` keystoneauth
options; an admin sees the ARQs of every project), relative to the
accelerator endpoint ``.../accelerator/v2`` as Nova does.
"""

from keystoneauth1 import exceptions as ksa_exc

from sidecar import conf as sidecar_conf
from sidecar import exception

GROUP = 'cyborg'
SERVICE_TYPE = 'accelerator'
API_VERSION = 'accelerator 2.0'


class AcceleratorClient:
    """Cyborg v2 API reads on a keystoneauth1 Adapter from ``[cyborg]``."""

    def __init__(self, conf):
        self.adapter = sidecar_conf.adapter(conf, GROUP)

    def _get(self, url, key, params=None):
        try:
            resp = self.adapter.get(
                url, params=params,
                headers={'OpenStack-API-Version': API_VERSION})
        except ksa_exc.ClientException as e:
            raise exception.CyborgError(
                reason='Cyborg is unreachable (GET %s): %s' % (url, e))
        if resp.status_code != 200:
            raise exception.CyborgError(
                reason='GET %s answered HTTP %d: %s' % (
                    url, resp.status_code, (resp.text or '').strip()[:200]))
        try:
            value = resp.json()[key]
        except (ValueError, KeyError, TypeError):
            value = None
        if not isinstance(value, list):
            raise exception.CyborgError(
                reason='GET %s: the answer has no %r list' % (url, key))
        return value

    def arqs_of(self, instance_uuid):
        """Every ARQ whose ``instance_uuid`` is ``instance_uuid``."""
        arqs = self._get('/accelerator_requests', 'arqs',
                         params={'instance': instance_uuid})
        # Cyborg filters by instance; a consumer that is not an instance
        # (a migration, another service) has none.
        return [arq for arq in arqs if isinstance(arq, dict) and
                arq.get('instance_uuid') == instance_uuid]

    def device_profile(self, name):
        """The device profile named ``name`` (a dict with ``groups``)."""
        profiles = self._get('/device_profiles', 'device_profiles',
                             params={'name': name})
        found = [p for p in profiles
                 if isinstance(p, dict) and p.get('name') == name]
        if len(found) != 1:
            raise exception.CyborgError(
                reason='%d device profiles are named %r' % (len(found),
                                                            name))
        return found[0]

    def deployables(self):
        """Every deployable cyborg-conductor records (``GET
        /deployables``), with its read-only ``bitstream_id``."""
        return self._get('/deployables', 'deployables')

    def all_arqs(self):
        """Every ARQ of every project (the service user is an admin)."""
        return self._get('/accelerator_requests', 'arqs')


def bound_arqs(cyborg, host):
    """The Bound ARQs of ``host`` (as their ``hostname`` says) that
    ``cyborg`` (an :class:`AcceleratorClient`) reads: what the restorers
    after a host reboot put back.

    :raises: SidecarError when Cyborg cannot be read.
    """
    return [arq for arq in cyborg.all_arqs()
            if isinstance(arq, dict) and arq.get('state') == 'Bound'
            and arq.get('hostname') == host]
