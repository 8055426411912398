"""Real Cyborg API and conductor in one child process, for functional tests.

Run by :class:`tests.functional.harness.cyborg_fixture.CyborgFixture` as::

    python -m tests.functional.harness.cyborg_process \\
        --config-file cyborg.conf --port-file port

Never import this module from the test process: it selects oslo.service's
threading backend and imports Cyborg, whose config options clash with
Nova's on the global CONF.

The process creates the SQLite schema, starts the real cyborg-conductor RPC
server and the real Cyborg API on ``transport_url = fake://`` (both live in
this process, which is what makes ``fake://`` work), serves on 127.0.0.1:

``/accelerator/...``
    The Cyborg API (``/accelerator/v2`` is what Nova is pointed at), behind
    oslo.middleware's RequestId and the identity stand-in of
    :mod:`tests.functional.harness.identity` instead of keystonemiddleware.

``POST /_harness/report_data``
    Stands in for a cyborg-agent's periodic report: the JSON body is turned
    into Cyborg driver objects and sent with the real
    ``ConductorAPI.report_data`` over RPC, so the real conductor diffs them
    against its DB and writes Placement. As with the real agent, the body
    is the host's FULL device list: devices left out are deleted. Body::

        {"hostname": "compute1",       # the compute node RP name
         "devices": [{
             "vendor": "8086",
             "model": "PAC Arria10",
             "type": "FPGA",           # GPU|FPGA|AICHIP|QAT|NIC|SSD|...
             "std_board_info": {"device_id": "09c4", "class": "..."},
             "vendor_board_info": {...},                   # optional
             "controlpath_id": {
                 "cpid_type": "PCI",
                 "cpid_info": {"domain": "0000", "bus": "0c",
                               "device": "00", "function": "0"}},
             "deployables": [{
                 "name": "compute1_0000_0c_00_0",  # unique: "<host>_<bdf>"
                 "num_accelerators": 2,
                 "driver_name": "intel_fpga",
                 "attributes": {"rc": "FPGA",
                                "trait0": "CUSTOM_FAKE_DEVICE"},
                 "attach_handles": [{
                     "attach_type": "PCI",  # PCI|MDEV|TEST_PCI
                     "attach_info": {"domain": "0000", "bus": "0c",
                                     "device": "00", "function": "1"},
                     "in_use": false}]}]}]}

    Dicts in ``std_board_info``, ``vendor_board_info``, ``cpid_info`` and
    ``attach_info`` are sent as JSON strings with sorted keys, which is what
    the real drivers send (``pci_str_to_json``); strings are passed as is.
    Optional device keys: ``stub`` (bool), ``device_state``. Answers 200
    ``{"hostname": ..., "devices": <count>}``, 400 for a malformed body, 500
    with the error if the conductor failed (e.g. no compute node RP).
"""

import argparse
import sys
import threading
import time
import traceback
from unittest import mock

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

from oslo_log import log as logging  # noqa: E402
from oslo_middleware import request_id  # noqa: E402
from oslo_serialization import jsonutils  # noqa: E402

from cyborg.api import app as api_app  # noqa: E402
from cyborg.common import constants  # noqa: E402
from cyborg.common import service  # noqa: E402
from cyborg.conductor import rpcapi  # noqa: E402
from cyborg import context as cyborg_context  # noqa: E402
from cyborg.db import migration  # noqa: E402
from cyborg.objects.driver_objects import driver_attach_handle  # noqa: E402
from cyborg.objects.driver_objects import driver_attribute  # noqa: E402
from cyborg.objects.driver_objects import driver_controlpath_id  # noqa: E402
from cyborg.objects.driver_objects import driver_deployable  # noqa: E402
from cyborg.objects.driver_objects import driver_device  # noqa: E402

from tests.functional.harness import child  # noqa: E402
from tests.functional.harness import identity  # noqa: E402
from tests.functional.harness import loopback  # noqa: E402

LOG = logging.getLogger(__name__)

API_PREFIX = '/accelerator'
REPORT_PATH = '/_harness/report_data'


def _json_str(value):
    """Dicts become sorted-key JSON strings (as drivers send them)."""
    if value is None or isinstance(value, str):
        return value
    return jsonutils.dumps(value, sort_keys=True)


def _attach_handle(ah):
    return driver_attach_handle.DriverAttachHandle(
        attach_type=ah['attach_type'],
        attach_info=_json_str(ah['attach_info']),
        in_use=bool(ah.get('in_use', False)))


