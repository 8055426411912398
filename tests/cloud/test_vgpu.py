"""A server with a vGPU in the local cloud.

The owner boots a server whose flavor asks for one vGPU (``resources:VGPU``)
of the hosts' mdev-capable GPUs (``up --gpus``, one a host by default),
which the sidecar's gpu driver reports. ACTIVE, its domain XML holds a
``<hostdev type='mdev'>`` naming the mdev of its one Bound ARQ (an MDEV
attach handle on its host), which the sidecar created on the host's
GPU; its allocation is that vGPU. Once the owner has deleted it: no ARQ,
no allocation, no domain, and the mdev is removed from the host.

The admin cold-migrates such a server and confirms: its mdev on the new
host, none left on the old; or reverts: back on its host, with the mdev of
its ARQ bound there again, none left on the other. Every wait has a
deadline (``base``).
"""

from xml.etree import ElementTree

from tests.cloud import base
from tests.cloud import churn


class VgpuServerTest(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if not self.layout.gpus:
            self.skipTest('the cloud\'s hosts have no GPU (up --gpus 0)')

    def mdev_hostdevs(self, server_id):
        """The mdev UUIDs of the domain XML's ``<hostdev type='mdev'>``."""
        root = ElementTree.parse(self.domain_file(server_id)).getroot()
        return [address.get('uuid') for address in root.findall(
            "./devices/hostdev[@type='mdev']/source/address")]

    def action(self, server_id, body, expect=202):
        response = self._compute(self.admin, 'post',
                                 '/servers/%s/action' % server_id,
                                 json=body)
        self.assertEqual(expect, response.status_code, response.text)

    def problems(self, server_id, profile):
        """What is wrong with the server, its vGPU and its mdev."""
        server = self.server(server_id)
        host = server['OS-EXT-SRV-ATTR:host']
        arqs = self.all_arqs(server_id)
        problems = churn.server_problems(
            server, churn.read_domains(self.layout.domain_xml_dir).get(
                server_id), arqs, self.allocations(server_id),
            {profile: 'VGPU'})
        held = [a['attach_handle_uuid'].lower() for a in churn.bound(arqs)]
        mdevs = churn.mdevs(self.sysfs_roots())
        if len(held) != 1 or held[0] not in mdevs.get(host, []):
            problems.append('server %s on %s: Bound mdevs %s, the hosts\' '
                            'mdevs %s' % (server_id, host, held, mdevs))
        others = {h: m for h, m in mdevs.items() if h != host and m}
        if others:
            problems.append('mdevs left on other hosts: %s' % others)
        return problems

    def settled(self, server_id, status):
        def reached():
            server = self.server(server_id)
            if server['status'] == 'ERROR':
                self.fail('server %s went to ERROR: %s' % (
                    server_id, server.get('fault')))
            return (server['status'] == status and
                    not server['OS-EXT-STS:task_state'])
        base.wait_until(reached,
                        'server %s %s, no task' % (server_id, status))
        return self.server(server_id)['OS-EXT-SRV-ATTR:host']

    def test_cold_migration_confirmed(self):
        profile = self._profile_of(base.VGPU_GROUPS)
        server_id = self.boot(self.create_flavor(profile))['id']
        source = self.settled(server_id, 'ACTIVE')
        self.assertEqual([], self.problems(server_id, profile))
        self.action(server_id, {'migrate': None})
        self.assertNotEqual(source, self.settled(server_id, 'VERIFY_RESIZE'))
        self.action(server_id, {'confirmResize': None}, expect=204)
        self.assertNotEqual(source, self.settled(server_id, 'ACTIVE'))
        self.wait_no_problems(server_id, profile, 'moved with its vGPU')

    def test_cold_migration_reverted(self):
        profile = self._profile_of(base.VGPU_GROUPS)
        server_id = self.boot(self.create_flavor(profile))['id']
        source = self.settled(server_id, 'ACTIVE')
        self.action(server_id, {'migrate': None})
        self.settled(server_id, 'VERIFY_RESIZE')
        self.action(server_id, {'revertResize': None})
        self.assertEqual(source, self.settled(server_id, 'ACTIVE'))
        self.wait_no_problems(server_id, profile, 'reverted with its vGPU')

    def wait_no_problems(self, server_id, profile, what):
        try:
            base.wait_until(lambda: not self.problems(server_id, profile),
                            'server %s %s' % (server_id, what), timeout=60)
        except AssertionError:
            self.assertEqual([], self.problems(server_id, profile))

    def test_boot_and_delete(self):
        profile = self._profile_of(base.VGPU_GROUPS)
        flavor = self.create_flavor(profile)
        mdevs_before = churn.mdevs(self.sysfs_roots())

        server = self.boot(flavor)
        server_id = server['id']
        host = server['OS-EXT-SRV-ATTR:host']
        arqs = self.all_arqs(server_id)
        (arq,) = churn.bound(arqs)
        self.assertEqual(('MDEV', host),
                         (arq['attach_handle_type'], arq['hostname']), arq)
        mdev = arq['attach_handle_uuid'].lower()
        self.assertEqual([mdev], [u.lower()
                                  for u in self.mdev_hostdevs(server_id)])
        self.assertIn(mdev, churn.mdevs(self.sysfs_roots()).get(host, []))
        domains = churn.read_domains(self.layout.domain_xml_dir)
        self.assertEqual([], churn.server_problems(
            server, domains.get(server_id), arqs,
            self.allocations(server_id), {profile: 'VGPU'}))
        self.assertEqual(
            {(arq['device_rp_uuid'], 'VGPU'): 1},
            churn.device_allocation(self.allocations(server_id)))

        self.delete(server_id)

        self.assert_nothing_left([server_id], mdevs_before)
