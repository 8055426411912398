"""oslo.messaging plumbing: the cyborg-conductor client and the cyborg-agent
RPC server, with Cyborg 17's topics, versions and serialization."""

import oslo_messaging as messaging
from oslo_context import context as o_context

from sidecar.report import objects

#: Cyborg's services set ``control_exchange = cyborg`` for themselves
#: (cyborg.common.config); the sidecar talks on the same exchange.
EXCHANGE = 'cyborg'
CONDUCTOR_TOPIC = 'cyborg-conductor'
AGENT_TOPIC = 'cyborg-agent'
RPC_API_VERSION = '1.0'


class ContextSerializer(messaging.Serializer):
    """Cyborg's RequestContextSerializer: contexts travel as dicts."""

    def __init__(self, base):
        self._base = base

    def serialize_entity(self, context, entity):
        return self._base.serialize_entity(context, entity)

    def deserialize_entity(self, context, entity):
        return self._base.deserialize_entity(context, entity)

    def serialize_context(self, context):
        return context.to_dict()

    def deserialize_context(self, context):
        return o_context.RequestContext.from_dict(context)


def serializer():
    return ContextSerializer(objects.WireSerializer())


def get_transport(conf):
    return messaging.get_rpc_transport(conf)


def admin_context():
    return o_context.RequestContext(is_admin=True, overwrite=False)


class ConductorClient:
    """The part of cyborg-conductor's RPC API an agent calls."""

    def __init__(self, conf, transport):
        target = messaging.Target(exchange=EXCHANGE, topic=CONDUCTOR_TOPIC,
                                  version=RPC_API_VERSION)
        self._client = messaging.get_rpc_client(
            transport, target, version_cap=RPC_API_VERSION,
            serializer=serializer())
        self._timeout = conf.sidecar.rpc_response_timeout

    def report_data(self, context, hostname, driver_device_list):
        cctxt = self._client.prepare(timeout=self._timeout)
        cctxt.call(context, 'report_data', hostname=hostname,
                   driver_device_list=driver_device_list)


def get_agent_server(transport, host, endpoint):
    target = messaging.Target(exchange=EXCHANGE, topic=AGENT_TOPIC,
                              server=host,
                              version=RPC_API_VERSION)
    return messaging.get_rpc_server(
        transport, target, [endpoint], executor='threading',
        serializer=serializer())
