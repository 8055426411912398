"""The sweep of accelerator requests of servers that are gone.

A server whose delete did not reach Cyborg leaves its ARQ Bound; one sweep,
run in one place, deletes it, and touches nothing else: not the ARQ of a
living server, not an ARQ this Nova did not make.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import fixtures  # noqa: E402

from nova_cyborg.flows.cleanup import sweep  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


class SweepTest(base.AcceleratorTestBase):

    def test_sweep_deletes_only_what_deleted_servers_left(self):
        self.start_accel_compute('compute1')
        dp, flavor = self.create_profile_flavor(PROFILE)
        kept = self.boot(flavor)
        gone = self.boot(flavor)
        # The delete does not reach Cyborg (logged, as upstream): the
        # deleted server's ARQ stays Bound.
        with fixtures.MockPatch(
                'nova_cyborg.flows.cleanup.delete.'
                'delete_arqs_of_deleting_instance'):
            self._delete_server(gone)
        (left,) = self.cyborg.list_arqs(gone['id'])
        self.assertEqual('Bound', left['state'])
        # An ARQ someone else made straight in Cyborg, never bound.
        (foreign,) = self.cyborg.request(
            'POST', '/accelerator_requests',
            json={'device_profile_name': dp}, expected=(201,)).json()['arqs']

        self.assertEqual({'servers': 1, 'arqs': 1, 'failed': []},
                         sweep.sweep(since=3600))
        self.assertEqual([], self.cyborg.list_arqs(gone['id']))
        self.assert_accelerated(kept, 1)
        self.assertEqual('Initial',
                         self.cyborg.get_arq(foreign['uuid'])['state'])
        # Nothing is left to do: the next sweep only asks.
        self.assertEqual({'servers': 1, 'arqs': 0, 'failed': []},
                         sweep.sweep(since=3600))
