"""nova-cyborg-sidecar tells systemd it is ready only once its first cycle
ran (``Type=notify``): READY=1 on the socket systemd names in
NOTIFY_SOCKET, as sd_notify(3) says, after ``start()`` returned."""

import os
import socket

import fixtures
from oslo_config import cfg
import testtools

from sidecar.cmd import daemon
from sidecar import exception


class DaemonReadyTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(tmp, 'notify')
        self.systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(self.systemd.close)
        self.systemd.bind(self.path)
        self.systemd.settimeout(10)
        self.useFixture(fixtures.EnvironmentVariable('NOTIFY_SOCKET',
                                                     self.path))
        self.useFixture(fixtures.MockPatchObject(cfg, 'CONF',
                                                 cfg.ConfigOpts()))
        self.useFixture(fixtures.MockPatch(
            'sidecar.cmd.daemon.logging.setup'))
        self.sidecar = self.useFixture(fixtures.MockPatch(
            'sidecar.daemon.factory.build')).mock.return_value
        self.events = []
        self.sidecar.start.side_effect = lambda: self.events.append('start')

    def test_ready_after_the_first_cycle(self):
        def wait():
            # systemd has the notification by the time the daemon waits.
            self.events.append(self.systemd.recv(64))
        self.sidecar.wait.side_effect = wait
        self.assertEqual(0, daemon.main([]))
        self.assertEqual(['start', b'READY=1'], self.events)
        # Sent once: children of the daemon do not inherit the socket.
        self.assertNotIn('NOTIFY_SOCKET', os.environ)

    def test_not_ready_when_it_cannot_start(self):
        self.sidecar.start.side_effect = exception.SidecarError('no RP')
        self.assertEqual(1, daemon.main([]))
        self.systemd.setblocking(False)
        self.assertRaises(BlockingIOError, self.systemd.recv, 64)
