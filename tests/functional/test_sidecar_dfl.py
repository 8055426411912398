"""Intel DFL cards served by the real sidecar, against the real
cyborg-conductor, Placement, Glance and Nova.

Each host's card is written by :mod:`sidecar_simulator.dfl` from the
kernel's ABI, and programmed as on a real host with ``[fpga] programmer =
command`` and OPAE's ``fpgaconf`` (the simulator's stand-in,
:mod:`sidecar_simulator.tools.fpgaconf`), given the bitstream as Glance
holds it: an OPAE ``.gbs`` file for the card's interface. Two boots ask
two functions of one card, one after the other; each server gets the
card's attach handle (the PF of a card without SR-IOV, the VF of a card
whose port was released) holding its function: the port's ``afu_id`` and
the provider's function trait.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import os  # noqa: E402
import sys  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from sidecar.program import gbs  # noqa: E402
from sidecar_simulator import dfl  # noqa: E402
from sidecar_simulator import host as simulator  # noqa: E402
from sidecar_simulator.tools import fpgaconf  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402

F_A = test_sidecar.F_A
F_B = test_sidecar.F_B
function_trait = test_sidecar.function_trait


class DflCardTest(test_sidecar.SidecarTestBase):

    def setUp(self):
        super().setUp()
        self.top = self.useFixture(fixtures.TempDir()).path
        self.cards = {}

    def start_dfl_compute(self, hostname, profile, sriov):
        """A host with one DFL card at fakelibvirt's first PF address,
        its sidecar programming it with fpgaconf."""
        num_vfs = 1 if sriov else 0
        self.start_compute(
            hostname=hostname,
            pci_info=fakelibvirt.HostPCIDevicesInfo(
                num_pci=0, num_pfs=1, num_vfs=num_vfs),
            host_info=fakelibvirt.HostInfo(
                cpu_nodes=2, cpu_sockets=1, cpu_cores=2, cpu_threads=2,
                kB_mem=16 * 1024 * 1024))
        # fakelibvirt's addressing (simulator.from_fakelibvirt).
        host = dfl.DflHost(simulator.SimulatedHost('0000:81:00.0'))
        card = host.add_card(profile, sriov=sriov)
        self.cards[hostname] = (host, card)
        # fpgaconf is told the host's sysfs by a path fixed now, linked to
        # the tree once the sidecar fixture has written it.
        link = os.path.join(self.top, hostname, 'sys')
        os.makedirs(os.path.dirname(link))
        command = ' '.join((sys.executable, fpgaconf.__file__,
                            '--sysfs-root', link, '--segment', '0x{segment}',
                            '-B', '0x{bus}', '-D', '0x{device}',
                            '{bitstream}'))
        conn = self.computes[hostname].driver._host.get_connection()
        self._kernels[hostname] = conn
        self.sidecars[hostname] = self.useFixture(
            sidecar_fixture.SidecarFixture(
                hostname, host, self.broker.transport_url,
                self.placement_url, lambda: conn,
                glance_url=self.glance and self.glance.endpoint,
                extra='[fpga]\nprogram_command = %s\n' % command,
                cyborg_url=self.cyborg.endpoint))
        os.symlink(self.sidecars[hostname].sysfs_root, link)
        return card

    def handle_bdfs(self, hostname):
        card = self.cards[hostname][1]
        return {card.vf if card.sriov else card.pf}

    def programmed(self, hostname):
        log = os.path.join(self.top, hostname, 'programmed.log')
        if not os.path.exists(log):
            return []
        with open(log) as f:
            return [tuple(line.split()[1:]) for line in f]

    def afu_id(self, hostname):
        """The port's afu_id; while a guest holds the port's function
        (on vfio-pci, dfl-pci's devices gone) what the FPGA loaded."""
        host, card = self.cards[hostname]
        try:
            with open(os.path.join(host.port_dir(card), 'afu_id')) as f:
                return f.read().strip()
        except FileNotFoundError:
            self.assertEqual('vfio-pci', host.host.functions[
                card.vf if card.sriov else card.pf].driver)
            return card.afu_id

    def _flavor(self, function_id, compat_id=simulator.DEFAULT_COMPAT_ID):
        """A flavor whose device profile asks for a GBS bitstream."""
        glance = self.start_glance()
        data = gbs.build(compat_id, [function_id], b'\x00raw PR bits\xff')
        image_id = glance.create_image(
            'afu-%s.gbs' % function_id[:8], data,
            {'accel:function_id': function_id})
        # nova-compute reads the function through Nova's image API.
        from nova.image import glance as nova_glance
        nova_glance.get_default_image_service().create(None, {
            'id': image_id, 'name': 'afu-%s.gbs' % function_id[:8],
            'status': 'active', 'visibility': 'public',
            'properties': {'accel:function_id': function_id}})
        return self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:bitstream_id': image_id}])[1]

    def _check(self, server, hostname, function_id):
        """The server has the card's handle, which holds its function."""
        host, card = self.cards[hostname]
        handle = card.vf if card.sriov else card.pf
        name = hostname + '_' + handle
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        self.assert_accelerated(server, 1)
        self.assertEqual([handle], self.hostdev_bdfs(server))
        self.assertEqual(function_id, self.afu_id(hostname))
        traits = self.traits(name)
        self.assertIn(function_trait(function_id), traits)
        self.assertEqual(1, len([t for t in traits if t.startswith(
            'CUSTOM_FPGA_FUNCTION_ID_')]), traits)
        self.assertEqual(0, self.inventory(name)['FPGA']['reserved'])
        return handle

    def test_two_functions_on_each_card(self):
        self.start_glance()
        flavor_a, flavor_b = self._flavor(F_A), self._flavor(F_B)
        # A card without SR-IOV (its PF is the handle), and one whose port
        # was released (its VF is).
        cards = {'compute1': self.start_dfl_compute('compute1', 'd5005',
                                                    sriov=False),
                 'compute2': self.start_dfl_compute('compute2', 'n6000',
                                                    sriov=True)}
        self.assertEqual({'compute1_' + cards['compute1'].pf},
                         set(self.device_rp_uuids('compute1')))
        self.assertEqual({'compute2_' + cards['compute2'].vf},
                         set(self.device_rp_uuids('compute2')))
        for hostname in cards:
            self.assertEqual(dfl.NO_AFU, self.afu_id(hostname))
            first = self.boot(flavor_a, host=hostname)
            handle = self._check(first, hostname, F_A)
            # The card holds one function: the second one once the first
            # server is gone.
            self._delete_server(first)
            self.assert_nothing_left(first['id'])
            second = self.boot(flavor_b, host=hostname)
            self._check(second, hostname, F_B)
            self.assertEqual([(handle, F_A), (handle, F_B)],
                             self.programmed(hostname))
            # The sidecar's next report agrees with the conductor's trait.
            self.sidecars[hostname].cycle()
            self.assertIn(function_trait(F_B),
                          self.traits(hostname + '_' + handle))
