"""A resize to the same host (``allow_resize_to_same_host``) of a server
with accelerators.

The destination's ARQs are then bound to the source's host too, next to
the source's parked ones. A revert must tell them apart by what was parked,
not by host: Cyborg refuses to bind the parked ARQs again while the
destination's are still there (``Instance ... already has accelerator
requests``), and the server went to ERROR on revert whenever the scheduler
picked the same host.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402

from tests.functional import test_lifecycle  # noqa: E402


class SameHostResizeTest(test_lifecycle.ServerWithAcceleratorBase):
    """The owner's server on compute1, the only host, with two FPGA VFs:
    the resize gets the other one."""

    def setUp(self):
        super().setUp()
        self.flags(allow_resize_to_same_host=True)
        # The harness writes no disks (as in test_move).
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._get_instance_disk_info',
            return_value=[]))
        self.useFixture(fixtures.MockPatch('os.rename'))
        _name, self.other_flavor = self.create_profile_flavor(
            test_lifecycle.PROFILE)

    def resize_here(self):
        """Resize to ``other_flavor``; check VERIFY_RESIZE on compute1: a
        new ARQ Bound to compute1's other VF, in the guest; the source's
        parked (Unbound) and its VF still allocated (to the migration).

        :returns: the new ARQ.
        """
        old = {arq['uuid'] for arq in self.arqs}
        self._resize_server(self.server, self.other_flavor)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('VERIFY_RESIZE', server['status'])
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        # Unbound, the parked ARQ is no longer listed under the server.
        self.assertEqual({(u, 'Unbound') for u in old},
                         {(u, self.cyborg.get_arq(u)['state']) for u in old})
        new = self.cyborg.list_arqs(self.server['id'])
        self.assertEqual(set(), old & {arq['uuid'] for arq in new})
        self.assertEqual([('Bound', 'compute1')],
                         [(arq['state'], arq['hostname']) for arq in new])
        self.assertNotEqual(self.arq_bdf(self.arqs[0]),
                            self.arq_bdf(new[0]))
        self.assertEqual([self.arq_bdf(new[0])], self.hostdev_bdfs(server))
        self.assertEqual(2, sum(self._fpga_usage('compute1').values()))
        return new[0]

    def test_revert(self):
        self.resize_here()
        self._revert_resize(self.server)
        # The source's own ARQ, Bound again to its VF; the destination's
        # deleted, its VF free.
        server = self.assert_running_on('compute1')
        self.assertEqual([a['uuid'] for a in self.arqs],
                         [a['uuid'] for a in
                          self.cyborg.list_arqs(self.server['id'])])
        self.assertEqual([self.arq_bdf(a) for a in self.arqs],
                         self.hostdev_bdfs(server))
        self.assertNotIn('fault', server)

    def test_confirm(self):
        new = self.resize_here()
        self._confirm_resize(self.server)
        server = self.assert_running_on('compute1', same_arqs=False)
        self.assertEqual([new['uuid']],
                         [a['uuid'] for a in
                          self.cyborg.list_arqs(self.server['id'])])
        self.assertEqual([self.arq_bdf(new)], self.hostdev_bdfs(server))

    def test_revert_to_a_flavor_without_profile(self):
        # The source had no accelerator: nothing parked, every ARQ the
        # destination's, though bound to this host.
        plain = self._create_flavor(name='plain')
        server = self.boot(plain)
        self._resize_server(server, self.flavor)
        arqs = self.cyborg.list_arqs(server['id'])
        self.assertEqual([('Bound', 'compute1')],
                         [(arq['state'], arq['hostname']) for arq in arqs])
        self._revert_resize(server)
        server = self.api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        self.assertEqual([], self.hostdev_bdfs(server))
        # Only the first server's VF is in use.
        self.assertEqual(1, sum(self._fpga_usage('compute1').values()))
