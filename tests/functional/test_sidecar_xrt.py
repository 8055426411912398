"""An Alveo card (XRT) with the real sidecar, cyborg-conductor, Placement
and Nova.

The card is written from XRT's sources (:mod:`sidecar_simulator.xrt`: a
U250's management PF bound to ``xclmgmt`` and user PF bound to ``xocl``);
the sidecar is configured as the Alveo section of its guide says
(``driver_programmers = xilinx:command``, ``program_command = xrt-smi
program --device {address} --user {bitstream}``), with the stand-in for
``xrt-smi`` (:mod:`sidecar_simulator.tools.xrt_smi`), which refuses an
xclbin built for another shell and loads the others into the user PF's
``xclbinuuid``.

What an operator checks: the user PF is a provider with its shell's
region trait, the management PF is none; a boot asking a bitstream loads
it and the server's domain has the user PF; a second boot asking another
function reprograms the card once the first server is gone.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import os  # noqa: E402
import sys  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from sidecar_simulator import xrt  # noqa: E402
from sidecar_simulator.tools import xrt_smi  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402

MGMT = '0000:81:00.0'
USER = '0000:81:00.1'
F_A = test_sidecar.F_A
F_B = test_sidecar.F_B
PLATFORM, SHELL = xrt.PROFILES['u250']
PROGRAMMING = """[fpga]
programmer = dfl
driver_programmers = xilinx:command
program_command = {xrt_smi} program --device {{address}} --user {{bitstream}}
"""


class AlveoTest(test_sidecar.SidecarTestBase):

    def _xclbin_flavor(self, function_id):
        """A device profile asking the xclbin image of ``function_id``."""
        glance = self.start_glance()
        name = 'xclbin-%s' % function_id[:8]
        properties = {'accel:function_id': function_id}
        image_id = glance.create_image(name, xrt.make_xclbin(
            function_id, SHELL, PLATFORM, payload=b'\0' * 4096), properties)
        # nova-compute reads the function through Nova's image API.
        from nova.image import glance as nova_glance
        nova_glance.get_default_image_service().create(None, {
            'id': image_id, 'name': name, 'status': 'active',
            'visibility': 'public', 'properties': properties})
        return self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:bitstream_id': image_id}])[1]

    def _start_alveo_compute(self, hostname):
        # fakelibvirt's PF and VF stand at 81:00.0 and 81:00.1: Nova's
        # libvirt sees the card's two functions at those addresses.
        self.start_compute(
            hostname=hostname,
            pci_info=fakelibvirt.HostPCIDevicesInfo(num_pci=0, num_pfs=1,
                                                    num_vfs=1),
            host_info=fakelibvirt.HostInfo(cpu_nodes=2, cpu_sockets=1,
                                           cpu_cores=2, cpu_threads=2,
                                           kB_mem=16 * 1024 * 1024))
        sim = xrt.XrtHost()
        self.card = sim.add_card('u250', address=MGMT)
        self.hosts[hostname] = sim.host
        tool = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'xrt-smi')
        conn = self.computes[hostname].driver._host.get_connection()
        self._kernels[hostname] = conn
        sidecar = self.sidecars[hostname] = self.useFixture(
            sidecar_fixture.SidecarFixture(
                hostname, sim, self.broker.transport_url,
                self.placement_url, lambda: conn,
                glance_url=self.glance.endpoint,
                extra=PROGRAMMING.format(xrt_smi=tool),
                cyborg_url=self.cyborg.endpoint))
        # xrt-smi on this host: the stand-in, on the sidecar's tree.
        with open(tool, 'w') as f:
            f.write('#!/bin/sh\nexec %s %s --sysfs-root %s "$@"\n'
                    % (sys.executable, xrt_smi.__file__,
                       sidecar.sysfs_root))
        os.chmod(tool, 0o755)

    def _loaded(self):
        path = os.path.join(self.sidecars['compute1'].sysfs_root, 'bus',
                            'pci', 'devices', USER, 'xclbinuuid')
        with open(path) as f:
            return f.read().strip()

    def _assert_on_user_pf(self, server, function_id):
        self.assertEqual('ACTIVE', server['status'])
        arq, = self.cyborg.list_arqs(server['id'])
        self.assertEqual(('Bound', 'PCI', USER),
                         (arq['state'], arq['attach_handle_type'],
                          self.arq_bdf(arq)))
        self.assertEqual([USER], self.hostdev_bdfs(server))
        self.assertEqual(xrt.xrt_source.format_uuid(function_id),
                         self._loaded())
        traits = self.traits('compute1_' + USER)
        self.assertIn(test_sidecar.function_trait(function_id, 'XILINX'),
                      traits)

    def test_user_pf_reported_and_programmed_twice(self):
        flavor_a = self._xclbin_flavor(F_A)
        flavor_b = self._xclbin_flavor(F_B)
        self._start_alveo_compute('compute1')
        name = 'compute1_' + USER
        # The user PF is the one provider; the management PF is none.
        self.assertEqual([name], list(self.device_rp_uuids('compute1')))
        self.assertEqual((1, 0), (self.inventory(name)['FPGA']['total'],
                                  self.inventory(name)['FPGA']['reserved']))
        traits = self.traits(name)
        self.assertTrue({'OWNER_CYBORG', 'CUSTOM_FPGA_XILINX',
                         'CUSTOM_FPGA_REGION_XILINX_' + SHELL.upper()}
                        <= traits, traits)
        self.assertFalse([t for t in traits
                          if t.startswith('CUSTOM_FPGA_FUNCTION_ID')])
        deployable, = self.cyborg.list_deployables()
        self.assertEqual((name, 'xilinx'), (deployable['name'],
                                            deployable['driver_name']))

        server = self.boot(flavor_a)
        self._assert_on_user_pf(server, F_A)
        self._delete_server(server)
        self.assert_nothing_left(server['id'])

        server = self.boot(flavor_b)
        self._assert_on_user_pf(server, F_B)
        self.assertNotIn(test_sidecar.function_trait(F_A, 'XILINX'),
                         self.traits(name))
        self.assertEqual([(USER, F_A), (USER, F_B)],
                         self.programmed('compute1'))
        self.assertEqual(0, self.inventory(name)['FPGA']['reserved'])
