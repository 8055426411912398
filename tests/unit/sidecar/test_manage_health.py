"""``nova-cyborg-sidecar-manage device list`` shows a device's health:
ok, unhealthy or unknown, with the reason in ``held``."""

import io
import json
import os

import fixtures
import testtools

from sidecar.cmd import manage
from sidecar.daemon import control
from sidecar.discovery import health
from tests.unit.sidecar import test_manage

PF = test_manage.PF


class ListHealthTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        state = self.useFixture(fixtures.TempDir()).path
        self.conf_file = os.path.join(state, 'sidecar.conf')
        with open(self.conf_file, 'w') as f:
            f.write('[sidecar]\nstate_path = %s\n' % state)
        self.sidecar = test_manage.FakeSidecar()
        server = control.ControlServer(state, self.sidecar)
        server.start()
        self.addCleanup(server.stop)

    def listed(self):
        out, err = io.StringIO(), io.StringIO()
        code = manage.main(['--config-file', self.conf_file, 'device',
                            'list', '-f', 'json'], stdout=out, stderr=err)
        self.assertEqual((0, ''), (code, err.getvalue()))
        (row,) = json.loads(out.getvalue())
        return row['health'], row['held']

    def test_ok_unhealthy_unknown(self):
        self.assertEqual(('ok', {}), self.listed())
        fault = ('Surprise Down at upstream port 0000:80:01.0 (1): the link '
                 'to the device went down')
        self.sidecar.holds.hold(PF, 'unhealthy', fault)
        self.assertEqual(('unhealthy', {'unhealthy': fault}), self.listed())
        unknown = health.UNKNOWN % (
            600, 'last good reading at 2026-11-26T14:00:00Z',
            'config: [Errno 5] EIO')
        self.sidecar.holds.hold(PF, 'unhealthy', unknown)
        self.assertEqual(('unknown', {'unhealthy': unknown}), self.listed())
        self.sidecar.holds.release(PF, 'unhealthy')
        self.assertEqual(('ok', {}), self.listed())
