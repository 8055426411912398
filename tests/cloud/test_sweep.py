"""nova-cyborg-sweep-arqs against the real services (issue 26).

The command crashed on every run (NoSuchOptError for [DEFAULT]
transport_url) and its only test mocked the sweep. Here a server's delete
cannot reach Cyborg (its API is killed meanwhile, as in an outage): the
server is gone, its ARQ stays Bound, holding its attach handle. The
operator then runs the real command with the cloud's nova.conf; it deletes
that ARQ and touches no other tenant's.
"""

import json
import os
import subprocess
import time

from localcloud import configs
from tests.cloud import base


class SweepTest(base.CloudTestCase):

    def sweep(self, since):
        """The operator runs the sweep with the cloud's nova.conf."""
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        proc = subprocess.run(
            [self.layout.bin('nova-cyborg-sweep-arqs'), '--config-file',
             configs.nova_file(self.layout), '--since', str(since)],
            capture_output=True, text=True, env=env,
            timeout=base.DEADLINE)
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def cyborg_down(self):
        """Cyborg's API killed; started again at cleanup if a test leaves
        it stopped (``service start`` only waits for a running one)."""
        self.addCleanup(self.localcloud, 'service', 'start', 'cyborg-api')
        self.localcloud('service', 'stop', 'cyborg-api')

    def test_sweep_deletes_what_a_delete_left(self):
        started = time.monotonic()
        flavor = self.create_accelerator_flavor()
        server = self.boot(flavor)
        other_tenant = self._owner()
        kept = self.boot(flavor, conn=other_tenant)
        arq, = self.arqs(server['id'])
        kept_arq, = self.arqs(kept['id'])

        self.cyborg_down()
        self.delete(server['id'])
        self.localcloud('service', 'start', 'cyborg-api')
        # The delete could not reach Cyborg: the ARQ is still Bound.
        self.assertEqual([(arq['uuid'], 'Bound')],
                         [(a['uuid'], a['state'])
                          for a in self.arqs(server['id'])])
        self.assertEqual({}, self.allocations(server['id']))

        # Only what was deleted since this test began.
        since = int(time.monotonic() - started) + 2
        self.assertEqual({'servers': 1, 'arqs': 1, 'failed': []},
                         self.sweep(since))
        self.assertEqual([], self.arqs(server['id']))
        # The other tenant's server keeps its ARQ, Bound to its host.
        self.assertEqual(
            [(kept_arq['uuid'], 'Bound', kept['OS-EXT-SRV-ATTR:host'])],
            [(a['uuid'], a['state'], a['hostname'])
             for a in self.arqs(kept['id'])])
        self.assertEqual('ACTIVE', self.server(kept['id'])['status'])
        # A second run finds nothing more to do.
        self.assertEqual({'servers': 1, 'arqs': 0, 'failed': []},
                         self.sweep(since))
