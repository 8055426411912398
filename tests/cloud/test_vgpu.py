"""A server with a vGPU in the local cloud.

The owner boots a server whose flavor asks for one vGPU (``resources:VGPU``)
of the hosts' mdev-capable GPUs (``up --gpus``, one a host by default),
which the sidecar's gpu driver reports. ACTIVE, its domain XML holds a
``<hostdev type='mdev'>`` naming the mdev of its one Bound ARQ (an MDEV
attach handle on its host), which the sidecar created on the host's
GPU; its allocation is that vGPU. Once the owner has deleted it: no ARQ,
no allocation, no domain, and the mdev is removed from the host. Every
wait has a deadline (``base``).
"""

from xml.etree import ElementTree

from tests.cloud import base
from tests.cloud import churn


class VgpuServerTest(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if not self.layout.gpus:
            self.skipTest('the cloud\'s hosts have no GPU (up --gpus 0)')

    def all_arqs(self, server_id):
        return [a for owner in churn.owners(server_id)
                for a in self.arqs(owner)]

    def mdev_hostdevs(self, server_id):
        """The mdev UUIDs of the domain XML's ``<hostdev type='mdev'>``."""
        root = ElementTree.parse(self.domain_file(server_id)).getroot()
        return [address.get('uuid') for address in root.findall(
            "./devices/hostdev[@type='mdev']/source/address")]

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

        def leftovers():
            domains = churn.read_domains(self.layout.domain_xml_dir)
            problems = churn.gone_problems(
                server_id, domains, self.all_arqs(server_id),
                self.allocations(server_id))
            mdevs = churn.mdevs(self.sysfs_roots())
            if mdevs != mdevs_before:
                problems.append('mdevs %s, before the boot %s' % (
                    mdevs, mdevs_before))
            return problems
        try:
            base.wait_until(lambda: not leftovers(),
                            'nothing left of server %s' % server_id,
                            timeout=60)
        except AssertionError:
            self.assertEqual([], leftovers())
