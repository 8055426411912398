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

A test that stops or restarts the broker runs one of its own:
:class:`PrivateBroker`.
"""

import base64
import fcntl
import hashlib
import json
import os
import random
import socket
import subprocess
import tempfile
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


# A broker of a test's own.

#: ``tools/rabbitmq`` puts the Erlang distribution port at AMQP port + this.
DIST_PORT_OFFSET = 20000
#: Lowest AMQP port of a private broker.
PRIVATE_PORT_MIN = 10000
#: Where a process holds a lock for each private port it uses, so that
#: concurrent test runs on one machine never pick the same one.
PORT_LOCK_DIR = os.path.join(tempfile.gettempdir(), 'nova-cyborg-ports')


def ephemeral_port_range(path='/proc/sys/net/ipv4/ip_local_port_range'):
    """The kernel's range for the local ports of outgoing connections."""
    try:
        with open(path) as f:
            low, high = (int(part) for part in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def private_port_candidates():
    """AMQP ports P for a private broker, in random order, such that neither
    P nor its distribution port P + DIST_PORT_OFFSET is in the ephemeral
    range: a client connection of any process could take such a port
    between the check that it is free and the broker's listen."""
    low, high = ephemeral_port_range()
    ports = [port for port in range(PRIVATE_PORT_MIN,
                                    65536 - DIST_PORT_OFFSET)
             if not any(low <= p <= high
                        for p in (port, port + DIST_PORT_OFFSET))]
    random.shuffle(ports)
    return ports


def _bindable(port):
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def reserve_port(candidates, also=(), lock_dir=None):
    """Reserve the first of ``candidates`` free for this process.

    The port P (and each P + offset in ``also``) must be free on loopback,
    and P's lock file in ``lock_dir`` (PORT_LOCK_DIR) not held by another
    process. Returns ``(port, lock)``: the port stays reserved while the
    open file ``lock`` is (close it to release; a process that dies
    releases it too).

    :raises: BrokerError if none is free.
    """
    lock_dir = lock_dir or PORT_LOCK_DIR
    os.makedirs(lock_dir, exist_ok=True)
    for port in candidates:
        lock = open(os.path.join(lock_dir, '%d.lock' % port), 'a')
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        if all(_bindable(port + offset) for offset in (0,) + tuple(also)):
            return port, lock
        lock.close()
    raise BrokerError('no free port for a private broker in %s'
                      % lock_dir)


class PrivateBroker(fixtures.Fixture):
    """A RabbitMQ node of its own, started with ``tools/rabbitmq`` in its
    own state directory, on a reserved port (see :func:`reserve_port`)
    and with its own node name, and stopped at cleanup; the shared broker
    of the other tests is never touched. While it runs, the environment
    names it, so that :class:`BrokerFixture` (and its ``rabbitmqctl``) use
    it: set up before the test's services.

    :meth:`restart` stops and starts the node. ``tools/rabbitmq start``
    starts from an empty node; a real broker keeps its definitions across
    a restart, so the node loads the vhosts it had (with the guest user
    and its permissions) at boot, before it accepts connections: clients
    that reconnect never meet a node without their vhost, which refuses
    them (``NOT_ALLOWED``) and made oslo.messaging drop a reply instead of
    retrying it. Queues are not kept: oslo.messaging's are not durable.
    """

    TIMEOUT = 300
    USER = BrokerFixture.USER
    PASSWORD = BrokerFixture.PASSWORD

    def _setUp(self):
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.port, lock = reserve_port(private_port_candidates(),
                                       also=(DIST_PORT_OFFSET,))
        self.addCleanup(lock.close)
        self.node = 'nova-cyborg-private-%d@localhost' % self.port
        self.env = {
            'NOVA_CYBORG_RABBIT_DIR': self.dir,
            'NOVA_CYBORG_RABBIT_PORT': str(self.port),
            'NOVA_CYBORG_RABBIT_MGMT_PORT': '0',
            'NOVA_CYBORG_RABBIT_NODE': self.node,
            'NOVA_CYBORG_RABBIT_TIMEOUT': str(self.TIMEOUT)}
        self._tool('start')
        self.addCleanup(self._tool, 'stop')
        for name, value in self.env.items():
            self.useFixture(fixtures.EnvironmentVariable(name, value))

    def _tool(self, *args):
        proc = subprocess.run(
            [RABBIT_TOOL] + list(args), env=dict(os.environ, **self.env),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=self.TIMEOUT + 60)
        if proc.returncode:
            raise BrokerError('tools/rabbitmq %s: exit %s: %s' % (
                ' '.join(args), proc.returncode,
                proc.stdout.decode(errors='replace')))
        return proc.stdout.decode(errors='replace')

    def stop(self):
        """Stop the node (its processes are gone when this returns)."""
        self._tool('stop')

    def start(self, vhosts=()):
        """Start the node again (it accepts AMQP connections when this
        returns) with ``vhosts`` (the BrokerFixtures whose vhost the node
        had) there from the start."""
        self.write_definitions([fixture.vhost for fixture in vhosts])
        self._tool('start')

    def write_definitions(self, vhosts):
        """Have the node's next boot load the guest user, the vhosts ``/``
        and ``vhosts``, and the guest's permissions on them (RabbitMQ's
        ``load_definitions``; ``tools/rabbitmq`` leaves advanced.config
        alone)."""
        salt = os.urandom(4)
        password_hash = base64.b64encode(salt + hashlib.sha256(
            salt + self.PASSWORD.encode()).digest()).decode()
        names = ['/'] + [v for v in vhosts if v != '/']
        definitions = {
            'users': [{'name': self.USER, 'password_hash': password_hash,
                       'hashing_algorithm': 'rabbit_password_hashing_sha256',
                       'tags': ['administrator'], 'limits': {}}],
            'vhosts': [{'name': name} for name in names],
            'permissions': [{'user': self.USER, 'vhost': name,
                             'configure': '.*', 'write': '.*', 'read': '.*'}
                            for name in names]}
        path = os.path.join(self.dir, 'definitions.json')
        with open(path, 'w') as f:
            json.dump(definitions, f)
        with open(os.path.join(self.dir, 'advanced.config'), 'w') as f:
            f.write('[{rabbit, [{load_definitions, "%s"}]}].\n' % path)

    def restart(self, vhosts=()):
        """:meth:`stop`, then :meth:`start`."""
        self.stop()
        self.start(vhosts)

    def consumers(self, vhost):
        """{queue name: number of consumers} of the queues of ``vhost``."""
        out = self._tool('ctl', '-q', 'list_queues', '-p', vhost, 'name',
                         'consumers', '--formatter', 'json')
        return {queue['name']: int(queue['consumers'])
                for queue in json.loads(out)}

    def wait_consumers(self, vhost, queues, timeout=300):
        """Wait until each of ``queues`` of ``vhost`` has a consumer: the
        services that consumed them before a restart have reconnected and
        declared them again (a message sent to a queue not yet declared is
        lost)."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.consumers(vhost)
            missing = sorted(q for q in queues if not current.get(q))
            if not missing:
                return
            if time.monotonic() > deadline:
                raise BrokerError(
                    'queues without a consumer %d s after the broker '
                    'restarted: %s' % (timeout, ', '.join(missing)))
            time.sleep(0.5)
