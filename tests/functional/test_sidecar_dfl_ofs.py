"""An Intel N6000 (OFS) beside a port-release DFL card, served by the real
sidecar against the real cyborg-conductor and Placement.

The N6000 (:mod:`sidecar_simulator.dfl` profile ``n6000-ofs``: PF0 with
the FME and the PR slot's port, three VFs serving the slot's AFU) is
refused by the sidecar (sidecar.drivers.dfl_refused): the conductor holds
no device, deployable or attach handle of it, and Placement no provider;
the D5005 whose port was released to its VF is reported as before.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from sidecar_simulator import dfl  # noqa: E402
from sidecar_simulator import host as simulator  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402


class OfsCardRefusedTest(test_sidecar.SidecarTestBase):

    def test_only_the_port_release_card_reported(self):
        log = self.useFixture(fixtures.FakeLogger(
            name='sidecar.drivers.fpga', format='%(levelname)s %(message)s'))
        hostname = 'compute1'
        self.start_compute(
            hostname=hostname,
            pci_info=fakelibvirt.HostPCIDevicesInfo(
                num_pci=0, num_pfs=1, num_vfs=1),
            host_info=fakelibvirt.HostInfo(
                cpu_nodes=2, cpu_sockets=1, cpu_cores=2, cpu_threads=2,
                kB_mem=16 * 1024 * 1024))
        host = dfl.DflHost(simulator.SimulatedHost('0000:81:00.0'))
        d5005 = host.add_card('d5005', sriov=True)
        n6000 = host.add_card('n6000-ofs')
        conn = self.computes[hostname].driver._host.get_connection()
        self._kernels[hostname] = conn
        sidecar = self.useFixture(sidecar_fixture.SidecarFixture(
            hostname, host, self.broker.transport_url, self.placement_url,
            lambda: conn, cyborg_url=self.cyborg.endpoint))
        sidecar.cycle()
        self.assertEqual({hostname + '_' + d5005.vf},
                         set(self.device_rp_uuids(hostname)))
        # The conductor's devices carry no address: the D5005 (0b2b) is
        # the host's one, the N6000 (bcce) is not there.
        self.assertEqual([('FPGA', '8086', '0b2b')], [
            (d['type'], d['vendor'], d['model'])
            for d in self.cyborg.list_devices()
            if d['hostname'] == hostname])
        self.assertEqual([hostname + '_' + d5005.vf], [
            d['name'] for d in self.cyborg.list_deployables()])
        for vf in n6000.ofs_vfs:
            self.assertNotIn(vf, str(self.cyborg.list_deployables()))
        errors = [line for line in log.output.splitlines()
                  if line.startswith('ERROR ')]
        self.assertEqual(1, len(errors), log.output)
        self.assertIn(n6000.pf, errors[0])
        self.assertIn('Intel N6000 (OFS)', errors[0])
