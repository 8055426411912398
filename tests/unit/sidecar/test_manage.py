"""The host CLI and the daemon's control socket."""

import io
import json
import os
import stat
from unittest import mock

import fixtures
import testtools

from sidecar.cmd import manage
from sidecar.daemon import control
from sidecar.discovery import domains
from sidecar.discovery import guests
from sidecar.state import holds
from tests.unit.sidecar import test_reconcile as tr

PF = '0000:81:00.0'


class FakeSidecar:
    """The parts of a running Sidecar the control socket uses."""

    def __init__(self):
        self.conf = mock.Mock(host='compute1')
        self.inventory = mock.Mock(**{'devices.return_value':
                                      [tr._device(PF)]})
        self.inventory.device.return_value = tr._device(PF)
        self.holds = holds.Holds()
        self.holds.admit([PF], in_service={PF})
        self.placement = mock.Mock(**{
            'find_provider.return_value': 'rp',
            'read_provider.side_effect': self._read})
        self.programs = mock.Mock(**{
            'busy_with.return_value': False,
            'domains_in_use.return_value': {PF: 'instance-1'},
            'jobs.return_value': [(PF, {'image': 'img', 'trait': 'T',
                                        'started': 1, 'reserved': {}})]})
        #: No guest watch: domains from the programs.
        self.watch = None
        self.cycles = 0

    def _read(self, rp):
        reserved = 4 if self.holds.held(PF) else 0
        return {'FPGA': {'total': 4, 'reserved': reserved}}, set()

    def run_cycle(self):
        self.cycles += 1
        return True

    def report_now(self):
        pass


class ManageTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.state = self.useFixture(fixtures.TempDir()).path
        self.conf_file = os.path.join(self.state, 'sidecar.conf')
        with open(self.conf_file, 'w') as f:
            f.write('[sidecar]\nstate_path = %s\n' % self.state)
        self.sidecar = FakeSidecar()
        self.server = control.ControlServer(self.state, self.sidecar)
        self.server.start()
        self.addCleanup(self.server.stop)

    def run_cli(self, *args):
        out, err = io.StringIO(), io.StringIO()
        code = manage.main(['--config-file', self.conf_file] + list(args),
                           stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    def test_socket_is_private(self):
        mode = os.stat(self.server.path).st_mode
        self.assertTrue(stat.S_ISSOCK(mode))
        self.assertEqual(0o600, stat.S_IMODE(mode))

    def test_list_json(self):
        code, out, err = self.run_cli('device', 'list', '-f', 'json')
        self.assertEqual((0, ''), (code, err))
        (dev,) = json.loads(out)
        self.assertEqual(PF, dev['device'])
        self.assertTrue(dev['enabled'])
        self.assertEqual(['instance-1'], dev['in_use_by'])
        self.assertEqual({'compute1_' + PF: {'total': 4, 'reserved': 0}},
                         dev['reservation'])
        self.assertEqual([tr.F_OLD], dev['functions'])
        code, out, err = self.run_cli('device', 'list')
        self.assertIn('| %s | FPGA ' % PF, out)

    def test_list_shows_servers_and_conflicts(self):
        p = domains.Guest('instance-1', 'c0ffee00-0000-4000-8000-00000000000a')
        q = domains.Guest('instance-2', 'c0ffee00-0000-4000-8000-00000000000b')
        users = mock.Mock(**{'users.return_value': {PF: (p, q)}})
        self.sidecar.watch = guests.GuestWatch(
            'compute1', self.state, users, lambda owner: [])
        self.sidecar.watch.check([tr._device(PF)])
        code, out, err = self.run_cli('device', 'list', '-f', 'json')
        self.assertEqual((0, ''), (code, err))
        (dev,) = json.loads(out)
        self.assertEqual([str(p), str(q)], dev['in_use_by'])
        self.assertEqual(2, len(dev['conflicts']))
        self.assertIn('%s is in the definitions of 2 domains' % PF,
                      ' '.join(dev['conflicts']))
        code, out, err = self.run_cli('device', 'list')
        self.assertIn('| conflicts ', out)
        self.assertIn('holds no ARQ for it', out)

    def test_disable_then_enable_read_back(self):
        code, out, err = self.run_cli('device', 'disable', PF, '--reason',
                                      'fan', '-f', 'json')
        self.assertEqual(0, code, err)
        dev = json.loads(out)
        self.assertEqual({holds.DISABLED: 'fan'}, dev['held'])
        self.assertFalse(dev['enabled'])
        self.assertEqual(4, dev['reservation']['compute1_' + PF]['reserved'])
        self.assertEqual(1, self.sidecar.cycles)   # applied, then read
        code, out, err = self.run_cli('device', 'enable',
                                      'compute1_' + PF)
        self.assertEqual(0, code, err)
        self.assertIn('0/4', out)
        self.assertFalse(self.sidecar.holds.held(PF))

    def test_clear_errors(self):
        cleared = ['devices/.../dfl-port.0/errors/errors 0x10']
        with mock.patch('sidecar.drivers.dfl_health.clear_errors',
                        return_value=cleared) as clear:
            code, out, err = self.run_cli('device', 'clear-errors', PF)
        self.assertEqual(0, code, err)
        self.assertEqual(PF, clear.call_args[0][1].address)
        self.assertIn('| cleared ', out)
        self.assertIn('dfl-port.0/errors/errors 0x10', out)
        self.assertEqual(1, self.sidecar.cycles)

    def test_unknown_and_bad_device(self):
        code, out, err = self.run_cli('device', 'enable', '0000:99:00.0')
        self.assertEqual(1, code)
        self.assertIn('0000:99:00.0 is reported by this host', err)
        code, out, err = self.run_cli('device', 'disable', 'x;rm')
        self.assertEqual(1, code)
        self.assertIn('neither a PCI address', err)

    def test_program(self):
        image = '8a5c2d4e-3b1f-4f7e-9a0d-1c2b3a4d5e6f'
        code, out, err = self.run_cli('device', 'program', PF, image)
        self.assertEqual(0, code, err)
        self.sidecar.programs.fpga_program.assert_called_once_with(
            {'cpid_type': 'PCI', 'cpid_info': {
                'domain': '0000', 'bus': '81', 'device': '00',
                'function': '0'}}, image, 'intel')
        code, out, err = self.run_cli('device', 'program', PF, 'not-a-uuid')
        self.assertEqual(1, code)
        self.assertIn('not a Glance image UUID', err)

    def test_journal(self):
        code, out, err = self.run_cli('journal', 'show', '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual('img', json.loads(out)[0]['image'])
        code, out, err = self.run_cli('journal', 'show')
        self.assertIn('| ' + PF, out)

    def test_daemon_not_running(self):
        self.server.stop()
        code, out, err = self.run_cli('device', 'list')
        self.assertEqual(2, code)
        self.assertIn('Cannot reach nova-cyborg-sidecar', err)

    def test_bad_request_on_the_socket(self):
        answer = control.call(self.server.path, {'op': 'rm -rf'})
        self.assertFalse(answer['ok'])
