"""The local cloud's hosts have a live-migratable device beside the FPGAs.

After the FPGA PFs each simulated host has a plain PF whose VFs support
VFIO migration; the sidecar's generic PCI driver reports it (its
``[pci] device_spec`` has ``live_migratable``), the FPGA driver the
FPGAs, which are not live-migratable.
"""

import configparser
import json

import fixtures
import testtools

from localcloud import devices
from localcloud import configs
from localcloud import layout as layout_mod
from sidecar.drivers import pci


class MigratableDevicesTest(testtools.TestCase):

    def test_fakelibvirt_shows_every_pf_with_as_many_vfs(self):
        none = {'num_pci': 0, 'num_mdevcap': 0}
        self.assertEqual(dict(none, num_pfs=2, num_vfs=8),
                         devices.pci_info(1, 4, 1))
        self.assertEqual(dict(none, num_pfs=3, num_vfs=6),
                         devices.pci_info(2, 4, 1))
        self.assertEqual(dict(none, num_pfs=1, num_vfs=4),
                         devices.pci_info(1, 4, 0))

    def test_fpgas_first_then_the_migratable_pf(self):
        host = devices.simulated_host(1, 4, 1)
        roots = [f for f in host.functions.values() if f.physfn is None]
        self.assertEqual(['0000:81:00.0', '0000:81:01.0'],
                         [f.address for f in roots])
        fpga, plain = roots
        # The FPGA is a DFL card, each of its ports served by a VF.
        card = host.fpga_card(fpga.address)
        self.assertEqual([fpga.virtfns[i] for i in sorted(fpga.virtfns)],
                         card.handles())
        self.assertEqual(4, len(card.handles()))
        self.assertIsNone(host.fpga_card(plain.address))
        self.assertEqual(('8086', '1528'), (plain.vendor_id,
                                            plain.product_id))
        self.assertEqual(['0000:81:01.%d' % n for n in range(1, 5)],
                         [plain.virtfns[i] for i in sorted(plain.virtfns)])
        # The FPGA keeps the addresses it had without the new PF.
        self.assertEqual(
            [f.address for f in devices.simulated_host(
                1, 4).functions.values()],
            [a for a in host.functions if a.startswith('0000:81:00.')])

    def test_at_most_four_vfs_per_fpga(self):
        host = devices.simulated_host(2, 8)
        self.assertEqual(['0000:81:00.0', '0000:81:01.0'], host.fpga_pfs())
        self.assertEqual(
            'an FPGA card has at most 4 ports',
            str(self.assertRaises(ValueError, devices.simulated_host,
                                  1, 5)).split(': ', 1)[1].split(',')[0])
        self.assertRaises(ValueError, layout_mod.check_fpgas, 2, 10)
        layout_mod.check_fpgas(2, 9)  # 4 a PF: the ninth VF is dropped
        layout_mod.check_fpgas(0, 0)

    def test_sidecar_reports_only_the_plain_pf_as_migratable(self):
        layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=31000)
        conf = configparser.RawConfigParser(strict=True)
        conf.read(configs.sidecar(layout, 'compute1', '/sys-root'))
        self.assertEqual('fpga,pci,gpu',
                         conf.get('sidecar', 'enabled_drivers'))
        [spec] = pci.DeviceSpec.parse(conf.get('pci', 'device_spec'))
        self.assertTrue(spec.live_migratable)
        self.assertEqual(configs.MIGRATABLE_RC, spec.resource_class)
        self.assertTrue(json.loads(conf.get('pci', 'device_spec'))[
            'live_migratable'])
        host = devices.simulated_host(1, 4, 1)
        self.assertEqual(['0000:81:01.0'], [
            f.address for f in host.functions.values()
            if f.physfn is None and spec.matches(f)])
