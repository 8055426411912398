"""A compute host restarts under the running cloud, as operators do.

``python -m localcloud host stop|start`` stops the host's nova-compute and
sidecar (its domains and devices live on, as under libvirtd and the
kernel) and starts them again. Its devices and servers must come back as
they were, and a server deleted while its host was down must leave
nothing once the host is back.
"""

import os

from tests.cloud import base


class HostRestartTest(base.CloudTestCase):

    def _server_state(self, server_id):
        """What a restart must not change about a server."""
        arqs = self.arqs(server_id)
        return {
            'arqs': sorted((a['uuid'], a['state'], a['device_rp_uuid'],
                            a['hostname']) for a in arqs),
            'handles': sorted(self.handle(a) for a in arqs),
            'allocations': {rp: a['resources'] for rp, a in
                            self.allocations(server_id).items()},
        }

    def test_devices_and_servers_come_back_as_they_were(self):
        flavor = self.create_accelerator_flavor()
        server = self.boot(flavor)
        server_id, host = server['id'], server['OS-EXT-SRV-ATTR:host']
        providers = self.device_providers(host)
        # One FPGA provider a DFL port, one port a VF of the FPGA PFs.
        self.assertEqual(self.layout.vfs, sum(
            1 for _, _, inventories, _ in providers.values()
            if 'FPGA' in inventories), providers)
        before = self._server_state(server_id)
        arqs = before['arqs']
        self.assertEqual(1, len(arqs), arqs)
        self.assertEqual('Bound', arqs[0][1])
        self.assertIn(arqs[0][2], providers)
        self.assertEqual(set(before['handles']), self.hostdevs(server_id))
        self.assertEqual('running', self.diagnostics(server_id)['state'])

        self.stop_host(host)
        self.start_host(host)

        self.assertEqual(providers, self.device_providers(host))
        server = self.wait_for_status(server_id, 'ACTIVE')
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, server['OS-EXT-STS:power_state'])  # running
        # The restarted nova-compute finds the guest running.
        self.assertEqual('running', self.diagnostics(server_id)['state'])
        self.assertEqual('ACTIVE', self.server(server_id, self.owner)[
            'status'])
        self.assertEqual(before, self._server_state(server_id))
        self.assertEqual(set(before['handles']), self.hostdevs(server_id))

        # Nova uses the host as before: the owner deletes the server, and
        # nothing is left.
        self.delete(server_id)
        self.assertFalse(os.path.exists(self.domain_file(server_id)))
        self.assertEqual([], self.arqs(server_id))
        self.assertEqual({}, self.allocations(server_id))

    def test_server_deleted_while_its_host_is_down(self):
        flavor = self.create_accelerator_flavor()
        server = self.boot(flavor)
        server_id, host = server['id'], server['OS-EXT-SRV-ATTR:host']
        providers = self.device_providers(host)
        self.assertTrue(os.path.exists(self.domain_file(server_id)))

        self.stop_host(host)
        # Nova's API deletes a server of a host that is down by itself.
        self.delete(server_id)
        self.assertEqual([], self.arqs(server_id))
        self.assertEqual({}, self.allocations(server_id))
        # The host's libvirt still has the domain ...
        self.assertTrue(os.path.exists(self.domain_file(server_id)))

        self.start_host(host)

        # ... until nova-compute, back, destroys what belongs to no server.
        base.wait_until(
            lambda: not os.path.exists(self.domain_file(server_id)),
            'domain of deleted server %s removed from %s' % (
                server_id, host))
        self.assertEqual([], self.arqs(server_id))
        self.assertEqual({}, self.allocations(server_id))
        self.assertEqual(providers, self.device_providers(host))
