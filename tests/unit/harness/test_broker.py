"""Unit tests for the private broker's port choice (functional harness)."""

import fcntl
import os
import socket
import tempfile

import fixtures
import testtools

from tests.functional.harness import broker


class PortCandidatesTest(testtools.TestCase):

    def range_file(self, text):
        path = self.useFixture(fixtures.TempDir()).join('range')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_ephemeral_range(self):
        self.assertEqual((32768, 60999), broker.ephemeral_port_range(
            self.range_file('32768\t60999\n')))

    def test_ephemeral_range_unreadable(self):
        self.assertEqual((32768, 60999), broker.ephemeral_port_range(
            '/nonexistent/ip_local_port_range'))

    def test_candidates_avoid_the_ephemeral_range(self):
        self.useFixture(fixtures.MockPatch(
            'tests.functional.harness.broker.ephemeral_port_range',
            return_value=(32768, 60999)))
        ports = broker.private_port_candidates()
        self.assertEqual(set(range(10000, 12768)), set(ports))
        # Random order: concurrent runs start from different ports.
        self.assertNotEqual(sorted(ports), ports)

    def test_candidates_with_a_wide_ephemeral_range(self):
        self.useFixture(fixtures.MockPatch(
            'tests.functional.harness.broker.ephemeral_port_range',
            return_value=(1024, 65535)))
        self.assertEqual([], broker.private_port_candidates())


class ReservePortTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.lock_dir = self.useFixture(fixtures.TempDir()).path

    def free_ports(self, count):
        ports = []
        socks = []
        for _i in range(count):
            sock = socket.socket()
            sock.bind(('127.0.0.1', 0))
            socks.append(sock)
            ports.append(sock.getsockname()[1])
        for sock in socks:
            sock.close()
        return ports

    def reserve(self, candidates, also=()):
        port, lock = broker.reserve_port(candidates, also=also,
                                         lock_dir=self.lock_dir)
        self.addCleanup(lock.close)
        return port

    def test_a_reserved_port_is_not_given_twice(self):
        ports = self.free_ports(2)
        first = self.reserve(ports)
        second = self.reserve(ports)
        self.assertEqual(ports, [first, second])
        self.assertRaises(broker.BrokerError, self.reserve, ports)

    def test_held_by_another_process(self):
        # flock locks belong to the open file: another open of the same
        # file (as another process would) cannot take it.
        (port,) = self.free_ports(1)
        with open(os.path.join(self.lock_dir, '%d.lock' % port), 'a') as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.assertRaises(broker.BrokerError, self.reserve, [port])
        self.assertEqual(port, self.reserve([port]))

    def test_released_when_closed(self):
        (port,) = self.free_ports(1)
        _port, lock = broker.reserve_port([port], lock_dir=self.lock_dir)
        lock.close()
        self.assertEqual(port, self.reserve([port]))

    def test_port_in_use_is_skipped(self):
        busy = socket.socket()
        busy.bind(('127.0.0.1', 0))
        self.addCleanup(busy.close)
        (free,) = self.free_ports(1)
        self.assertEqual(free, self.reserve([busy.getsockname()[1], free]))

    def test_offset_port_in_use_is_skipped(self):
        port, dist = self.free_ports(2)
        busy = socket.socket()
        busy.bind(('127.0.0.1', dist))
        self.assertRaises(broker.BrokerError, self.reserve, [port],
                          also=(dist - port,))
        busy.close()
        self.assertEqual(port, self.reserve([port], also=(dist - port,)))

    def test_default_lock_dir(self):
        self.assertEqual(os.path.join(tempfile.gettempdir(),
                                      'nova-cyborg-ports'),
                         broker.PORT_LOCK_DIR)


class DefinitionsTest(testtools.TestCase):

    def test_definitions_loaded_at_boot(self):
        import base64
        import hashlib
        import json

        rabbit = broker.PrivateBroker()
        rabbit.dir = self.useFixture(fixtures.TempDir()).path
        rabbit.write_definitions(['nova-cyborg-1-abc', '/'])
        with open(os.path.join(rabbit.dir, 'definitions.json')) as f:
            definitions = json.load(f)
        self.assertEqual([{'name': '/'}, {'name': 'nova-cyborg-1-abc'}],
                         definitions['vhosts'])
        self.assertEqual(
            [('guest', '/', '.*', '.*', '.*'),
             ('guest', 'nova-cyborg-1-abc', '.*', '.*', '.*')],
            [(p['user'], p['vhost'], p['configure'], p['write'], p['read'])
             for p in definitions['permissions']])
        (user,) = definitions['users']
        self.assertEqual(('guest', 'rabbit_password_hashing_sha256'),
                         (user['name'], user['hashing_algorithm']))
        # RabbitMQ's hash: base64(salt + sha256(salt + password)).
        raw = base64.b64decode(user['password_hash'])
        salt, digest = raw[:4], raw[4:]
        self.assertEqual(hashlib.sha256(salt + b'guest').digest(), digest)
        with open(os.path.join(rabbit.dir, 'advanced.config')) as f:
            self.assertEqual(
                '[{rabbit, [{load_definitions, "%s"}]}].\n'
                % os.path.join(rabbit.dir, 'definitions.json'), f.read())
