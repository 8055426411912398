"""The addAccelerator and removeAccelerator server actions of nova-cyborg.

``POST /servers/{server_id}/action`` with ``{"addAccelerator":
{"device_profile": "<name>"}}`` (or ``removeAccelerator``) answers 202
with no body; nova-compute then does the work, recorded as an instance
action of the same name whose event (``compute_add_accelerator``,
``compute_remove_accelerator``) ends in Success or Error. The actions
stand outside Nova's microversions (see doc/source/attach.rst).
"""

from oslo_serialization import jsonutils as json
from tempest.lib.common import rest_client
from tempest.lib.services.compute import base_compute_client

ADD = 'addAccelerator'
REMOVE = 'removeAccelerator'

#: The instance action event of each action.
EVENTS = {ADD: 'compute_add_accelerator',
          REMOVE: 'compute_remove_accelerator'}


class ServerAcceleratorsClient(base_compute_client.BaseComputeClient):

    def _action(self, server_id, action, device_profile):
        body = json.dumps({action: {'device_profile': device_profile}})
        resp, body = self.post('servers/%s/action' % server_id, body)
        self.expected_success(202, resp.status)
        return rest_client.ResponseBody(resp)

    def add_accelerator(self, server_id, device_profile):
        """Attach the accelerators of ``device_profile`` to the server."""
        return self._action(server_id, ADD, device_profile)

    def remove_accelerator(self, server_id, device_profile):
        """Detach the accelerators of ``device_profile``."""
        return self._action(server_id, REMOVE, device_profile)
