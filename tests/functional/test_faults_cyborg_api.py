"""Cyborg unreachable, slow or answering 5xx at each call of a boot and a
delete.

A server whose flavor has ``accel:device_profile`` is booted and deleted
while one of Nova's calls to Cyborg fails: the device profile fetch
(nova-api, ``GET /device_profiles?name=``), the ARQ create (nova-conductor,
``POST /accelerator_requests``), the bind (nova-conductor, ``PATCH``), the
read while nova-compute waits for the binding (``GET ?instance=``) or the
delete with the server (nova-compute, ``DELETE ?instance=``). Each fault
goes through Nova's real client and keystoneauth session, with ``[cyborg]
timeout = 10``, ``connect_retries = 2`` and ``status_code_retries = 2``:

* unreachable: the call goes to a loopback port that refuses connections;
* slow: the call goes to a stand-in that passes it on to the real Cyborg,
  which does what it asks, and answers once the client has given up;
* 5xx: the stand-in answers HTTP 503 with an error message;
* once: only the first request of the call fails (Cyborg comes back).

Reads and deletes are retried (3 requests while the fault lasts), creates
and binds never (1 request). After each case Cyborg has no ARQ, nothing is
used on the compute node or its device providers, and a new server boots
with its VF and is deleted leaving nothing.

Cases and outcomes:

* profile fetch unreachable, slow or 5xx: HTTP 400, "Device profile <name>:
  Failed to get accelerator requests: " and "could not reach Cyborg for GET
  /device_profiles: ... Connection refused", "Cyborg did not answer GET
  /device_profiles in time: ..." or "Cyborg answered HTTP 503 to GET
  /device_profiles: <Cyborg's message>"; no server is created.
* profile fetch slow or 5xx once: the retry gets it, the server boots.
* ARQ create unreachable or 5xx: ERROR, fault "Failed to bind accelerator
  requests: could not reach Cyborg for POST /accelerator_requests: ..." (or
  "Cyborg answered HTTP 503 to POST ..."); the allocation is freed.
* ARQ create slow: ERROR, fault "... Cyborg did not answer POST
  /accelerator_requests in time ..."; the allocation is freed and the
  create is not sent again; the ARQ Cyborg created stays, Initial and
  bound to nothing, holding no device: Nova cannot tell it from an ARQ
  someone else made, so neither nova-compute nor the sweep of deleted
  servers' ARQs touches it.
* bind unreachable, slow or 5xx, the build cast before the bind answered
  (the compute waits for the conductor's word on it): ERROR, fault
  "Failed to bind accelerator requests: <reason>" (``PATCH
  /accelerator_requests``), as when the conductor waited; no reschedule;
  the conductor deletes the ARQ (when slow, Cyborg had bound it
  meanwhile) and nova-compute frees the allocation.
* bind 5xx, the compute not told (it does not report capability 1.2):
  the conductor fails the build with the reason, as before.
* bind 5xx, then the conductor's delete of its new ARQ unreachable: ERROR
  with the reason, the allocation is freed; the conductor keeps the ARQ's
  UUID with the server, and deleting the server deletes it.
* read unreachable, slow or 5xx, Cyborg binding once nova-compute waits
  (see BindOrder): the read as the wait begins fails, the bind event ends
  the wait, the read after it fails too: ERROR, fault "Build of instance
  <uuid> aborted: Failure getting accelerator requests: Failed to get
  accelerator requests: ... GET /accelerator_requests ..."; the compute
  deletes the ARQ, the allocation is freed.
* read slow or 5xx once, Cyborg done binding before nova-compute waits:
  the retry of the read as the wait begins finds the ARQ Bound, the server
  is ACTIVE with its VF.
* delete unreachable or 5xx: as upstream, the delete succeeds (guest and
  allocation gone); the Bound ARQ is left in Cyborg and logged with the
  reason, and ``nova-cyborg-sweep-arqs`` deletes it once Cyborg is well.
* delete slow: the same, except that Cyborg deleted the ARQ meanwhile.
* delete slow or 5xx once: the retry works, the server is deleted and
  nothing is left.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.tests.functional.api import client as api_client  # noqa: E402
import requests  # noqa: E402

from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from nova_cyborg.clients import cyborg_http  # noqa: E402
from nova_cyborg.flows.cleanup import sweep  # noqa: E402
from tests.functional.harness import cast_order  # noqa: E402
from tests.functional.harness import loopback  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]

#: ``[cyborg] timeout`` of these tests: each request to the slow Cyborg
#: waits this long; every other call to the real Cyborg must answer within
#: it, on a busy machine too.
TIMEOUT = 10
#: ``[cyborg] connect_retries`` and ``status_code_retries``.
RETRIES = 2

#: The calls of Nova's client to Cyborg in a boot and a delete:
#: name -> (HTTP method, predicate on the URL and query parameters).
CALLS = {
    # nova-api, building the request spec.
    'profile': ('get', lambda url, params: (
        url == nc_client.DEVICE_PROFILE_URL and 'name' in params)),
    # nova-conductor, once the scheduler chose a host.
    'create': ('post', lambda url, params: url == nc_client.ARQ_URL),
    'bind': ('patch', lambda url, params: url == nc_client.ARQ_URL),
    # nova-compute, waiting for the binding.
    'get': ('get', lambda url, params: (
        url == nc_client.ARQ_URL and 'instance' in params)),
    # nova-compute, deleting the server.
    'delete': ('delete', lambda url, params: 'instance' in params),
    # nova-conductor, deleting the ARQs it created when a later step failed.
    'cleanup': ('delete', lambda url, params: 'arqs' in params),
}


def refused_endpoint(test):
    """A Cyborg endpoint on a loopback port that refuses connections.

    The port is bound without listening, so the kernel refuses every
    connection and no other process can take the port meanwhile.
    """
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    test.addCleanup(sock.close)
    return 'http://127.0.0.1:%d/accelerator/v2' % sock.getsockname()[1]


class FaultyCyborg(fixtures.Fixture):
    """Cyborg, slow or unavailable, on a loopback port of its own.

    :param cyborg_url: the real Cyborg's root URL.
    :param mode: ``slow``: each request is passed on to the real Cyborg,
        which does what it asks, and answered only once Nova's client gave
        up on it (the client call that sent it has ended: see
        :meth:`call_started`); ``5xx``: answered HTTP 503 at once, without
        passing it on.
    :param failures: how many requests fail (all if None); the next ones
        are passed on and answered at once, as if Cyborg had recovered.

    ``endpoint`` is what Nova's client is pointed at; ``seen`` lists the
    requests received (``"METHOD /path?query"``).
    """

    _HEADERS = ('content-type', 'openstack-api-version',
                'x-openstack-request-id')

    def __init__(self, cyborg_url, mode, failures=None):
        super().__init__()
        assert mode in ('slow', '5xx')
        self.cyborg_url = cyborg_url
        self.mode = mode
        self.failures = failures
        self.seen = []
        self._lock = threading.Lock()
        # Client calls in progress, requests being passed on.
        self._changed = threading.Condition(self._lock)
        self._calls = 0
        self._passing = 0
        self._closed = False

    def _setUp(self):
        server, url = loopback.serve(self._app)
        self.addCleanup(loopback.stop, server)
        self.addCleanup(self._close)
        self.endpoint = url + '/accelerator/v2'

    def _close(self):
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def call_started(self):
        """Nova's client began a call that sends requests here."""
        with self._changed:
            self._calls += 1

    def call_ended(self):
        """Nova's client gave up on (or got) the answers of its call: once
        Cyborg has done what the slow requests asked, they are answered
        (to nobody)."""
        with self._changed:
            if not self._changed.wait_for(lambda: not self._passing,
                                          timeout=waits.DEADLINE):
                raise AssertionError('Cyborg did not answer the requests '
                                     'passed on in %d s' % waits.DEADLINE)
            self._calls -= 1
            self._changed.notify_all()

    def _app(self, environ, start_response):
        query = environ.get('QUERY_STRING')
        target = environ['PATH_INFO'] + ('?' + query if query else '')
        with self._lock:
            self.seen.append('%s %s' % (environ['REQUEST_METHOD'], target))
            fails = self.failures is None or len(self.seen) <= self.failures
        if fails and self.mode == '5xx':
            body = json.dumps({'error_message': 'injected: Cyborg is '
                               'unavailable'}).encode()
            start_response('503 Service Unavailable', [
                ('Content-Type', 'application/json'),
                ('Content-Length', str(len(body)))])
            return [body]
        if not fails:
            resp = self._pass_on(environ, target)
        else:
            with self._changed:
                self._passing += 1
            try:
                resp = self._pass_on(environ, target)
            finally:
                with self._changed:
                    self._passing -= 1
                    self._changed.notify_all()
            # Answered once the client has given up.
            with self._changed:
                self._changed.wait_for(
                    lambda: not self._calls or self._closed,
                    timeout=waits.DEADLINE)
        headers = [(k, v) for k, v in resp.headers.items()
                   if k.lower() in self._HEADERS]
        start_response('%d %s' % (resp.status_code, resp.reason), headers + [
            ('Content-Length', str(len(resp.content)))])
        return [resp.content]

    def _pass_on(self, environ, target):
        headers = {key[5:].replace('_', '-'): value
                   for key, value in environ.items()
                   if key.startswith('HTTP_') and key not in (
                       'HTTP_HOST', 'HTTP_CONNECTION',
                       'HTTP_ACCEPT_ENCODING')}
        if environ.get('CONTENT_TYPE'):
            headers['Content-Type'] = environ['CONTENT_TYPE']
        length = int(environ.get('CONTENT_LENGTH') or 0)
        body = environ['wsgi.input'].read(length) if length else None
        return requests.request(environ['REQUEST_METHOD'],
                                self.cyborg_url + target, data=body,
                                headers=headers, timeout=waits.DEADLINE)


