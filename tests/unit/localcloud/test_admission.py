"""The local cloud enables the devices its sidecars admitted disabled."""

import os
from unittest import mock

import fixtures
import testtools

from localcloud import admission
from localcloud import layout as layout_mod
from localcloud import procs


def _row(address, held):
    return {'device': address, 'enabled': not held, 'held': held,
            'reservation': {'compute1_' + address: {
                'total': 4, 'reserved': 4 if held else 0}}}


class EnableNewTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.layout = layout_mod.Layout(root=root, computes=1, pfs=2)
        os.makedirs(self.layout.path('hosts', 'compute1'))
        os.makedirs(self.layout.path('logs'))
        self.devices = {'0000:81:00.0': {'new': ''},
                        '0000:82:00.0': {'disabled': 'bad fan'}}
        self.calls = []
        self.useFixture(fixtures.MonkeyPatch(
            'localcloud.admission.manage', self._manage))
        self.proc = mock.Mock(returncode=None)
        self.proc.poll.return_value = None
        self.lines = []

    def _manage(self, layout, host, *args):
        self.calls.append((host,) + args)
        if args == ('device', 'list'):
            return [_row(a, h) for a, h in sorted(self.devices.items())]
        self.assertEqual(('device', 'enable'), args[:2])
        self.devices[args[2]] = {}
        return _row(args[2], {})

    def ready(self):
        with open(self.layout.path('hosts', 'compute1', 'ready'), 'w') as f:
            f.write('1\n')

    def test_enables_only_new_devices_and_shows_the_first(self):
        self.ready()
        self.assertEqual(1, admission.enable_new(
            self.layout, {'compute1': self.proc}, out=self.lines.append))
        self.assertEqual([('compute1', 'device', 'list'),
                          ('compute1', 'device', 'enable', '0000:81:00.0')],
                         self.calls)
        # An operator's disable is not lifted.
        self.assertEqual({'disabled': 'bad fan'},
                         self.devices['0000:82:00.0'])
        text = '\n'.join(self.lines)
        self.assertIn('0000:81:00.0: enabled False, held new, reservation '
                      'compute1_0000:81:00.0 4/4', text)
        self.assertIn('device enable 0000:81:00.0', text)
        self.assertIn('0000:81:00.0: enabled True, held -, reservation '
                      'compute1_0000:81:00.0 0/4', text)

    def test_host_started_elsewhere(self):
        # localcloud.upgrade starts a host with hosts.start: no process
        # to watch, only its ready file and its sidecar.
        self.ready()
        self.assertEqual(1, admission.enable_new(
            self.layout, {'compute1': None}, out=self.lines.append))
        self.assertEqual({}, self.devices['0000:81:00.0'])

    def test_host_that_exits_is_named(self):
        self.proc.poll.return_value = 1
        self.proc.returncode = 1
        exc = self.assertRaises(procs.ServiceError, admission.enable_new,
                                self.layout, {'compute1': self.proc},
                                out=self.lines.append)
        self.assertEqual('compute1', exc.name)
        self.assertEqual([], self.calls)

    def test_host_never_ready_times_out(self):
        exc = self.assertRaises(procs.ServiceError, admission.enable_new,
                                self.layout, {'compute1': self.proc},
                                out=self.lines.append, timeout=0)
        self.assertIn('did not list 2 devices', str(exc))
