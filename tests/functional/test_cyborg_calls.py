"""What an accelerator boot and a delete cost Cyborg (issue 42, P3).

Upstream Nova asks Cyborg 4 times for a boot (the profile at the API, the
ARQs' creation and bind at the conductor, their read at the compute) and
once for a delete. nova-cyborg reads nothing twice in one service: the
ARQs nova-compute read when it waited for their binding go to the guest's
start check (nova_cyborg.model.handoff), and a delete asks under the alias of a
server only when its system metadata shows a live migration's traces
(nova_cyborg.model.bookkeeping.holders).

nova-compute's check that the card holds the FPGA function a profile's
group asks for (nova_cyborg.steps.function_check) reads no profile on a first
build: nova-api records each group's ask on the server from the profile it
read (patch 0027).
"""

from tests.functional import base  # noqa: I100 (Nova's monkey_patch first)

from tests.functional import cyborg_calls  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
ARQS = '/accelerator_requests'


class CyborgCallsTest(base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        self.dp, self.flavor = self.create_profile_flavor(PROFILE)
        self.calls = self.useFixture(cyborg_calls.CyborgCalls())

    def test_boot_reads_nothing_twice(self):
        server = self.boot(self.flavor)
        profile = ('GET', '/device_profiles', (('name', self.dp),))
        self.assertEqual(sorted([
            # nova-api: the request groups.
            profile,
            # nova-conductor: create, bind.
            ('POST', ARQS, ()),
            ('PATCH', ARQS, ()),
            # nova-compute: the bound ARQs (their attach handles), once
            # for the wait, the function check and the guest's start
            # check.
            ('GET', ARQS, (('instance', server['id']),))]),
            sorted(self.calls.take()))

    def test_delete_asks_cyborg_once(self):
        server = self.boot(self.flavor)
        self.calls.take()
        self._delete_server(server)
        deletes = self.calls.take_deletes(1)
        self.assert_nothing_left(server['id'])
        # Nothing more once the server and its ARQs are gone.
        deletes += self.calls.take()
        self.assertEqual(
            [('DELETE', ARQS, (('instance', server['id']),))], deletes)
