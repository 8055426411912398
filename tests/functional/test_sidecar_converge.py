"""Bad days at start: each ends with Placement matching the host.

Against the real cyborg-conductor and Placement, with no manual step:

- cyborg-conductor answers the report after dropping the device, because
  its check-then-create of a custom trait met another host's creation (the
  race seen when hosts start together), because Placement answered one of
  its writes 5xx, or because a provider generation moved under it (409);
- an operator deletes one of a device's providers;
- cyborg-conductor is down when the sidecar starts;
- RabbitMQ is not up yet when the sidecar starts.

The device is an Intel DFL card whose ports are each released to a VF:
one deployable and one provider a port. "Matching" is what a scheduler
and a deployer check: every port's provider is under the compute node with
the UUID cyborg-conductor derives from its name, offers its accelerator
(total and max_unit 1, nothing reserved), carries the driver's traits,
Cyborg holds its deployable, and a server asking for the device boots onto
it.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from sidecar.program import manager as program  # noqa: E402
from tests.functional.harness import broker  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional import test_faults_processes as faults  # noqa: E402

NUM_VFS = 4  # one card, four ports: four providers
TRAITS = {'OWNER_CYBORG', 'CUSTOM_FPGA_INTEL'}


class ConductorFaults:
    """WSGI middleware in front of the Placement that cyborg-conductor and
    the sidecars call: the first request of cyborg-conductor (not the
    sidecar) that ``match(method, path)`` selects is answered by
    ``answer(environ, start_response, app)`` instead; later ones pass.
    ``fired`` counts the answered ones."""

    def __init__(self, match, answer):
        self.match = match
        self.answer = answer
        self.fired = 0
        self.app = None

    def __call__(self, app):
        self.app = app
        return self.handle

    def handle(self, environ, start_response):
        from_sidecar = 'nova-cyborg-sidecar' in environ.get(
            'HTTP_USER_AGENT', '')
        if (not from_sidecar and not self.fired and
                self.match(environ['REQUEST_METHOD'], environ['PATH_INFO'])):
            self.fired += 1
            return self.answer(environ, start_response, self.app)
        return self.app(environ, start_response)


def status(code, detail, error_code=None):
    """An answer: Placement's error document with ``code``."""
    def answer(environ, start_response, app):
        error = {'status': code, 'title': detail, 'detail': detail}
        if error_code:
            error['code'] = error_code
        body = json.dumps({'errors': [error]}).encode()
        start_response('%d %s' % (code, detail), [
            ('Content-Type', 'application/json'),
            ('Content-Length', str(len(body)))])
        return [body]
    return answer


def created_meanwhile(environ, start_response, app):
    """The conductor reads the trait before another host's report creates
    it: the trait is created (through Placement itself) and the read
    answers 404, so the conductor's create that follows answers 204."""
    create = dict(environ, REQUEST_METHOD='PUT', CONTENT_LENGTH='0',
                  HTTP_OPENSTACK_API_VERSION='placement 1.6')
    statuses = []
    list(app(create, lambda code, headers, exc_info=None: statuses.append(
        code)))
    assert statuses[0].split()[0] in ('201', '204'), statuses
    not_found = status(404, 'The trait does not exist.')
    return not_found(environ, start_response, app)


class ConvergeTestBase(faults.ProcessFaultBase):

    def expect_matching(self, hostname='compute1', timeout=120):
        """Wait until the providers of the host's card (one a port) all
        match; return their names in port order."""
        (pf,) = self.pf_bdfs(hostname)
        names = self.fpga_providers(hostname, pf)
        self.assertEqual(NUM_VFS, len(names))
        compute_rp = self._get_provider_uuid_by_host(hostname)
        last = []

        def matching():
            last[:] = [p for name in names
                       for p in self.problems(name, compute_rp)]
            return not last
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if matching():
                return names
            time.sleep(0.5)
        self.fail('%s do not match the host after %d s: %s' % (
            ', '.join(names), timeout, '; '.join(last)))

    def problems(self, name, compute_rp):
        found = self.placement.get('/resource_providers?name=%s' % name,
                                   version='1.14').body['resource_providers']
        if not found:
            return ['no provider %s' % name]
        (rp,) = found
        problems = []
        if rp['uuid'] != program.provider_uuid(name):
            problems.append('%s: UUID %s' % (name, rp['uuid']))
        if rp['parent_provider_uuid'] != compute_rp:
            problems.append('%s: parent %s' % (
                name, rp['parent_provider_uuid']))
        inv = self.inventory(name).get('FPGA', {})
        seen = (inv.get('total'), inv.get('max_unit'), inv.get('reserved'))
        if seen != (1, 1, 0):
            problems.append('%s: FPGA total/max_unit/reserved %s' % (
                name, seen))
        missing = TRAITS - self.traits(name)
        if missing:
            problems.append('%s: traits %s missing' % (
                name, sorted(missing)))
        deployables = {d['name']: d for d in self.cyborg.list_deployables()}
        if name not in deployables:
            problems.append('Cyborg holds no deployable %s' % name)
        elif deployables[name]['rp_uuid'] != rp['uuid']:
            problems.append('Cyborg has %s on provider %s' % (
                name, deployables[name]['rp_uuid']))
        return problems

    def assert_usable(self):
        """A server asking for the device boots onto it; its delete
        leaves nothing."""
        _name, flavor = self.create_profile_flavor(faults.PROFILE)
        server = self.boot(flavor)
        self.assert_accelerated(server, 1)
        self.delete_all([server])
        self.assert_no_leaks()


