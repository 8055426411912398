"""Which comes first: Cyborg's answer to the conductor's bind, or
nova-compute's wait for the ARQs.

A first build whose compute serves capability 1.2 is cast while Cyborg
binds (nova_cyborg.flows.boot.early_arqs), so the order is a race between
Cyborg's PATCH and nova-compute's build. A test that needs one order uses
a fixture here:

* :class:`CastFirst`: the conductor's bind reaches Cyborg only once
  nova-compute has begun to wait for the server's ARQs
  (``ComputeManager._get_bound_arq_resources``): the build was cast
  before the bind answered, and the compute waits for the conductor's
  word on it. ``bind`` (optional) replaces the call to Cyborg.
* :class:`Joined`: the conductor never casts first (as for a compute that
  does not report capability 1.2): the compute's wait begins after
  Cyborg answered.
* :class:`Order`: neither; it only records.

Each records what came first for each server (:meth:`Order.first`).
"""

import threading

import fixtures
from nova.compute import manager as compute_manager

from nova_cyborg.clients import cyborg as nc_client
from tests.functional.harness import waits

#: How long a held bind waits for nova-compute: far more than a build
#: takes to get there, far less than a test's timeout.
HOLD = 60


def _instance_of(bindings):
    return next(iter(bindings.values()))['instance_uuid']


class Order(fixtures.Fixture):
    """Records what came first; changes nothing."""

    def _setUp(self):
        self._lock = threading.Lock()
        #: (event, instance UUID) in the order they happened.
        self.order = []
        real_wait = compute_manager.ComputeManager._get_bound_arq_resources
        real_bind = nc_client.CyborgClient.bind_arqs
        fixture = self

        def _get_bound_arq_resources(manager, context, instance, arq_uuids):
            fixture._note('compute waits', instance.uuid)
            return real_wait(manager, context, instance, arq_uuids)

        def bind_arqs(cyclient, bindings):
            uuid = _instance_of(bindings)
            fixture.before_bind(uuid)
            try:
                return fixture.bind(cyclient, bindings, real_bind)
            finally:
                fixture._note('bind answered', uuid)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.manager.ComputeManager._get_bound_arq_resources',
            _get_bound_arq_resources))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))

    def _note(self, what, instance_uuid):
        with self._lock:
            self.order.append((what, instance_uuid))

    def seen(self, what, instance_uuid):
        with self._lock:
            return (what, instance_uuid) in self.order

    def first(self, instance_uuid):
        """What came first for the server: 'compute waits' or 'bind
        answered'."""
        with self._lock:
            return next(what for what, uuid in self.order
                        if uuid == instance_uuid)

    def before_bind(self, instance_uuid):
        pass

    def bind(self, cyclient, bindings, real_bind):
        return real_bind(cyclient, bindings)


class CastFirst(Order):

    def __init__(self, bind=None):
        super().__init__()
        self._bind = bind

    def before_bind(self, instance_uuid):
        waits.wait_until(lambda: self.seen('compute waits', instance_uuid),
                         'nova-compute waiting for the ARQs before Cyborg '
                         'answers the bind', timeout=HOLD)

    def bind(self, cyclient, bindings, real_bind):
        if self._bind is not None:
            return self._bind(cyclient, bindings)
        return real_bind(cyclient, bindings)


class Joined(Order):

    def _setUp(self):
        super()._setUp()
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.model.capability.serves', return_value=False))
