"""Intel N6000/N6001 (OFS, sidecar_simulator.dfl ``n6000-ofs``) refused by
the FPGA driver: one ERROR naming the card, once; nothing of it reported;
the other cards of the host reported as before."""

import fixtures

from sidecar.drivers import dfl_refused
from sidecar.drivers import fpga
from sidecar.sources import sysfs
from sidecar_simulator import dfl
from tests.unit.sidecar import simhost

N6000 = '0000:b1:00.0'
N6000_VFS = ['0000:b1:00.1', '0000:b1:00.2', '0000:b1:00.3']
N6001 = '0000:c1:00.0'
D5005 = '0000:82:00.0'
D5005_VF = '0000:82:00.1'


class OfsRefusedTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.sim = dfl.DflHost()
        self.sim.add_card('n6000-ofs', afu_id=simhost.FUNCTION_ID,
                          address=N6000)
        self.sim.add_card('d5005', afu_id=simhost.FUNCTION_ID, sriov=True,
                          address=D5005)
        self.sim.write(self.root)
        self.driver = fpga.FpgaDriver(self.conf,
                                      sysfs.SysfsSource(self.root))

    def errors(self):
        return [line for line in self.log.output.splitlines()
                if line.startswith('ERROR ')]

    def test_refused_beside_a_reported_card(self):
        devices = self.driver.discover()
        self.assertEqual([D5005], [d.address for d in devices])
        self.assertEqual([D5005_VF], [d.name for d in devices[0].deployables])
        for address in [N6000] + N6000_VFS:
            self.assertFalse(self.driver.claims(address), address)
        self.assertTrue(self.driver.claims(D5005_VF))
        error, = self.errors()
        for fragment in (N6000, 'Intel N6000 (OFS)', 'several SR-IOV VFs',
                         'one function per PR slot', 'not support',
                         'outside Cyborg'):
            self.assertIn(fragment, error)
        self.assertEqual({N6000: 'Intel N6000 (OFS)'},
                         self.driver.refused.current)
        self.assertEqual([], self.warnings())

    def test_said_once_across_cycles(self):
        for _ in range(2):
            self.assertEqual([D5005], [d.address
                                       for d in self.driver.discover()])
        self.assertEqual(1, len(self.errors()), self.log.output)

    def test_each_card_said(self):
        self.sim.add_card('n6001-ofs', address=N6001)
        self.sim.write(self.root)
        self.driver.discover()
        self.driver.discover()
        errors = self.errors()
        self.assertEqual(2, len(errors), self.log.output)
        self.assertIn(N6000, errors[0])
        self.assertIn('Intel N6000 (OFS)', errors[0])
        self.assertIn(N6001, errors[1])
        self.assertIn('Intel N6001 (OFS)', errors[1])

    def test_ids(self):
        self.assertEqual('Intel N6000 (OFS)',
                         dfl_refused.refused_model(self.root, N6000))
        self.assertIsNone(dfl_refused.refused_model(self.root, D5005))
        self.assertIsNone(dfl_refused.refused_model(self.root,
                                                    '0000:99:00.0'))

    def test_port_release_n6000_profile_still_reported(self):
        # The 'n6000' profile (no subsystem ids, port released) is not
        # refused.
        sim = dfl.DflHost()
        sim.add_card('n6000', afu_id=simhost.FUNCTION_ID, sriov=True,
                     address=N6000)
        root = self.useFixture(fixtures.TempDir()).path
        sim.write(root)
        self.config.config(sysfs_root=root, group='sidecar')
        driver = fpga.FpgaDriver(self.conf, sysfs.SysfsSource(root))
        self.assertEqual([N6000], [d.address for d in driver.discover()])
        self.assertEqual([], self.errors())
