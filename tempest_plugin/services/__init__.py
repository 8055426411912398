"""Service clients of the plugin, registered through get_service_clients.

All the client classes are exposed by this one module, as tempest's
client factory expects.
"""

from tempest_plugin.services.accelerator_client import AcceleratorClient
from tempest_plugin.services.server_accelerators_client import \
    ServerAcceleratorsClient

__all__ = ['AcceleratorClient', 'ServerAcceleratorsClient']
