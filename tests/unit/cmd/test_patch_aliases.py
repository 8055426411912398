"""nova-cyborg-patch revert refuses while a server's ARQs are under its
alias (a live migration put them there; reverted Nova looks them up by
the server's UUID only), and ``aliases`` lists those servers."""

import os
from unittest import mock

import fixtures

from nova_cyborg_patch import aliases as alias_check
from tests.unit.cmd import test_patch

SERVER = {'uuid': '6a1f3c1e-0b2d-4e8f-9a7c-5d3e2f1a0b9c', 'name': 'p1',
          'host': 'compute2', 'project_id': 'owner-project'}


class RevertAliasCheckTest(test_patch.NovaCopyTestCase):

    def setUp(self):
        super().setUp()
        self.require_pristine_source()
        self.assertEqual(0, self.run_tool('apply')[0])
        self.applied = self.snapshot()
        self.conf = os.path.join(self.target, 'nova.conf')
        with open(self.conf, 'w') as f:
            f.write('[DEFAULT]\nhost = compute2\n')
        self.find = self.useFixture(fixtures.MockPatchObject(
            alias_check, 'find',
            return_value=('every cell', [SERVER]))).mock

    def test_refused_while_a_server_is_under_its_alias(self):
        rc, out, err = self.run_tool('revert', '--config-file', self.conf)
        self.assertEqual(1, rc)
        self.find.assert_called_once_with([self.conf])
        self.assertIn('cannot revert: 1 server(s) (every cell)', err)
        self.assertIn('%s (p1) on compute2, project owner-project'
                      % SERVER['uuid'], err)
        self.assertIn('openstack server migrate --live-migration', err)
        self.assertIn('Nothing was changed', err)
        self.assertUnchanged(self.applied)

    def test_default_configuration_is_nova_conf(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg_patch.aliases.DEFAULT_CONFIG', self.conf))
        rc, _out, _err = self.run_tool('revert')
        self.assertEqual(1, rc)
        self.find.assert_called_once_with([self.conf])
        self.assertUnchanged(self.applied)

    def test_reverts_when_none_is(self):
        self.find.return_value = ('host compute2', [])
        rc, out, err = self.run_tool('revert', '--config-file', self.conf)
        self.assertEqual(0, rc, err)
        self.assertIn('Alias check (host compute2): no server', out)
        self.assertUnchanged()

    def test_a_failed_check_refuses(self):
        self.find.side_effect = alias_check.CheckFailed(
            'MessagingTimeout: no reply from nova-conductor')
        rc, _out, err = self.run_tool('revert', '--config-file', self.conf)
        self.assertEqual(1, rc)
        self.assertIn('could not check for servers', err)
        self.assertIn('MessagingTimeout: no reply from nova-conductor', err)
        self.assertIn('--skip-alias-check', err)
        self.assertUnchanged(self.applied)

    def test_skip_alias_check(self):
        rc, out, err = self.run_tool('revert', '--skip-alias-check',
                                     '--config-file', self.conf)
        self.assertEqual(0, rc, err)
        self.assertIn('Alias check skipped', out)
        self.find.assert_not_called()
        self.assertUnchanged()

    def test_no_nova_configuration_no_check(self):
        rc, out, err = self.run_tool('revert')
        self.assertEqual(0, rc, err)
        self.assertIn('no Nova service runs on this host', out)
        self.find.assert_not_called()
        self.assertUnchanged()

    def test_nothing_to_revert_checks_nothing(self):
        self.assertEqual(0, self.run_tool('revert', '--skip-alias-check')[0])
        rc, out, _err = self.run_tool('revert', '--config-file', self.conf)
        self.assertEqual(0, rc)
        self.assertIn('Nothing to do', out)
        self.find.assert_not_called()

    def test_aliases_lists_them(self):
        rc, out, _err = self.run_tool('aliases', '--config-file', self.conf)
        self.assertEqual(0, rc)
        self.assertIn('under their alias (every cell): 1', out)
        self.assertIn(SERVER['uuid'], out)
        self.assertIn('Live-migrate each of them once more', out)
        self.assertUnchanged(self.applied)


class FindTest(test_patch.NovaCopyTestCase):
    """Which scope find() searches, from Nova's configuration."""

    def _conf(self, text):
        path = os.path.join(self.target, 'nova.conf')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def _find(self, text):
        # oslo.messaging's in-memory driver: nothing is sent anyway.
        text = '[DEFAULT]\ntransport_url = fake:/\n' + text
        from nova import conf as nova_conf
        self.addCleanup(nova_conf.CONF.reset)
        self.addCleanup(nova_conf.CONF.clear)
        return alias_check.find([self._conf(text)])

    @mock.patch('nova_cyborg.model.aliases.in_cells')
    def test_every_cell_with_the_api_database(self, in_cells):
        instance = mock.Mock(uuid=SERVER['uuid'], display_name='p1',
                             host='compute2', project_id='owner-project')
        in_cells.return_value = [instance]
        scope, servers = self._find(
            '[api_database]\nconnection = sqlite://\n'
            '[database]\nconnection = sqlite://\n')
        self.assertEqual('every cell', scope)
        self.assertEqual([SERVER], servers)

    @mock.patch('nova_cyborg.model.aliases.on_host', return_value=[])
    def test_this_host_through_the_conductor(self, on_host):
        from nova.objects import base as objects_base
        self.addCleanup(setattr, objects_base.NovaObject,
                        'indirection_api',
                        objects_base.NovaObject.indirection_api)
        scope, servers = self._find('[DEFAULT]\nhost = compute7\n')
        self.assertEqual(('host compute7', []), (scope, servers))
        self.assertEqual('compute7', on_host.call_args[0][1])
        self.assertIsNotNone(objects_base.NovaObject.indirection_api)

    @mock.patch('nova_cyborg.model.aliases.on_host',
                side_effect=RuntimeError('conductor away'))
    def test_failure_is_check_failed(self, _on_host):
        from nova.objects import base as objects_base
        self.addCleanup(setattr, objects_base.NovaObject,
                        'indirection_api',
                        objects_base.NovaObject.indirection_api)
        error = self.assertRaises(alias_check.CheckFailed, self._find,
                                  '[DEFAULT]\nhost = compute7\n')
        self.assertEqual('RuntimeError: conductor away', str(error))