class Redirect(fixtures.Fixture):
    """Nova's client sends one kind of Cyborg call to ``endpoint``.

    Everything else about the call is real: the client's ``_call``,
    keystoneauth's session with ``[cyborg] timeout`` and its retries.
    ``calls`` counts the client calls redirected. ``cyborg``, the
    FaultyCyborg at ``endpoint`` if any, hears when each call starts and
    ends.
    """

    def __init__(self, call, endpoint, cyborg=None):
        super().__init__()
        self.method, self.match = CALLS[call]
        self.endpoint = endpoint
        self.cyborg = cyborg
        self.calls = 0

    def _setUp(self):
        real = cyborg_http.CyborgHTTPClient._call
        fault = self

        def _call(cyclient, op, method, url, expected, **kwargs):
            if method != fault.method or not fault.match(
                    url, kwargs.get('params') or {}):
                return real(cyclient, op, method, url, expected, **kwargs)
            fault.calls += 1
            adapter = cyclient._get_adapter(op)
            saved = adapter.endpoint_override
            adapter.endpoint_override = fault.endpoint
            if fault.cyborg:
                fault.cyborg.call_started()
            try:
                return real(cyclient, op, method, url, expected, **kwargs)
            finally:
                adapter.endpoint_override = saved
                if fault.cyborg:
                    fault.cyborg.call_ended()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg_http.CyborgHTTPClient._call', _call))


