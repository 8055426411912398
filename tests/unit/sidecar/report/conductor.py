"""Read a report as cyborg-conductor does, with the Cyborg installed.

oslo.versionedobjects keeps one registry per process, keyed by object name:
Cyborg's ``DriverDevice`` and the sidecar's cannot both be loaded in one
test process, and a conductor is another process anyway. So the payload the
sidecar's serializer makes goes, as JSON (what oslo.messaging puts on the
wire), to a child Python of the same environment, which loads the real
``cyborg.objects`` and deserializes each device with Cyborg's own
``CyborgObjectSerializer`` (what cyborg-conductor's RPC server uses).
"""

import importlib.metadata
import json
import subprocess
import sys

from oslo_serialization import jsonutils

from sidecar.daemon import rpc

_READER = r'''
import json, sys
from cyborg.objects import base
from cyborg.objects.driver_objects import driver_device
serializer = base.CyborgObjectSerializer()
out = []
for primitive in json.load(sys.stdin):
    try:
        dev = serializer.deserialize_entity(None, primitive)
    except Exception as exc:
        out.append({'error': type(exc).__name__, 'message': str(exc)})
        continue
    assert isinstance(dev, driver_device.DriverDevice), type(dev)
    out.append({
        'version': dev.VERSION,  # as read (obj_from_primitive sets it)
        'type': dev.type,
        'vendor': dev.vendor,
        'cpid_info': dev.controlpath_id.cpid_info,
        'deployables': [d.name for d in dev.deployable_list],
        'attributes': [[[a.key, a.value] for a in d.attribute_list]
                       for d in dev.deployable_list],
        'device_state': (dev.device_state
                         if 'device_state' in dev.fields and
                         dev.obj_attr_is_set('device_state') else None),
    })
json.dump(out, sys.stdout)
'''


def cyborg_major():
    """The major version of the installed openstack-cyborg."""
    return int(importlib.metadata.version('openstack-cyborg').split('.')[0])


def wire(driver_device_list):
    """What ``report_data``'s ``driver_device_list`` is on the wire."""
    return json.loads(jsonutils.dumps(
        rpc.serializer().serialize_entity(None, driver_device_list)))


def read(primitives):
    """Cyborg's view of each primitive: a dict of its fields, or of the
    error its ``obj_from_primitive`` raised."""
    done = subprocess.run(
        [sys.executable, '-c', _READER], input=json.dumps(primitives),
        capture_output=True, text=True, timeout=120, check=False)
    if done.returncode:
        raise AssertionError('Cyborg reader failed: %s' % done.stderr)
    return json.loads(done.stdout)
