"""A private RabbitMQ vhost per test, on the broker of ``tools/rabbitmq``.

oslo.messaging's ``fake://`` driver only works inside one process; services
that run in separate processes (the Cyborg conductor, the sidecar) need a
real broker. ``tools/rabbitmq start`` runs one on 127.0.0.1 (tox does it in
``commands_pre``) and writes ``broker.env`` into its state directory
(``$NOVA_CYBORG_RABBIT_DIR``, default ``/tmp/nova-cyborg-rabbitmq``).
:class:`BrokerFixture` gives each test a vhost of its own there, so tests
running in parallel never see each other's queues and exchanges.

Vhosts are managed through the management plugin's HTTP API (a few ms),
or with ``rabbitmqctl`` (via ``tools/rabbitmq ctl``, about 1 s per test)
when the broker was started with ``NOVA_CYBORG_RABBIT_MGMT_PORT=0``.
"""

import os
import socket
import subprocess
import time
import uuid

import fixtures
import requests

from tests.functional.harness import child

REPO_ROOT = child.REPO_ROOT
RABBIT_TOOL = os.path.join(REPO_ROOT, 'tools', 'rabbitmq')
DEFAULT_STATE_DIR = '/tmp/nova-cyborg-rabbitmq'
HOST = '127.0.0.1'

# The AMQP 0-9-1 protocol header; a broker answers with a method frame
# (type 1, Connection.Start).
_AMQP_HEADER = b'AMQP\x00\x00\x09\x01'


class BrokerError(Exception):
    """The broker is not there or refused a vhost operation."""


def state_dir():
    return os.environ.get('NOVA_CYBORG_RABBIT_DIR') or DEFAULT_STATE_DIR


def read_broker_env(path=None):
    """Settings ``tools/rabbitmq start`` wrote: port, mgmt_port, node."""
    path = path or os.path.join(state_dir(), 'broker.env')
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    env = dict(line.split('=', 1) for line in lines if '=' in line)
    return {'port': int(env['port']), 'mgmt_port': int(env['mgmt_port']),
            'node': env['node']}


def amqp_ready(port, host=HOST, timeout=2.0):
    """True if ``host:port`` answers the AMQP protocol header."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(_AMQP_HEADER)
            return s.recv(1) == b'\x01'
    except OSError:
        return False


class BrokerFixture(fixtures.Fixture):
    """A fresh vhost on the tools/rabbitmq broker, deleted at cleanup.

    After setUp: ``vhost``, ``transport_url``
    (``rabbit://guest:guest@127.0.0.1:5672/<vhost>``), ``port``,
    ``setup_time`` (seconds spent creating the vhost).
    """

    USER = 'guest'
    PASSWORD = 'guest'
    TIMEOUT = 30

    def __init__(self, prefix='nova-cyborg'):
        super().__init__()
        self.prefix = prefix

    def _setUp(self):
        start = time.monotonic()
        env = read_broker_env()
        if env is None or not amqp_ready(env['port']):
            where = ('127.0.0.1:%s' % env['port'] if env
                     else 'no %s' % os.path.join(state_dir(), 'broker.env'))
            raise BrokerError(
                'No RabbitMQ broker for the functional tests (%s). Start '
                'it with `tools/rabbitmq start` (tox -e functional does '
                'it in commands_pre); `tools/rabbitmq install` installs '
                'the rabbitmq-server package.' % where)
        self.port = env['port']
        self.mgmt_port = env['mgmt_port']
        self.vhost = '%s-%d-%s' % (self.prefix, os.getpid(),
                                   uuid.uuid4().hex[:12])
        self.session = requests.Session()
        self.session.auth = (self.USER, self.PASSWORD)
        self.addCleanup(self.session.close)

        self._create_vhost()
        self.addCleanup(self._delete_vhost)
        self.transport_url = 'rabbit://%s:%s@%s:%d/%s' % (
            self.USER, self.PASSWORD, HOST, self.port, self.vhost)
        self.setup_time = time.monotonic() - start

    # Management HTTP API, or rabbitmqctl when the plugin is off.

    def _api(self, method, path, expected, **kwargs):
        url = 'http://%s:%d/api%s' % (HOST, self.mgmt_port, path)
        try:
            resp = self.session.request(method, url, timeout=self.TIMEOUT,
                                        **kwargs)
        except requests.RequestException as e:
            raise BrokerError('%s %s: %s (is `tools/rabbitmq start` '
                              'running?)' % (method, url, e))
        if resp.status_code not in expected:
            raise BrokerError('%s %s: HTTP %s: %s' % (
                method, url, resp.status_code, resp.text))
        return resp

    def _ctl(self, *args):
        proc = subprocess.run(
            [RABBIT_TOOL, 'ctl', '-q'] + list(args),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=self.TIMEOUT)
        if proc.returncode:
            raise BrokerError('tools/rabbitmq ctl %s: exit %s: %s' % (
                ' '.join(args), proc.returncode,
                proc.stdout.decode(errors='replace')))

    def _create_vhost(self):
        if self.mgmt_port:
            self._api('PUT', '/vhosts/%s' % self.vhost, (201, 204))
            self._api('PUT', '/permissions/%s/%s' % (self.vhost, self.USER),
                      (201, 204),
                      json={'configure': '.*', 'write': '.*', 'read': '.*'})
        else:
            self._ctl('add_vhost', self.vhost)
            self._ctl('set_permissions', '-p', self.vhost, self.USER,
                      '.*', '.*', '.*')

    def _delete_vhost(self):
        # Closes the connections still open on it.
        if self.mgmt_port:
            self._api('DELETE', '/vhosts/%s' % self.vhost, (204, 404))
        else:
            self._ctl('delete_vhost', self.vhost)