class BindOrder(fixtures.Fixture):
    """Cyborg finishes the bind before or after nova-compute begins to wait.

    nova-compute reads the server's ARQs as its wait for the bind events
    begins (``get_arqs_for_instance(only_resolved=True)``): the ARQs bound
    by then end the wait at once, the others their event; an event sent
    before the wait began is lost. Which comes first is a race between
    Cyborg's bind and nova-compute's build. A test that makes that read
    fail needs one order:

    ``before``: the read waits until Cyborg lists the ARQs Bound.
    ``after``: the conductor's bind is held until nova-compute has made the
    read (whether it failed or not), then sent: Cyborg binds, and its
    event reaches nova-compute waiting.
    """

    def __init__(self, test, order):
        super().__init__()
        assert order in ('before', 'after')
        self.test = test
        self.order = order

    def _setUp(self):
        self._held = []
        self._threads = []
        self.errors = []
        real_bind = nc_client.CyborgClient.bind_arqs
        real_get = nc_client.CyborgClient.get_arqs_for_instance
        fixture = self

        def bind_arqs(cyclient, bindings):
            if fixture.order == 'before':
                return real_bind(cyclient, bindings)
            fixture._held.append((cyclient, bindings))

        def send(cyclient, bindings):
            try:
                real_bind(cyclient, bindings)
            except Exception as e:
                fixture.errors.append(e)

        def get_arqs_for_instance(cyclient, instance_uuid,
                                  only_resolved=False):
            if only_resolved and fixture.order == 'before':
                waits.wait_until(lambda: fixture._bound(instance_uuid),
                                 'the bind before the wait')
            try:
                return real_get(cyclient, instance_uuid,
                                only_resolved=only_resolved)
            finally:
                while only_resolved and fixture._held:
                    thread = threading.Thread(
                        target=send, args=fixture._held.pop(0))
                    thread.start()
                    fixture._threads.append(thread)

        self.addCleanup(self._join)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.get_arqs_for_instance',
            get_arqs_for_instance))

    def _bound(self, instance_uuid):
        arqs = self.test.cyborg.list_arqs(instance_uuid)
        return arqs and all(a['state'] == 'Bound' for a in arqs)

    def _join(self):
        for thread in self._threads:
            thread.join(waits.DEADLINE)


