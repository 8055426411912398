"""Every service's configuration file of the local cloud."""

import configparser
import os

import fixtures
import testtools

from localcloud import configs
from localcloud import layout as layout_mod


class ConfigsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=31000)

    def _read(self, path):
        parser = configparser.RawConfigParser(strict=True)
        parser.read(path)
        return parser

    def test_services_reach_their_database_and_keystone(self):
        for name, section, db in (
                ('keystone', 'database', 'keystone'),
                ('placement', 'placement_database', 'placement'),
                ('glance', 'database', 'glance'),
                ('nova', 'database', 'nova_cell1'),
                ('cyborg', 'database', 'cyborg')):
            conf = self._read(getattr(configs, name)(self.layout))
            self.assertEqual(self.layout.db_url(db),
                             conf.get(section, 'connection'), name)
            if name != 'keystone':
                self.assertEqual('http://127.0.0.1:31000/v3', conf.get(
                    'keystone_authtoken', 'auth_url'), name)

    def test_nova_sends_service_tokens_as_its_own_user(self):
        conf = self._read(configs.nova(self.layout))
        self.assertEqual('true', conf.get('service_user',
                                          'send_service_user_token'))
        self.assertEqual('nova', conf.get('service_user', 'username'))
        self.assertEqual(self.layout.db_url('nova_api'),
                         conf.get('api_database', 'connection'))
        self.assertTrue(os.path.exists(conf.get('wsgi',
                                                'api_paste_config')))

    def test_each_host_has_its_own_identity_and_sidecar(self):
        one = self._read(configs.compute(self.layout, 'compute1'))
        two = self._read(configs.compute(self.layout, 'compute2'))
        self.assertNotEqual(one.get('DEFAULT', 'state_path'),
                            two.get('DEFAULT', 'state_path'))
        sidecar = self._read(configs.sidecar(self.layout, 'compute2',
                                             '/tmp/sys2'))
        self.assertEqual('compute2', sidecar.get('DEFAULT', 'host'))
        self.assertEqual(self.layout.transport_url,
                         sidecar.get('DEFAULT', 'transport_url'))
        self.assertIn('/tmp/sys2', sidecar.get('fpga', 'program_command'))

    def test_a_rebooted_host_starts_the_guests_that_were_running(self):
        conf = self._read(configs.compute(self.layout, 'compute1'))
        self.assertEqual('true', conf.get(
            'DEFAULT', 'resume_guests_state_on_host_boot'))

    def test_a_host_reaps_domains_of_servers_deleted_while_it_was_down(self):
        conf = self._read(configs.compute(self.layout, 'compute1'))
        self.assertEqual('reap', conf.get('DEFAULT',
                                          'running_deleted_instance_action'))
        self.assertLessEqual(int(conf.get(
            'DEFAULT', 'running_deleted_instance_poll_interval')), 10)
        self.assertEqual(configs.nova_file(self.layout),
                         configs.nova(self.layout))
