"""The sidecar's options as deployment tools write them."""

import os

import fixtures
from oslo_config import cfg
import testtools

from sidecar import conf as sidecar_conf
from sidecar.program import cyborg
from sidecar.program import glance
from sidecar.report import placement


class KeystoneauthOptionsTest(testtools.TestCase):

    def _conf(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'sidecar.conf')
        with open(path, 'w') as f:
            f.write(text)
        conf = cfg.ConfigOpts()
        sidecar_conf.register_opts(conf)
        conf(['--config-file', path], default_config_files=[],
             default_config_dirs=[])
        return conf

    def test_deprecated_interface_is_ignored(self):
        # devstack's configure_keystoneauth writes ``interface``; with
        # keystoneauth's deprecated option registered, the adapter refused
        # it beside the valid_interfaces default (TypeError at start).
        conf = self._conf(
            '[placement]\nauth_type = password\nauth_url = http://ks/v3\n'
            'username = cyborg\npassword = x\ninterface = public\n'
            '[glance]\nauth_type = none\ninterface = public\n')
        client = placement.PlacementClient(conf)
        self.assertEqual(['internal', 'public'],
                         client.adapter.interface)
        self.assertEqual(['internal', 'public'],
                         glance.ImageClient(conf).adapter.interface)

    def test_sample_shows_the_placement_timeout(self):
        groups = dict(sidecar_conf.list_opts())
        (timeout,) = [o for o in groups['placement'] if o.dest == 'timeout']
        self.assertEqual(30, timeout.default)
        (glance,) = [o for o in groups['glance'] if o.dest == 'timeout']
        self.assertIsNone(glance.default)
        (timeout,) = [o for o in groups['cyborg'] if o.dest == 'timeout']
        self.assertEqual(30, timeout.default)

    def test_cyborg_client(self):
        conf = self._conf(
            '[cyborg]\nauth_type = password\nauth_url = http://ks/v3\n'
            'username = sidecar\npassword = x\ninterface = public\n')
        self.assertEqual(30, conf.cyborg.timeout)
        adapter = cyborg.AcceleratorClient(conf).adapter
        self.assertEqual('accelerator', adapter.service_type)
        self.assertEqual(['internal', 'public'], adapter.interface)

    def test_program_lease_is_deprecated(self):
        conf = self._conf('[sidecar]\nprogram_lease = 60\n')
        self.assertEqual(60, conf.sidecar.program_lease)
        (opt,) = [o for o in dict(sidecar_conf.list_opts())['sidecar']
                  if o.dest == 'program_lease']
        self.assertTrue(opt.deprecated_for_removal)

    def test_sample_lists_privsep_options(self):
        groups = dict(sidecar_conf.list_opts())
        self.assertIn('helper_command',
                      [o.name for o in groups['sidecar_privsep']])