class ConductorDropsTheDeviceTest(ConvergeTestBase):
    """cyborg-conductor answers the first report normally after dropping
    the device and deleting its provider; the sidecar's first cycle finds
    the provider missing, reports again, and the conductor adds it."""

    def start_with(self, faults_):
        self.placement_app(faults_)
        self.start_accel_compute('compute1', num_vfs=NUM_VFS)
        self.assertEqual(1, faults_.fired)
        self.expect_matching()

    def test_trait_created_by_another_host_meanwhile(self):
        # cyborg-conductor 17 reads the trait, finds nothing, creates it
        # and reads the 204 of another host's creation as a failure.
        self.start_with(ConductorFaults(
            lambda method, path: method == 'GET' and path.startswith(
                '/traits/CUSTOM_FPGA_INTEL'), created_meanwhile))
        self.assert_usable()

    def test_provider_creation_refused_5xx(self):
        self.start_with(ConductorFaults(
            lambda method, path: (method, path) == (
                'POST', '/resource_providers'),
            status(503, 'Service Unavailable')))

    def test_traits_generation_conflict(self):
        self.start_with(ConductorFaults(
            lambda method, path: method == 'PUT' and path.startswith(
                '/resource_providers/') and path.endswith('/traits'),
            status(409, 'Conflict', 'placement.concurrent_update')))


class ProviderDeletedTest(ConvergeTestBase):

    def test_deleted_by_an_operator(self):
        self.start_accel_compute('compute1', num_vfs=NUM_VFS)
        names = self.expect_matching()
        uuid = self.provider(names[1])['uuid']
        self.placement.delete('/resource_providers/%s' % uuid)
        # One cycle: cyborg-conductor still holds the device, so the new
        # report changes nothing; the sidecar writes the provider itself
        # and reports once more on the next cycle.
        self.sidecars['compute1'].sidecar.run_cycle()
        compute_rp = self._get_provider_uuid_by_host('compute1')
        self.assertEqual([], [p for name in names
                              for p in self.problems(name, compute_rp)])
        self.assert_usable()


class ConductorDownAtStartTest(ConvergeTestBase):

    def test_conductor_down_at_start(self):
        self.cyborg.stop()
        # The first cycle's report is not answered (5 s); later ones back
        # off from 1 s.
        self.start_accel_compute('compute1', num_vfs=NUM_VFS, rpc_timeout=5)
        self.assertFalse(self.sidecars['compute1'].sidecar.converged)
        self.cyborg.restart()
        self.expect_matching(timeout=180)
        self.assert_usable()


class RabbitDownAtStartTest(ConvergeTestBase):

    def setUp(self):
        self.rabbit = self.useFixture(broker.PrivateBroker())
        super().setUp()
        self.assertEqual(self.rabbit.port, self.broker.port)

    def test_rabbitmq_not_up_at_start(self):
        self.start_accel_compute('compute1', num_vfs=NUM_VFS, sidecar=False)
        self.rabbit.stop()
        host = self.hosts['compute1']
        conn = self.computes['compute1'].driver._host.get_connection()
        fixture = sidecar_fixture.SidecarFixture(
            'compute1', host, self.broker.transport_url, self.placement_url,
            lambda: conn, rpc_timeout=10)
        errors = []

        def start():
            # Blocks until the broker answers, as the daemon does.
            try:
                fixture.setUp()
            except Exception as exc:
                errors.append(exc)
        thread = threading.Thread(target=start, daemon=True)
        thread.start()
        self.addCleanup(fixture.cleanUp)
        # Back with the vhost it had, as a real broker keeps it.
        self.rabbit.start(vhosts=[self.broker])
        thread.join(180)
        self.assertFalse(thread.is_alive(), 'the sidecar never started')
        self.assertEqual([], errors)
        self.sidecars['compute1'] = fixture
        self.expect_matching(timeout=180)
        self.assert_usable()
