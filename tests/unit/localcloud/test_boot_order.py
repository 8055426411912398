"""A simulated host starts nova-compute only once its sidecar said READY=1
on the notify socket, as systemd does for the sidecar's ``Type=notify``
unit ordered ``Before=nova-compute`` (localcloud.boot_order)."""

import os
import socket
import threading
from unittest import mock

import fixtures
import testtools

from localcloud import boot_order
from sidecar.cmd import daemon

#: How long the sidecar's first cycle lasts here at most: nova-compute
#: started meanwhile would end it at once (see _Host.first_cycle).
FIRST_CYCLE = 1.0


class _Host:
    """The sidecar (its first cycle in a thread, then READY=1 through the
    daemon's own code) and nova-compute, recording what happens."""

    def __init__(self, ready=True):
        self.events = []
        self.compute_started = threading.Event()
        self.ready = ready
        self.sidecar = mock.Mock()
        self.sidecar.start.side_effect = self.first_cycle

    def first_cycle(self):
        # Ends early if nova-compute starts while it runs (the ordering
        # is broken): the events then say so.
        started = self.compute_started.wait(FIRST_CYCLE)
        self.events.append(('first cycle done', started))

    def start_sidecar(self):
        def run():
            if self.ready:
                daemon.start_and_notify(self.sidecar)
            else:
                self.sidecar.start()
        threading.Thread(target=run, daemon=True).start()

    def start_compute(self):
        self.compute_started.set()
        self.events.append(('nova-compute', 'NOTIFY_SOCKET' in os.environ))
        return 'compute ran'


class BootOrderTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.EnvironmentVariable('NOTIFY_SOCKET'))
        self.lines = []

    def test_nova_compute_starts_after_the_sidecars_ready(self):
        host = _Host()
        result = boot_order.start_in_order(
            host.start_sidecar, host.start_compute, out=self.lines.append)
        self.assertEqual('compute ran', result)
        # The first cycle ran to its end with nova-compute not started;
        # nova-compute has no NOTIFY_SOCKET (the sidecar's READY was the
        # only one).
        self.assertEqual([('first cycle done', False),
                          ('nova-compute', False)], host.events)
        self.assertIn('Sidecar READY', self.lines[0])

    def test_no_ready_no_nova_compute(self):
        host = _Host(ready=False)
        self.assertRaises(boot_order.NotReady, boot_order.start_in_order,
                          host.start_sidecar, host.start_compute,
                          timeout=FIRST_CYCLE + 1, out=self.lines.append)
        self.assertFalse(host.compute_started.is_set())
        self.assertNotIn('NOTIFY_SOCKET', os.environ)
        self.assertEqual([], self.lines)


class NotifySocketTest(testtools.TestCase):
    """sd_notify(3): newline-separated assignments in one datagram."""

    def _send(self, name, data):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.connect('\0' + name[1:])
        sock.sendall(data)

    def test_ready_among_other_assignments(self):
        name = '@nova-cyborg-test-notify-%d' % os.getpid()
        notify = boot_order.NotifySocket(name)
        self.addCleanup(notify.close)
        self._send(name, b'STATUS=restoring devices')
        self._send(name, b'STATUS=reported\nREADY=1')
        notify.wait_ready(timeout=5)

    def test_status_alone_is_not_ready(self):
        name = '@nova-cyborg-test-notify2-%d' % os.getpid()
        notify = boot_order.NotifySocket(name)
        self.addCleanup(notify.close)
        self._send(name, b'STATUS=READY=1 soon')
        self.assertRaises(boot_order.NotReady, notify.wait_ready,
                          timeout=0.2)