class CyborgApiFaultTest(base.AcceleratorTestBase):
    """One fault at one call of a boot or delete (see the module)."""

    def setUp(self):
        super().setUp()
        self.flags(timeout=TIMEOUT, connect_retries=RETRIES,
                   status_code_retries=RETRIES, connect_retry_delay=0.1,
                   status_code_retry_delay=0.1, group='cyborg')
        # A new keystoneauth session, with this timeout.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg_http._SESSION', None))
        self.start_accel_compute('compute1')
        self.dp_name, self.flavor = self.create_profile_flavor(PROFILE)

    # Faults

    def fault(self, call, mode, failures=None):
        """Make ``call`` fail; return (Redirect, FaultyCyborg or None).

        ``mode``: ``refused``, ``slow`` or ``5xx``. Use the Redirect with
        ``with``; the fault lasts until its end.
        """
        if mode == 'refused':
            assert failures is None
            return Redirect(call, refused_endpoint(self)), None
        cyborg = self.useFixture(FaultyCyborg(self.cyborg.url, mode,
                                              failures))
        return Redirect(call, cyborg.endpoint, cyborg), cyborg

    # Servers

    def post_server(self):
        return self.api.post_server({'server': self._build_server(
            flavor_id=self.flavor, image_uuid=base.IMAGE, networks='none')})

    def wait_idle(self, server, status):
        return self._wait_for_server_parameter(
            server, {'status': status, 'OS-EXT-STS:task_state': None})

    def assert_refused(self, *texts):
        """Creating a server fails with 400 and a message with ``texts``;
        nothing was created."""
        exc = self.assertRaises(api_client.OpenStackApiException,
                                self.post_server)
        self.assertEqual(400, exc.response.status_code)
        message = exc.response.json()['badRequest']['message']
        for text in texts:
            self.assertIn(text, message)
        self.assertEqual([], self.api.get_servers())
        self.assert_clean()
        return message

    def assert_fault(self, server, *texts):
        message = server['fault']['message']
        for text in texts:
            self.assertIn(text, message)
        return message

    # What is left

    def usages(self):
        """{provider name: its usages} of compute1's tree."""
        compute_rp = self._get_provider_uuid_by_host('compute1')
        return {rp['name']: self._get_provider_usages(rp['uuid'])
                for rp in self._get_all_rps_in_a_tree(compute_rp)}

    def assert_clean(self, stray=()):
        """No ARQ in Cyborg (but ``stray``), nothing used on compute1 or
        its devices."""
        self.assertEqual([], [(a['uuid'], a['state'], a['instance_uuid'])
                              for a in self.cyborg.list_arqs()
                              if a['uuid'] not in stray])
        for name, usages in self.usages().items():
            self.assertEqual(set(), {rc for rc, used in usages.items()
                                     if used}, name)

    def wait_clean(self, stray=()):
        self._wait_for_assert(lambda: self.assert_clean(stray))

    def stray_arqs(self):
        """UUIDs of the ARQs in Cyborg that are bound to nothing."""
        return [a['uuid'] for a in self.cyborg.list_arqs()
                if (a['state'], a['instance_uuid'], a['hostname']) ==
                ('Initial', None, None)]

    def assert_recovers(self, stray=()):
        """With Cyborg well again, a server boots with its VF and is
        deleted, leaving nothing (but ``stray`` ARQs)."""
        server = self.wait_idle(self.post_server(), 'ACTIVE')
        self.assert_accelerated(server, 1)
        self._delete_server(server)
        self.assert_nothing_left(server['id'])
        self.wait_clean(stray)

    def boot_fails(self, call, mode, *texts):
        """A boot with ``call`` failing ends in ERROR, its fault with
        ``texts``; nothing is left but the server, which is deleted; a
        boot then works. Return (Redirect, FaultyCyborg or None).

        A failing read (``get``): Cyborg binds once nova-compute waits. A
        failing bind: the build is cast first, and Cyborg gets the bind
        once nova-compute waits for the conductor's word on it."""
        redirect, cyborg = self.fault(call, mode)
        order = self.useFixture(BindOrder(self, 'after')) \
            if call == 'get' else None
        if call == 'bind':
            self.useFixture(cast_order.CastFirst())
        with redirect:
            server = self.wait_idle(self.post_server(), 'ERROR')
        if order:
            self.assertEqual([], order.errors)
        self.assert_fault(server, *texts)
        self.wait_clean()
        self.assertEqual({}, self.allocations(server['id']))
        self._delete_server(server)
        self.wait_clean()
        self.assert_recovers()
        return redirect, cyborg

    def boot_recovers(self, call, mode):
        """The first request of ``call`` fails, the client's retry works:
        the server boots with its VF. Return the FaultyCyborg.

        A read (``get``): Cyborg is done binding before nova-compute
        waits."""
        redirect, cyborg = self.fault(call, mode, failures=1)
        if call == 'get':
            self.useFixture(BindOrder(self, 'before'))
        with redirect:
            server = self.wait_idle(self.post_server(), 'ACTIVE')
        self.assert_accelerated(server, 1)
        self._delete_server(server)
        self.assert_nothing_left(server['id'])
        self.wait_clean()
        return cyborg

    def delete_fails(self, mode, *texts):
        """Deleting a server while Cyborg cannot delete its ARQs: as
        upstream, the delete succeeds (guest and allocation gone) and the
        ARQs Cyborg kept are logged with ``texts``; the sweep of deleted
        servers (``nova-cyborg-sweep-arqs``) deletes them once Cyborg is
        well. Return (Redirect, FaultyCyborg or None, the server's ARQs
        after the delete)."""
        server = self.wait_idle(self.post_server(), 'ACTIVE')
        arqs = self.assert_accelerated(server, 1)
        redirect, cyborg = self.fault('delete', mode)
        with redirect:
            self._delete_server(server)
        self.assertEqual({}, self.allocations(server['id']))
        for text in ('Failed to delete the accelerator requests of the '
                     'instance; they are left in Cyborg',) + texts:
            self.assertIn(text, self.stdlog.logger.output)
        left = self.cyborg.list_arqs(server['id'])
        self.assertTrue(set(a['uuid'] for a in left) <=
                        set(a['uuid'] for a in arqs))
        sweep.sweep(since=3600)
        self.assert_nothing_left(server['id'])
        self.wait_clean()
        self.assert_recovers()
        return redirect, cyborg, left

    def delete_recovers(self, mode):
        server = self.wait_idle(self.post_server(), 'ACTIVE')
        self.assert_accelerated(server, 1)
        redirect, cyborg = self.fault('delete', mode, failures=1)
        with redirect:
            self._delete_server(server)
        self.assert_nothing_left(server['id'])
        self.wait_clean()
        return cyborg

    # Device profile fetch (nova-api)

    def test_profile_unreachable(self):
        redirect, _cyborg = self.fault('profile', 'refused')
        with redirect:
            message = self.assert_refused(
                'Device profile %s' % self.dp_name,
                'could not reach Cyborg for GET /device_profiles')
        # The socket's own words: "ECONNREFUSED" from eventlet's green
        # socket (Nova 33), "Connection refused" from the native one.
        self.assertRegex(message, 'Connection refused|ECONNREFUSED')
        self.assertEqual(1, redirect.calls)
        self.assert_recovers()

    def test_profile_slow(self):
        redirect, cyborg = self.fault('profile', 'slow')
        with redirect:
            self.assert_refused('Device profile %s' % self.dp_name,
                                'Cyborg did not answer GET '
                                '/device_profiles in time')
        self.assertEqual(1 + RETRIES, len(cyborg.seen))
        self.assert_recovers()

    def test_profile_5xx(self):
        redirect, cyborg = self.fault('profile', '5xx')
        with redirect:
            self.assert_refused('Device profile %s' % self.dp_name,
                                'Cyborg answered HTTP 503',
                                'injected: Cyborg is unavailable')
        self.assertEqual(1 + RETRIES, len(cyborg.seen))
        self.assert_recovers()

    # nova-api's read and its retry; nova-compute's check of the function
    # the profile asks of the card reads what nova-api recorded.
    def test_profile_slow_once(self):
        cyborg = self.boot_recovers('profile', 'slow')
        self.assertEqual(2, len(cyborg.seen))

    def test_profile_5xx_once(self):
        cyborg = self.boot_recovers('profile', '5xx')
        self.assertEqual(2, len(cyborg.seen))

    # ARQ create (nova-conductor): never retried

    def test_create_unreachable(self):
        redirect, _cyborg = self.boot_fails(
            'create', 'refused',
            'could not reach Cyborg for POST /accelerator_requests')
        self.assertEqual(1, redirect.calls)

    def test_create_slow(self):
        # Cyborg creates the ARQ; Nova gives up waiting for the answer and
        # does not send the create again.
        redirect, cyborg = self.fault('create', 'slow')
        with redirect:
            server = self.wait_idle(self.post_server(), 'ERROR')
        self.assert_fault(server, 'Cyborg did not answer POST '
                          '/accelerator_requests in time')
        self.assertEqual(['POST /accelerator/v2/accelerator_requests'],
                         cyborg.seen)
        self.assertEqual({}, self.allocations(server['id']))
        stray = self.stray_arqs()
        self.assertEqual(1, len(stray))
        self.wait_clean(stray)
        self._delete_server(server)
        # The stray ARQ holds no device: a server boots with its VF.
        self.assert_recovers(stray)
        # Nova cannot attribute it to itself: nova-compute's periodic
        # check for deleted servers leaves it alone.
        manager = self.computes['compute1'].manager
        manager._cleanup_running_deleted_instances(
            nova_context.get_admin_context())
        self.assertEqual(stray, self.stray_arqs())
        self.wait_clean(stray)

    def test_create_5xx(self):
        redirect, cyborg = self.boot_fails(
            'create', '5xx', 'Cyborg answered HTTP 503 to POST')
        self.assertEqual(['POST /accelerator/v2/accelerator_requests'],
                         cyborg.seen)

    # ARQ bind (nova-conductor): never retried

    def test_bind_unreachable(self):
        redirect, _cyborg = self.boot_fails(
            'bind', 'refused',
            'could not reach Cyborg for PATCH /accelerator_requests')
        self.assertEqual(1, redirect.calls)

    def test_bind_slow(self):
        redirect, cyborg = self.boot_fails(
            'bind', 'slow',
            'Cyborg did not answer PATCH /accelerator_requests in time')
        self.assertEqual(['PATCH /accelerator/v2/accelerator_requests'],
                         cyborg.seen)

    def test_bind_5xx(self):
        redirect, cyborg = self.boot_fails(
            'bind', '5xx', 'Cyborg answered HTTP 503 to PATCH')
        self.assertEqual(['PATCH /accelerator/v2/accelerator_requests'],
                         cyborg.seen)

    def test_bind_5xx_joined(self):
        # A compute that cannot be told how the bind ended (capability
        # 1.2) gets the build once it answered: the conductor fails it.
        order = self.useFixture(cast_order.Joined())
        redirect, _cyborg = self.fault('bind', '5xx')
        with redirect:
            server = self.wait_idle(self.post_server(), 'ERROR')
        self.assert_fault(server, 'Failed to bind accelerator requests: '
                          'Cyborg answered HTTP 503 to PATCH')
        # The build never reached the compute.
        self.assertFalse(order.seen('compute waits', server['id']))
        self.wait_clean()
        self.assertEqual({}, self.allocations(server['id']))
        self._delete_server(server)
        self.assert_recovers()

    def test_bind_5xx_and_cleanup_unreachable(self):
        # Cyborg answers 503 to the bind, then refuses the connection when
        # the conductor deletes the ARQ it created.
        self.useFixture(cast_order.CastFirst())
        bind, _cyborg = self.fault('bind', '5xx')
        cleanup, _none = self.fault('cleanup', 'refused')
        with bind, cleanup:
            server = self.wait_idle(self.post_server(), 'ERROR')
        self.assert_fault(server, 'Cyborg answered HTTP 503 to PATCH')
        # Together, then one by one; each call retried, then logged: by
        # the conductor, then by nova-compute as it fails the build.
        self.assertEqual(4, cleanup.calls)
        self.assertEqual({}, self.allocations(server['id']))
        # The conductor remembered the ARQ it could not delete: deleting
        # the server deletes it.
        self._delete_server(server)
        self.assertEqual([], self.stray_arqs())
        self.wait_clean()
        self.assert_recovers()

    # ARQ get (nova-compute, waiting for the binding)

    # The read as the wait begins and the read after the bind event.

    def test_get_unreachable(self):
        redirect, _cyborg = self.boot_fails(
            'get', 'refused',
            'could not reach Cyborg for GET /accelerator_requests')
        self.assertEqual(2, redirect.calls)

    def test_get_slow(self):
        redirect, cyborg = self.boot_fails(
            'get', 'slow',
            'Cyborg did not answer GET /accelerator_requests in time')
        self.assertEqual(2 * (1 + RETRIES), len(cyborg.seen))

    def test_get_5xx(self):
        redirect, cyborg = self.boot_fails(
            'get', '5xx', 'Cyborg answered HTTP 503 to GET')
        self.assertEqual(2 * (1 + RETRIES), len(cyborg.seen))

    def test_get_slow_once(self):
        cyborg = self.boot_recovers('get', 'slow')
        # The read as the wait starts and its retry; the ARQ was Bound
        # then, so it is not read again after the wait, and the check of
        # the guest's devices before it is defined takes what the wait
        # read (nova_cyborg.model.handoff).
        self.assertEqual(2, len(cyborg.seen))

    def test_get_5xx_once(self):
        cyborg = self.boot_recovers('get', '5xx')
        # The read as the wait starts and its retry; the ARQ was Bound
        # then, so it is not read again after the wait, and the check of
        # the guest's devices before it is defined takes what the wait
        # read (nova_cyborg.model.handoff).
        self.assertEqual(2, len(cyborg.seen))

    # ARQ delete (nova-compute, deleting the server)

    def test_delete_unreachable(self):
        redirect, _cyborg, left = self.delete_fails(
            'refused',
            'could not reach Cyborg for DELETE /accelerator_requests')
        self.assertEqual(1, redirect.calls)
        self.assertEqual(['Bound'], [a['state'] for a in left])

    def test_delete_slow(self):
        redirect, cyborg, left = self.delete_fails(
            'slow',
            'Cyborg did not answer DELETE /accelerator_requests in time')
        self.assertEqual(1 + RETRIES, len(cyborg.seen))
        # Cyborg deleted the ARQ; Nova did not hear it.
        self.assertEqual([], left)

    def test_delete_5xx(self):
        redirect, cyborg, left = self.delete_fails(
            '5xx', 'Cyborg answered HTTP 503 to DELETE')
        self.assertEqual(1 + RETRIES, len(cyborg.seen))
        self.assertEqual(['Bound'], [a['state'] for a in left])

    def test_delete_slow_once(self):
        cyborg = self.delete_recovers('slow')
        # The server's ARQs, retried once; not those of its alias: the
        # server never live-migrated (nova_cyborg.model.bookkeeping.holders).
        self.assertEqual(2, len(cyborg.seen))

    def test_delete_5xx_once(self):
        cyborg = self.delete_recovers('5xx')
        # The server's ARQs, retried once; not those of its alias: the
        # server never live-migrated (nova_cyborg.model.bookkeeping.holders).
        self.assertEqual(2, len(cyborg.seen))
