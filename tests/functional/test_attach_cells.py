"""The accelerator actions travel on the message queue of the server's cell.

nova-api looks the server up (``compute_api.get``), which targets its
context at the server's cell (``set_target_cell``: the cell's database and
message queue, ``context.mq_connection``). nova-cyborg's RPC client comes
from Nova's ``rpc.ClientRouter`` (:mod:`nova_cyborg.clients.compute_rpc`), so
its one message, the cast (nova-api makes no call to the compute), is sent on
that queue, where the server's compute listens in a deployment whose cells have
queues of their own.

Nova's RPC fixture folds every cell's queue into one in-memory bus, so the
test checks what nova-api does on the real path: its context is targeted
at the cell when nova-cyborg sends, and the client it sends with is on the
context's queue. That the router follows a queue other than the global
one is shown in ``tests/unit/test_rpc.py``.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

import fixtures  # noqa: E402
from nova import rpc as nova_rpc  # noqa: E402

from nova_cyborg.clients import compute_rpc as rpc  # noqa: E402


class CellQueueTest(attach_base.AttachTestBase):

    def test_cast_uses_the_cells_queue(self):
        server = self.boot(self._create_flavor(name='plain'))
        sent = []
        real = rpc._client

        def client(context, host, **kwargs):
            prepared = real(context, host, **kwargs)
            sent.append((context.mq_connection, prepared.transport,
                         prepared.target.server))
            return prepared
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.compute_rpc._client', client))
        self.api.post_server_action(
            server['id'], {'addAccelerator': {'device_profile': self.dp}})
        self._wait_for_instance_action_event(
            server, 'addAccelerator',
            attach_base.ACTION_EVENTS['addAccelerator'], 'Success')
        self.assertEqual(1, len(sent))
        for mq_connection, transport, host in sent:
            self.assertIsNotNone(mq_connection)
            self.assertIs(mq_connection, transport)
            self.assertEqual('compute1', host)
        self.assertIsInstance(rpc.router(), nova_rpc.ClientRouter)
