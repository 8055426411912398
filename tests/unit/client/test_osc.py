"""``openstack server accelerator`` commands, on the recorded exchange."""

import configparser
import os
from unittest import mock

from osc_lib.command import command
from osc_lib import exceptions

from nova_cyborg_client.osc import plugin
from nova_cyborg_client.osc.v1 import server_accelerator as commands
from tests.unit.client import test_sdk

_SETUP_CFG = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                          'setup.cfg')


class CommandTestBase(test_sdk.SdkTestBase):

    def run_command(self, cls, *argv):
        app = mock.Mock()
        app.client_manager.nova_cyborg = plugin.make_client(
            mock.Mock(sdk_connection=self.conn))
        cmd = cls(app, None)
        parsed = cmd.get_parser('openstack server accelerator').parse_args(
            list(argv))
        return cmd.take_action(parsed)


class ListCommandTest(CommandTestBase):

    def test_columns(self):
        self.replay.steps('list')
        headers, rows = self.run_command(commands.ListServerAccelerator,
                                         self.server['name'])
        self.assertEqual(['UUID', 'State', 'Device Profile', 'Group', 'Host',
                          'Device Provider', 'Attach Handle Type',
                          'Attach Handle'], headers)
        arq = self.arqs('list')[0]
        row = dict(zip(headers, rows[0]))
        self.assertEqual((arq['uuid'], 'Bound', arq['device_profile_name'],
                          arq['hostname'], arq['device_rp_uuid']),
                         (row['UUID'], row['State'], row['Device Profile'],
                          row['Host'], row['Device Provider']))
        info = arq['attach_handle_info']
        # -f json shows Cyborg's attach handle as it is, a table its PCI
        # address.
        self.assertEqual(info, row['Attach Handle'].machine_readable())
        self.assertEqual('%04x:%02x:%02x.%x' % tuple(
            int(info[k], 16) for k in ('domain', 'bus', 'device',
                                       'function')),
                         row['Attach Handle'].human_readable())

    def test_no_such_server(self):
        self.replay.steps('list_empty')
        self.replay.requests.get(
            self.replay.data['endpoints']['compute'] + '/servers/nope',
            status_code=404, json={'itemNotFound': {
                'code': 404, 'message': 'Instance nope could not be found.'}})
        self.replay.requests.get(
            self.replay.data['endpoints']['compute'] + '/servers/detail',
            json={'servers': []})
        error = self.assertRaises(exceptions.CommandError, self.run_command,
                                  commands.ListServerAccelerator, 'nope')
        self.assertIn('Cannot find server nope', str(error))


class AttachHandleTest(CommandTestBase):

    def test_pci_address_is_checked(self):
        pci = commands.pci_address
        self.assertEqual('0000:81:00.1', pci(
            {'domain': '0000', 'bus': '81', 'device': '00',
             'function': '1'}))
        for bad in ({'domain': '0000', 'bus': 'zz', 'device': '00',
                     'function': '1'},
                    {'domain': '0000', 'bus': '100', 'device': '00',
                     'function': '1'},
                    {'domain': '0000', 'bus': '81', 'device': '00'},
                    {'domain': '-1', 'bus': '81', 'device': '00',
                     'function': '1'},
                    'not a dict', None):
            self.assertIsNone(pci(bad), bad)
        column = commands.AttachHandleColumn
        self.assertEqual('asked_type=nvidia-35', column(
            {'asked_type': 'nvidia-35'}).human_readable())
        self.assertEqual('', column({}).human_readable())


class AddRemoveCommandTest(CommandTestBase):

    def test_add_wait(self):
        entries = self.replay.steps('add_wait')
        self.assertIsNone(self.run_command(
            commands.AddServerAccelerator, self.server['name'],
            self.profile, '--wait'))
        self.assertEqual(self.replay.expected(entries), self.replay.sent())

    def test_conflict_is_a_clear_error(self):
        self.replay.steps('add_conflict')
        error = self.assertRaises(
            exceptions.CommandError, self.run_command,
            commands.AddServerAccelerator, self.server['name'],
            self.profile)
        message = str(error)
        self.assertTrue(message.startswith(
            'Cannot add the accelerators of device profile %s to server '
            '%s: ' % (self.profile, self.server['name'])), message)
        self.assertIn('attached already', message)
        self.assertTrue(message.endswith('(HTTP 409)'), message)
        self.assertNotIn('ConflictException', message)

    def test_remove_by_arq_uuid_wait(self):
        entries = self.replay.steps('remove_by_arq_wait')
        self.run_command(commands.RemoveServerAccelerator,
                         self.server['name'], self.arqs('list')[0]['uuid'],
                         '--wait')
        self.assertEqual(self.replay.expected(entries), self.replay.sent())

    def test_remove_conflict(self):
        self.replay.steps('remove_conflict')
        error = self.assertRaises(
            exceptions.CommandError, self.run_command,
            commands.RemoveServerAccelerator, self.server['name'],
            self.profile)
        self.assertIn('(HTTP 409)', str(error))


class PluginTest(CommandTestBase):

    def test_entry_points(self):
        """What setup.cfg registers is what the client loads."""
        cfg = configparser.ConfigParser()
        cfg.read(_SETUP_CFG)
        entry_points = cfg['entry_points']
        self.assertEqual('nova_cyborg = nova_cyborg_client.osc.plugin',
                         entry_points['openstack.cli.extension'].strip())
        group = 'openstack.%s.v%s' % (plugin.API_NAME,
                                      plugin.DEFAULT_API_VERSION)
        names = {}
        for line in entry_points[group].strip().splitlines():
            name, target = (part.strip() for part in line.split('='))
            module, cls = target.split(':')
            self.assertEqual(commands.__name__, module)
            names[name] = getattr(commands, cls)
            self.assertTrue(issubclass(names[name], command.Command))
            self.assertTrue(names[name]._description)
        self.assertEqual({'server_accelerator_add',
                          'server_accelerator_remove',
                          'server_accelerator_list'}, set(names))

    def test_plugin_module(self):
        for attr in ('DEFAULT_API_VERSION', 'API_VERSION_OPTION',
                     'API_NAME', 'API_VERSIONS', 'make_client',
                     'build_option_parser', 'check_api_version'):
            self.assertTrue(hasattr(plugin, attr), attr)
        self.assertTrue(plugin.check_api_version('1'))
        self.assertFalse(plugin.check_api_version('2'))
