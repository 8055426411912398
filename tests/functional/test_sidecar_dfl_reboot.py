"""A host reboot under a server whose device profile names a bitstream,
against the real cyborg-conductor, Placement, Glance and Nova.

A cold boot loads each DFL port with its card's default AFU and leaves the
ports under the PF (:func:`sidecar_simulator.kernel.reboot`); the boot's
configuration releases them to their VFs again where the card serves them
by SR-IOV. The server's ARQ stays Bound; the sidecar, restarted with the
host, loads the server's function on its port again before its first
report (:mod:`sidecar.program.fpga_restore`), with the programming path of
a bind (the simulator's OPAE ``fpgaconf``, the port assigned back to the
PF around the load where a VF serves it): the port's ``afu_id`` read
through sysfs is the server's function, its provider and the host's
providers are as before, and the server starts again with its port.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import os  # noqa: E402

import oslo_messaging as messaging  # noqa: E402

from sidecar import dfl_abi  # noqa: E402
from sidecar.daemon import factory  # noqa: E402
from sidecar_simulator import dfl  # noqa: E402
from sidecar_simulator import dfl_sriov  # noqa: E402
from sidecar_simulator import kernel  # noqa: E402
from tests.functional import test_sidecar_dfl  # noqa: E402

F_A = test_sidecar_dfl.F_A


class DflRebootTest(test_sidecar_dfl.DflCardTest):

    #: Not run again here.
    test_two_functions_on_each_card = None

    def restart_sidecar(self, hostname):
        """Stop the host's sidecar and start a new one on its
        configuration and state, as the host's boot does."""
        fixture = self.sidecars[hostname]
        fixture.sidecar.stop()
        transport = messaging.get_rpc_transport(
            fixture.conf, url=fixture.transport_url)
        self.addCleanup(transport.cleanup)
        fixture.sidecar = factory.build(fixture.conf, transport=transport,
                                        connect=fixture.connect)
        fixture.sidecar.start()
        self.addCleanup(fixture.sidecar.stop)

    def boot_configuration(self, hostname):
        """What a host's boot configures after the kernel: a card served
        by SR-IOV gets its ports released to its VFs again
        (DFL_FPGA_FME_PORT_RELEASE, then ``sriov_numvfs``)."""
        host, card = self.cards[hostname]
        if not self.sriov:
            return
        fme = 'dfl-fme.%d' % card.fme_id
        for port in card.ports:
            dfl_sriov.fme_ioctl(host, fme, dfl_sriov.FME_PORT_RELEASE,
                                dfl_abi.pack_port_id(port.index))
        dfl_sriov.sriov_numvfs_store(host, card.pf, str(len(card.ports)))

    def providers(self, hostname):
        """The host's device providers: inventories and traits."""
        return {name: (self.inventory(name), sorted(self.traits(name)))
                for name in sorted(self.device_rp_uuids(hostname))}

    def _reboot_under(self, profile, sriov):
        self.start_glance()
        flavor = self._flavor(F_A)
        hostname = 'compute1'
        card = self.start_dfl_compute(hostname, profile, sriov=sriov)
        self.sriov = sriov
        server = self.boot(flavor, host=hostname)
        handle = self._check(server, hostname, F_A)
        (arq,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual('Bound', arq['state'])
        server = self._stop_server(server)
        providers = self.providers(hostname)
        self.assertEqual(F_A, self.afu_id(hostname))

        # The host reboots cold: the port holds the card's default AFU.
        host = self.cards[hostname][0]
        kernel.reboot(host.host)
        self.boot_configuration(hostname)
        self.assertEqual(dfl.NO_AFU, self.afu_id(hostname))
        self.restart_sidecar(hostname)
        # The new sidecar's first cycle, run by its start before it
        # reports anything, loaded it again.
        self.assertEqual(F_A, self.afu_id(hostname))
        self.assertEqual([(handle, F_A)] * 2, self.programmed(hostname))
        with open(os.path.join(host.port_dir(card), 'afu_id')) as f:
            self.assertEqual(F_A, f.read().strip())
        (again,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual(
            ('Bound', arq['device_rp_uuid'], arq['attach_handle_uuid']),
            (again['state'], again['device_rp_uuid'],
             again['attach_handle_uuid']))
        self.sidecars[hostname].cycle()
        self.assertEqual(providers, self.providers(hostname))

        server = self._start_server(server)
        self._check(server, hostname, F_A)
        self._delete_server(server)
        self.assert_nothing_left(server['id'])

    def test_function_loaded_again_on_the_pf(self):
        # No SR-IOV: the PF is the port's function and the handle.
        self._reboot_under('d5005', sriov=False)

    def test_function_loaded_again_on_a_released_port(self):
        # The port released to its VF: assigned back around the load.
        self._reboot_under('d5005', sriov=True)