def _deployable(dep):
    return driver_deployable.DriverDeployable(
        name=dep['name'],
        num_accelerators=int(dep['num_accelerators']),
        driver_name=dep.get('driver_name'),
        attribute_list=[
            driver_attribute.DriverAttribute(key=key, value=str(value))
            for key, value in sorted(dep.get('attributes', {}).items())],
        attach_handle_list=[
            _attach_handle(ah) for ah in dep.get('attach_handles', [])])


def driver_devices(devices):
    """Build DriverDevice objects from the JSON documented above."""
    result = []
    for dev in devices:
        cpid = dev['controlpath_id']
        fields = dict(
            vendor=dev['vendor'],
            model=dev['model'],
            type=dev['type'],
            std_board_info=_json_str(dev.get('std_board_info')),
            vendor_board_info=_json_str(dev.get('vendor_board_info')),
            controlpath_id=driver_controlpath_id.DriverControlPathID(
                cpid_type=cpid.get('cpid_type', 'PCI'),
                cpid_info=_json_str(cpid['cpid_info'])),
            deployable_list=[_deployable(d)
                             for d in dev.get('deployables', [])],
            stub=bool(dev.get('stub', False)))
        if dev.get('device_state') is not None:
            fields['device_state'] = dev['device_state']
        result.append(driver_device.DriverDevice(**fields))
    return result


def _respond(start_response, status, body):
    data = jsonutils.dump_as_bytes(body)
    start_response(status, [('Content-Type', 'application/json'),
                            ('Content-Length', str(len(data)))])
    return [data]


class HarnessApp:
    """Mounts the Cyborg API under /accelerator plus the control route."""

    def __init__(self, api):
        self.api = api
        self.conductor_api = rpcapi.ConductorAPI()

    def __call__(self, environ, start_response):
        path = environ.get('PATH_INFO') or '/'
        if path == API_PREFIX or path.startswith(API_PREFIX + '/'):
            environ['SCRIPT_NAME'] = (environ.get('SCRIPT_NAME', '')
                                      + API_PREFIX)
            environ['PATH_INFO'] = path[len(API_PREFIX):] or '/'
            return self.api(environ, start_response)
        if path == REPORT_PATH and environ['REQUEST_METHOD'] == 'POST':
            return self.report_data(environ, start_response)
        return _respond(start_response, '404 Not Found',
                        {'error': 'no route for %s' % path})

    def report_data(self, environ, start_response):
        try:
            length = int(environ.get('CONTENT_LENGTH') or 0)
            body = jsonutils.loads(environ['wsgi.input'].read(length))
            hostname = body['hostname']
            devices = driver_devices(body['devices'])
        except Exception as e:
            return _respond(start_response, '400 Bad Request',
                            {'error': '%s: %s' % (type(e).__name__, e)})
        ctxt = cyborg_context.get_admin_context()
        try:
            self.conductor_api.report_data(ctxt, hostname, devices)
        except Exception as e:
            LOG.exception('report_data for %s failed', hostname)
            return _respond(start_response, '500 Internal Server Error',
                            {'error': '%s: %s' % (type(e).__name__, e),
                             'traceback': traceback.format_exc()})
        return _respond(start_response, '200 OK',
                        {'hostname': hostname, 'devices': len(devices)})


def main(argv=None):
    start = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--port-file', required=True)
    parser.add_argument('--port', type=int, default=0,
                        help='port to serve (default: a free one)')
    args = parser.parse_args(argv)
    child.exit_with_parent()

    service.prepare_service(['cyborg-harness', '--config-file',
                             args.config_file])

    # `cyborg-dbsync create_schema`: `upgrade` fails on SQLite. A restart
    # (CyborgFixture.restart) finds the schema there.
    if migration.version() is None:
        # Cyborg 16's alembic env.py applies alembic.ini's logging
        # (logging.config.fileConfig): the root's handlers replaced and
        # every existing logger disabled, so that nothing more reached
        # this log file (Cyborg 17's env.py no longer does it). The
        # service's logging stays as prepare_service set it.
        with mock.patch('logging.config.fileConfig'):
            migration.create_schema()

    conductor = service.RPCService('cyborg.conductor.manager',
                                   'ConductorManager',
                                   constants.CONDUCTOR_TOPIC)
    conductor.start()

    api = request_id.RequestId(identity.IdentityMiddleware(
        api_app.setup_app(), public_routes=identity.PUBLIC_ROUTES))
    server, url = loopback.serve(HarnessApp(api), port=args.port)
    child.write_port(args.port_file, server.server_port)
    LOG.info('Cyborg harness serving %s%s/v2; ready in %.2f s',
             url, API_PREFIX, time.monotonic() - start)

    threading.Event().wait()


if __name__ == '__main__':
    sys.exit(main())
