"""A compute reverted to unpatched Nova under a server with accelerators.

The one way a server with accelerators is on an unpatched compute: the
compute was reverted while the server ran there (``doc/source/upgrade.rst``,
"Running without nova-cyborg"). Here a patched host is restarted with its
nova-compute from pristine Nova (``python -m localcloud host restart
--unpatched``) and the operator removes its capability traits as the
upgrade guide says. Then:

* a live migration away from it is refused (400 naming the source and
  ``CUSTOM_NOVA_CYBORG_1_1``): an unpatched source would leave its
  accelerator requests Bound;
* a cold migration away from it is refused (409 naming the source and
  ``CUSTOM_NOVA_CYBORG_1_0``);
* nothing changed, and a hard reboot by the owner on the unpatched compute
  (upstream's code) gives the guest its devices again.

The host is restarted patched at the end; its traits come back. Run
against a mixed cloud only (``python -m localcloud up --unpatched-computes
1``), as ``test_mixed_evacuate`` (two host restarts: about two minutes).
"""

from localcloud import procs
from tests.cloud import base

PREFIX = 'CUSTOM_NOVA_CYBORG_'
MICROVERSION = '2.68'


class RevertedComputeTest(base.CloudTestCase):

    def setUp(self):
        # Before the owner's project is made: the tempest env skips it.
        running = procs.running(self.layout) if self.layout else {}
        if not [h for h in getattr(self.layout, 'unpatched_hosts', [])
                if h in running]:
            self.skipTest('not a mixed cloud with its unpatched compute '
                          'running ("python -m localcloud up '
                          '--unpatched-computes 1")')
        super().setUp()

    def node(self, host):
        return self._placement('/resource_providers?name=%s' % host)[
            'resource_providers'][0]['uuid']

    def remove_capability_traits(self, host):
        """What upgrade.rst asks of the operator of a reverted compute."""
        node = self.node(host)

        def removed():
            body = self._placement('/resource_providers/%s/traits' % node)
            kept = [t for t in body['traits'] if not t.startswith(PREFIX)]
            if kept == body['traits']:
                return True
            response = self.admin.placement.put(
                '/resource_providers/%s/traits' % node, json={
                    'traits': kept, 'resource_provider_generation':
                    body['resource_provider_generation']},
                microversion=base.PLACEMENT_MICROVERSION)
            return response.status_code == 200
        base.wait_until(removed, 'capability traits of %s removed' % host)

    def traits(self, host):
        return set(self._placement('/resource_providers/%s/traits' %
                                   self.node(host))['traits'])

    def action(self, server_id, body):
        return self.admin.compute.post('/servers/%s/action' % server_id,
                                       json=body, microversion=MICROVERSION)

    def devices(self, server_id):
        return (self.server(server_id)['OS-EXT-SRV-ATTR:host'],
                sorted((arq['uuid'], arq['state'], arq['device_rp_uuid'])
                       for arq in self.arqs(server_id)),
                {rp: allocation['resources'] for rp, allocation in
                 self.allocations(server_id).items()})

    def test_moves_from_a_reverted_compute_refused(self):
        server = self.boot(self.create_accelerator_flavor())
        host = server['OS-EXT-SRV-ATTR:host']
        self.assertNotIn(host, self.layout.unpatched_hosts)
        before = self.devices(server['id'])
        # Patched again at the end (its traits come back with it).
        self.addCleanup(self.localcloud, 'host', 'restart', host)
        out = self.localcloud('host', 'restart', '--unpatched', host)
        self.assertIn('(unpatched Nova)', out)
        self.remove_capability_traits(host)
        self.assertFalse({t for t in self.traits(host)
                          if t.startswith(PREFIX)})

        response = self.action(server['id'], {'os-migrateLive': {
            'host': None, 'block_migration': 'auto'}})
        self.assertEqual(400, response.status_code, response.text)
        self.assertIn('source host %s' % host, response.text)
        self.assertIn(PREFIX + '1_1', response.text)
        response = self.action(server['id'], {'migrate': None})
        self.assertEqual(409, response.status_code, response.text)
        self.assertIn('source host %s' % host, response.text)
        self.assertIn(PREFIX + '1_0', response.text)
        self.assertEqual(before, self.devices(server['id']))

        # Upstream's hard reboot on the unpatched compute: the devices
        # come back into the guest.
        response = self.owner.compute.post(
            '/servers/%s/action' % server['id'],
            json={'reboot': {'type': 'HARD'}},
            microversion=base.COMPUTE_MICROVERSION)
        self.assertEqual(202, response.status_code, response.text)
        base.wait_until(
            lambda: not self.server(server['id'])['OS-EXT-STS:task_state'],
            'hard reboot of %s' % server['id'])
        self.assertEqual('ACTIVE', self.server(server['id'])['status'])
        self.assertEqual(before, self.devices(server['id']))
        self.assertEqual({self.handle(arq) for arq in self.arqs(
            server['id'])}, self.hostdevs(server['id']))
