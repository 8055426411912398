"""What an accelerator boot and a delete cost Cyborg (issue 42, P3).

Upstream Nova asks Cyborg 4 times for a boot (the profile at the API, the
ARQs' creation and bind at the conductor, their read at the compute) and
once for a delete. nova-cyborg asks no more: what one service read travels
instead of being read again, and a delete asks under the alias of a
server only when its system metadata shows a live migration's traces
(nova_cyborg.bookkeeping.holders).
"""

from tests.functional import base  # noqa: I100 (Nova's monkey_patch first)

from tests.functional import cyborg_calls  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
ARQS = '/accelerator_requests'


class CyborgCallsTest(base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        _name, self.flavor = self.create_profile_flavor(PROFILE)
        self.calls = self.useFixture(cyborg_calls.CyborgCalls())

    def test_delete_asks_cyborg_once(self):
        server = self.boot(self.flavor)
        self.calls.take()
        self._delete_server(server)
        self.assertEqual(
            [('DELETE', ARQS, (('instance', server['id']),))],
            self.calls.take())
        self.assert_nothing_left(server['id'])
