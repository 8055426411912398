"""A fatal PCIe error seen at the port above a card, against the real
sidecar, cyborg-conductor and Placement.

The card itself shows no error (AER counts land where the error is seen,
often at the link partner: Documentation/ABI/testing/
sysfs-bus-pci-devices-aer_stats); its upstream port counts one. Within
one cycle the card (an Intel DFL card, each port released to a VF) is
fenced: its providers, one per port, fully reserved, the
``CUSTOM_HEALTH_UNHEALTHY`` trait in Placement and Cyborg, the reason in
``nova-cyborg-sidecar-manage device list``. Once the port's counters are
reset the card is offered again.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import io  # noqa: E402
import json  # noqa: E402

from sidecar.cmd import manage  # noqa: E402
from sidecar_simulator import pci_health  # noqa: E402
from tests.functional import test_sidecar_health  # noqa: E402

NUM_VFS = 2
PORT = '0000:80:01.0'


class UpstreamPortTest(test_sidecar_health.HealthTestBase):

    # Each port's provider has FPGA total 1.
    rc, total = 'FPGA', 1

    def listed(self):
        """The card's row of ``nova-cyborg-sidecar-manage device list``."""
        out, err = io.StringIO(), io.StringIO()
        code = manage.main(
            ['--config-file', self.sidecar.config_path, 'device', 'list',
             '-f', 'json'], stdout=out, stderr=err)
        self.assertEqual(0, code, err.getvalue())
        (row,) = [r for r in json.loads(out.getvalue())
                  if r['device'] == self.pf]
        return row

    def test_fatal_error_at_the_upstream_port_fences_the_card(self):
        self.host = self.start_accel_compute('compute1', num_pfs=1,
                                             num_vfs=NUM_VFS)
        (self.pf,) = self.pf_bdfs('compute1')
        self.names = self.fpga_providers('compute1', self.pf)
        self.assertEqual(NUM_VFS, len(self.names))
        self.sidecar = self.sidecars['compute1']
        pci_health.add_port(self.host, PORT, [self.pf])
        self.expect(False, 'healthy below its port')
        self.assertEqual(('ok', {}), (self.listed()['health'],
                                      self.listed()['held']))

        pci_health.set_port_aer(self.host, PORT, surprise_down=1)
        self.expect(True, 'a Surprise Down at the upstream port')
        row = self.listed()
        self.assertEqual('unhealthy', row['health'])
        self.assertEqual(
            {'unhealthy': '1 fatal error message(s) reported to root port '
                          '0000:80:01.0; Surprise Down at upstream port '
                          '0000:80:01.0 (1): the link to the device went '
                          'down; 1 fatal PCIe AER error(s) at upstream '
                          'port 0000:80:01.0'},
            row['held'])

        pci_health.set_port_aer(self.host, PORT, surprise_down=0)
        self.expect(False, 'the port reset')
        self.assertEqual(('ok', {}), (self.listed()['health'],
                                      self.listed()['held']))
