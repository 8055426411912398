"""A client for the Cyborg v2 API: device profiles, ARQs, deployables."""

from urllib import parse

from oslo_serialization import jsonutils as json
from tempest.lib.common import rest_client


class AcceleratorClient(rest_client.RestClient):
    """Cyborg v2, as Nova and an administrator use it.

    The catalog endpoint may or may not end with ``/v2``: ``api_version``
    makes the base URL end with it either way.
    """

    api_version = 'v2'

    def _get(self, url, **params):
        if params:
            url += '?%s' % parse.urlencode(params)
        resp, body = self.get(url)
        self.expected_success(200, resp.status)
        return rest_client.ResponseBody(resp, json.loads(body))

    # Device profiles

    def create_device_profile(self, name, groups, description=None):
        """Create one device profile; return it (a dict)."""
        profile = {'name': name, 'groups': groups}
        if description is not None:
            profile['description'] = description
        resp, body = self.post('device_profiles', json.dumps([profile]))
        self.expected_success(201, resp.status)
        return rest_client.ResponseBody(resp, json.loads(body))

    def list_device_profiles(self, **params):
        """``{"device_profiles": [...]}``; ``name=a,b`` filters by name."""
        return self._get('device_profiles', **params)

    def show_device_profile(self, uuid):
        """``{"device_profile": {...}}``."""
        return self._get('device_profiles/%s' % uuid)

    def delete_device_profile(self, uuid):
        resp, body = self.delete('device_profiles/%s' % uuid)
        self.expected_success(204, resp.status)
        return rest_client.ResponseBody(resp, body)

    # Accelerator requests (ARQs)

    def list_accelerator_requests(self, **params):
        """``{"arqs": [...]}``; ``instance=<server uuid>`` filters."""
        return self._get('accelerator_requests', **params)

    def show_accelerator_request(self, uuid):
        """The ARQ's fields at the top level of the body."""
        return self._get('accelerator_requests/%s' % uuid)

    # Deployables

    def list_deployables(self, **params):
        """``{"deployables": [...]}``."""
        return self._get('deployables', **params)
