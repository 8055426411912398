"""Evacuation in a mixed cloud: hosts really down, an unpatched one up.

The tempest scenario ``test_mixed_versions`` has no way to stop a host:
it evacuates with the source up, which nova-api refuses before it looks
at the source. Here the source is stopped and forced down (``python -m
localcloud host stop``), as before a real evacuation. Skipped unless the
cloud runs an unpatched compute (``python -m localcloud up
--unpatched-computes 1``; ``tox -e tempest`` stops it before this stage).

* A server whose flavor names a device profile, its patched host down:
  an evacuation to the unpatched compute is refused with 409 naming the
  host and ``CUSTOM_NOVA_CYBORG_1_0``; nothing changes (same host, same
  Bound accelerator requests on the same providers, same allocation), and
  once its host is back the server runs there with its devices.
* A server without accelerators on the unpatched compute, that host
  down: evacuated to a patched host, as upstream Nova does.
"""

from localcloud import procs
from tests.cloud import base

TRAIT = 'CUSTOM_NOVA_CYBORG_1_0'
#: Evacuation without ``force`` (2.29 to 2.67 have it; 2.68 drops it).
EVACUATE_MICROVERSION = '2.68'


class MixedEvacuateTest(base.CloudTestCase):

    def setUp(self):
        # Before the owner's project is made: the tempest env skips it.
        running = procs.running(self.layout) if self.layout else {}
        old = [h for h in getattr(self.layout, 'unpatched_hosts', [])
               if h in running]
        if not old:
            self.skipTest('no unpatched compute runs in this cloud '
                          '("python -m localcloud up --unpatched-computes '
                          '1")')
        super().setUp()
        self.old = old[0]
        self.patched = [h for h in self.layout.hosts
                        if h not in self.layout.unpatched_hosts]

    def evacuate(self, server_id, host=None):
        body = {'evacuate': {'host': host} if host else {}}
        return self.admin.compute.post(
            '/servers/%s/action' % server_id, json=body,
            microversion=EVACUATE_MICROVERSION)

    def devices(self, server_id):
        """(host, {ARQ: (state, provider, hostname)}, allocation)."""
        return (self.server(server_id)['OS-EXT-SRV-ATTR:host'],
                {arq['uuid']: (arq['state'], arq['device_rp_uuid'],
                               arq['hostname'])
                 for arq in self.arqs(server_id)},
                self.allocations(server_id))

    def plain_flavor(self):
        flavor = self.admin.compute.create_flavor(
            name=base._name('plain'), ram=256, vcpus=1, disk=1)
        self.addCleanup(self.admin.compute.delete_flavor, flavor)
        return flavor.id

    def wait_on(self, server_id, host):
        base.wait_until(
            lambda: (self.server(server_id)['OS-EXT-SRV-ATTR:host'] ==
                     host and self.server(server_id)['status'] ==
                     'ACTIVE' and not self.server(server_id)[
                         'OS-EXT-STS:task_state']),
            'server %s ACTIVE on %s' % (server_id, host))

    def test_flavor_accelerators_not_evacuated_to_unpatched(self):
        server = self.boot(self.create_accelerator_flavor())
        source = server['OS-EXT-SRV-ATTR:host']
        self.assertIn(source, self.patched)
        before = self.devices(server['id'])
        self.assertEqual(1, len(before[1]), before)
        self.assertEqual({'Bound'}, {s for s, _rp, _h in before[1].values()})
        self.stop_host(source)

        response = self.evacuate(server['id'], self.old)
        self.assertEqual(409, response.status_code, response.text)
        self.assertIn(self.old, response.text)
        self.assertIn(TRAIT, response.text)
        self.assertEqual(before, self.devices(server['id']))

        self.start_host(source)
        self.wait_for_status(server['id'], 'ACTIVE')
        self.assertEqual(before, self.devices(server['id']))
        self.assertEqual({self.handle(arq) for arq in self.arqs(
            server['id'])}, self.hostdevs(server['id']))

    def test_plain_server_evacuated_from_unpatched(self):
        server = self.boot(self.plain_flavor())
        if server['OS-EXT-SRV-ATTR:host'] != self.old:
            response = self.admin.compute.post(
                '/servers/%s/action' % server['id'], json={
                    'os-migrateLive': {'host': self.old,
                                       'block_migration': 'auto'}},
                microversion=EVACUATE_MICROVERSION)
            self.assertEqual(202, response.status_code, response.text)
            self.wait_on(server['id'], self.old)
        self.stop_host(self.old)
        target = self.patched[0]
        response = self.evacuate(server['id'], target)
        self.assertEqual(200, response.status_code, response.text)
        self.wait_on(server['id'], target)
        self.assertEqual([], self.arqs(server['id']))
