"""Neutron failing under a move: faults injected into Nova's Neutron API."""

import fixtures
from nova import exception as nova_exception
from nova.network import neutron

TARGET = 'nova.network.neutron.API.setup_networks_on_host'


class TeardownFails(fixtures.Fixture):
    """Nova's teardown of a server's networks on ``host`` fails, as when
    Neutron is unreachable while a revert tears the destination down
    (``setup_networks_on_host(..., teardown=True)``); every other call
    goes through. ``torn_down``: the servers whose teardown failed."""

    def __init__(self, host):
        super().__init__()
        self.host = host
        self.torn_down = []

    def _setUp(self):
        real = neutron.API.setup_networks_on_host

        def setup_networks_on_host(api, context, instance, host=None,
                                   teardown=False):
            if teardown and instance.host == self.host:
                self.torn_down.append(instance.uuid)
                raise nova_exception.NovaException(
                    'injected: Neutron unreachable')
            return real(api, context, instance, host=host,
                        teardown=teardown)

        self.useFixture(fixtures.MonkeyPatch(TARGET, setup_networks_on_host))
