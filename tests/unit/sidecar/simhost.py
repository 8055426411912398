"""A test case with a simulated host, a configuration and a log."""

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from sidecar import conf as sidecar_conf
from sidecar.sources import sysfs
from sidecar_simulator import host as simulator

FUNCTION_ID = '9aeffe5f84a111e8a9a3b3b1fa4b5c1d'
COMPAT_ID = simulator.DEFAULT_COMPAT_ID
T4_1B = {'type_id': 'nvidia-222', 'name': 'GRID T4-1B',
         'available_instances': 16}
T4_2B = {'type_id': 'nvidia-223', 'name': 'GRID T4-2B',
         'available_instances': 8}


class SimHostTestCase(testtools.TestCase):
    """``self.root`` is an empty sysfs root, ``self.conf`` points at it."""

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            format='%(levelname)s %(message)s'))
        self.root = self.useFixture(fixtures.TempDir()).path
        self.conf = cfg.ConfigOpts()
        sidecar_conf.register_opts(self.conf)
        self.conf([])
        self.config = self.useFixture(config_fixture.Config(self.conf))
        self.config.config(sysfs_root=self.root, group='sidecar')
        # The sidecar's own files (vGPU type names, journals) stay in the
        # test's directory, never in the real state_path.
        self.config.config(
            state_path=self.useFixture(fixtures.TempDir()).path,
            group='sidecar')

    def write(self, host):
        """Write ``host`` under ``self.root``; return a SysfsSource."""
        host.write(self.root)
        return sysfs.SysfsSource(self.root)

    def host(self, **description):
        return simulator.SimulatedHost.from_description(description)

    def warnings(self):
        return [line for line in self.log.output.splitlines()
                if line.startswith('WARNING ')]

    def assertOneWarning(self, *fragments):
        """Exactly one warning was logged, and it contains ``fragments``."""
        warnings = self.warnings()
        self.assertEqual(1, len(warnings), self.log.output)
        for fragment in fragments:
            self.assertIn(fragment, warnings[0])
