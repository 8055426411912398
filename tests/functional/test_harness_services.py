"""The harness's shared services: RabbitMQ vhosts and a real Glance.

No Nova here. Needs the broker of ``tools/rabbitmq start``.
"""

import hashlib
import json
import os
import subprocess
import sys
import uuid

import fixtures
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
import oslo_messaging
import testtools
from testtools import content

from tests.functional.harness import broker
from tests.functional.harness import child
from tests.functional.harness import glance_fixture

REPO_ROOT = child.REPO_ROOT
FUNCTION_ID_PROPERTY = 'accel:function_id'
CHILD_TIMEOUT = 60

# What cyborg-conductor does (cyborg/objects/extarq/fpga_ext_arq.py), run
# in a process of its own with OS_CLIENT_CONFIG_FILE set. Prints JSON.
SDK_LOOKUP = """\
import json
import sys

from openstack import connection

image_id, function_id = sys.argv[1:]
conn = connection.Connection(cloud='devstack-admin')
by_id = conn.image.get('/images/' + image_id)
by_function = conn.image.get('/images',
                             params={'accel:function_id': function_id})
print(json.dumps({
    'by_id': [by_id.status_code, by_id.json()],
    'by_function': [by_function.status_code, by_function.json()]}))
"""

# A tiny oslo.messaging RPC server: answers ``whoami`` with its pid, says
# "ready" once consuming, stops when its stdin is closed.
RPC_SERVER = """\
import os
import sys

from oslo_config import cfg
import oslo_messaging


class Endpoint:
    def whoami(self, ctxt, token):
        return {'pid': os.getpid(), 'token': token}


url, topic = sys.argv[1:]
transport = oslo_messaging.get_rpc_transport(cfg.CONF, url=url)
server = oslo_messaging.get_rpc_server(
    transport,
    oslo_messaging.Target(exchange='harness', topic=topic, server='child'),
    [Endpoint()])
server.start()
print('ready', flush=True)
sys.stdin.read()
server.stop()
server.wait()
transport.cleanup()
"""


def _tail(path, lines):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-lines:])
    except OSError as e:
        return '(%s)' % e


def _child_env(**extra):
    # Only what the child needs: no OS_* of the caller's shell (OS_CLOUD,
    # OS_AUTH_URL, ...) can steer openstacksdk elsewhere.
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env['PYTHONPATH'] = REPO_ROOT
    env.update(extra)
    return env


class HarnessServicesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(
            int(os.environ.get('OS_TEST_TIMEOUT', 160)), gentle=True))
        self.broker = self.useFixture(broker.BrokerFixture())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.addDetail('vhost', content.text_content(
            '%s created in %.3f s' % (self.broker.vhost,
                                      self.broker.setup_time)))

    def _start_glance(self):
        self.glance = self.useFixture(glance_fixture.GlanceFixture())
        self.addDetail('glance', content.text_content(
            '%s started in %.2f s' % (self.glance.endpoint,
                                      self.glance.startup_time)))
        self._attach_on_failure('glance.log', self.glance.log_path)

    def _attach_on_failure(self, name, path, lines=60):
        # Read at once: the file is gone after the cleanups.
        def attach(exc_info):
            self.addDetail(name, content.text_content(_tail(path, lines)))
        self.addOnException(attach)

    def test_sdk_finds_bitstream_by_function_id(self):
        self._start_glance()
        function_id = str(uuid.uuid4())
        image_id = self.glance.create_image(
            'bitstream', b'\x5a' * 1024, {FUNCTION_ID_PROPERTY: function_id})
        self.glance.create_image('other', b'\x00' * 16,
                                 {FUNCTION_ID_PROPERTY: str(uuid.uuid4())})
        clouds = self.glance.clouds_yaml(
            os.path.join(self.tmp, 'clouds.yaml'))

        proc = subprocess.run(
            [sys.executable, '-c', SDK_LOOKUP, image_id, function_id],
            env=_child_env(OS_CLIENT_CONFIG_FILE=clouds), cwd=self.tmp,
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=CHILD_TIMEOUT)
        self.assertEqual(0, proc.returncode, proc.stderr)
        result = json.loads(proc.stdout)

        status, image = result['by_id']
        self.assertEqual(200, status)
        self.assertEqual(image_id, image['id'])
        self.assertEqual(function_id, image[FUNCTION_ID_PROPERTY])
        status, body = result['by_function']
        self.assertEqual(200, status)
        self.assertEqual([image_id], [i['id'] for i in body['images']])

    def test_bitstream_downloads_intact_with_keystoneauth(self):
        self._start_glance()
        data = os.urandom(3 * 1024 * 1024 + 17)
        image_id = self.glance.create_image(
            'bitstream', data, {FUNCTION_ID_PROPERTY: str(uuid.uuid4())})

        # The sidecar's way: a keystoneauth Adapter from a [glance] group.
        conf = cfg.ConfigOpts()
        ks_loading.register_session_conf_options(conf, 'glance')
        ks_loading.register_auth_conf_options(conf, 'glance')
        ks_loading.register_adapter_conf_options(conf, 'glance')
        conf([], default_config_files=[])
        for key, value in self.glance.keystoneauth_options().items():
            conf.set_override(key, value, group='glance')
        conf.set_override('service_type', 'image', group='glance')
        adapter = ks_loading.load_adapter_from_conf_options(
            conf, 'glance',
            session=ks_loading.load_session_from_conf_options(
                conf, 'glance'),
            auth=ks_loading.load_auth_from_conf_options(conf, 'glance'),
            raise_exc=False)

        meta = adapter.get('/v2/images/%s' % image_id).json()
        resp = adapter.get('/v2/images/%s/file' % image_id)
        self.assertEqual(200, resp.status_code)
        self.assertEqual(len(data), len(resp.content))
        self.assertEqual(data, resp.content)
        self.assertEqual('sha512', meta['os_hash_algo'])
        self.assertEqual(hashlib.sha512(data).hexdigest(),
                         meta['os_hash_value'])

    def test_rpc_call_crosses_processes(self):
        topic = 'harness-%s' % uuid.uuid4().hex[:8]
        log_path = os.path.join(self.tmp, 'rpc-server.log')
        with open(log_path, 'wb') as log:
            server = subprocess.Popen(
                [sys.executable, '-c', RPC_SERVER,
                 self.broker.transport_url, topic],
                env=_child_env(), cwd=self.tmp, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, text=True,
                start_new_session=True)
        self.addCleanup(self._stop_child, server)
        self._attach_on_failure('rpc-server.log', log_path)
        line = server.stdout.readline()
        self.assertEqual('ready', line.strip(), 'RPC server did not start')

        # The global CONF: oslo.messaging 18.3 registers its tracing
        # options there only, so a private ConfigOpts fails in call()
        # (NoSuchOptError: oslo_messaging_tracing). Nova has set its
        # control_exchange there, hence the explicit exchange.
        transport = oslo_messaging.get_rpc_transport(
            cfg.CONF, url=self.broker.transport_url)
        self.addCleanup(transport.cleanup)
        client = oslo_messaging.get_rpc_client(
            transport, oslo_messaging.Target(exchange='harness', topic=topic),
            timeout=30)
        token = uuid.uuid4().hex
        reply = client.call({}, 'whoami', token=token)

        self.assertEqual({'pid': server.pid, 'token': token}, reply)
        self.assertNotEqual(os.getpid(), reply['pid'])

    @staticmethod
    def _stop_child(proc):
        if proc.poll() is None:
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
