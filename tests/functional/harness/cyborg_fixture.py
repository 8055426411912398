"""Run the real Cyborg API + conductor in a child process for a test.

Nova and Cyborg cannot share a Python process (both register ``[DEFAULT]
host`` on the global CONF), so :class:`CyborgFixture` starts
:mod:`tests.functional.harness.cyborg_process` with the same interpreter and
talks to it over loopback HTTP. Cyborg reaches Placement and Nova's
``os-server-external-events`` over HTTP too, at the URLs given.
"""

import os

import fixtures
import requests

from tests.functional.harness import child
from tests.functional.harness import identity

# The Cyborg service user, as Nova would see it in Cyborg's requests.
CYBORG_SERVICE_TOKEN = identity.make_token(
    'cyborg', identity.SERVICE_PROJECT_ID, ['admin', 'service'])

CONFIG_TEMPLATE = """\
[DEFAULT]
host = cyborg-harness
transport_url = {transport_url}
debug = true
log_file = {log_path}
use_stderr = false
periodic_interval = 3600

[database]
connection = sqlite:///{db_path}

[oslo_concurrency]
lock_path = {base_dir}

[placement]
auth_type = admin_token
endpoint = {placement_url}
token = admin

[nova]
auth_type = admin_token
endpoint = {nova_url}
token = {nova_token}

[keystone_authtoken]
service_token_roles = service
service_token_roles_required = true
"""


class CyborgError(Exception):
    """Unexpected answer from the Cyborg child process."""


class CyborgFixture(child.ChildServiceFixture):
    """Real Cyborg API and conductor in a child process.

    :param placement_url: Placement root URL (noauth2, token ``admin``).
    :param nova_url: Nova compute API URL, e.g. ``http://127.0.0.1:P/v2.1``.
    :param base_dir: where to put cyborg.conf, the DB and logs; a temporary
        directory removed at cleanup when None.
    :param transport_url: ``fake://`` (the default) keeps RPC inside the
        child; a ``rabbit://`` URL lets a sidecar in another process serve
        the agent RPC and report.
    :param clouds_yaml: an openstacksdk clouds.yaml with the cloud
        ``devstack-admin``, where cyborg-conductor looks bitstreams up.

    After setUp: ``endpoint`` (``http://127.0.0.1:P/accelerator/v2``, what
    Nova's ``[cyborg] endpoint_override`` wants), ``url`` (root of the child
    server), ``port``, ``log_path``, ``base_dir``, ``startup_time``
    (seconds). :meth:`stop` kills the child; :meth:`restart` kills it and
    starts it again with the same database and port.
    """

    NAME = 'Cyborg'
    ERROR = CyborgError
    FORK = True
    REQUEST_TIMEOUT = 30

    def __init__(self, placement_url, nova_url, base_dir=None,
                 transport_url='fake://', clouds_yaml=None):
        super().__init__()
        self.placement_url = placement_url.rstrip('/')
        self.nova_url = nova_url.rstrip('/')
        self._base_dir = base_dir
        self.transport_url = transport_url
        self.clouds_yaml = clouds_yaml

    def _setUp(self):
        self.base_dir = (self._base_dir
                         or self.useFixture(fixtures.TempDir()).path)
        os.makedirs(self.base_dir, exist_ok=True)
        self.log_path = os.path.join(self.base_dir, 'cyborg.log')
        self.output_path = os.path.join(self.base_dir, 'cyborg-process.out')
        self.config_path = os.path.join(self.base_dir, 'cyborg.conf')
        port_file = os.path.join(self.base_dir, 'cyborg.port')
        db_path = os.path.join(self.base_dir, 'cyborg.sqlite')
        # A reused base_dir starts from scratch.
        for path in (port_file, db_path, self.log_path, self.output_path):
            if os.path.exists(path):
                os.unlink(path)
        with open(self.config_path, 'w') as f:
            f.write(CONFIG_TEMPLATE.format(
                log_path=self.log_path,
                db_path=db_path,
                base_dir=self.base_dir,
                transport_url=self.transport_url,
                placement_url=self.placement_url,
                nova_url=self.nova_url,
                nova_token=CYBORG_SERVICE_TOKEN))

        self._env = dict(os.environ)
        if self.clouds_yaml:
            self._env['OS_CLIENT_CONFIG_FILE'] = self.clouds_yaml
        self._port_file = port_file
        self.port = self.start_child(
            'tests.functional.harness.cyborg_process',
            ['--config-file', self.config_path], port_file, env=self._env)
        self.url = 'http://127.0.0.1:%d' % self.port
        self.endpoint = self.url + '/accelerator/v2'
        self.session = requests.Session()
        self.addCleanup(self.session.close)
        self.restarts = 0

    def restart(self):
        """Kill the API and conductor (as a crash would) and start them
        again, as a service manager would: same configuration, database
        and port, so ``endpoint`` stays valid. Work they had in flight
        (a bind job, an RPC call to an agent) is lost."""
        self.stop()
        os.unlink(self._port_file)
        self.restarts += 1
        self.output_path = os.path.join(
            self.base_dir, 'cyborg-process-%d.out' % self.restarts)
        self.start_child(
            'tests.functional.harness.cyborg_process',
            ['--config-file', self.config_path, '--port', str(self.port)],
            self._port_file, env=self._env)

    def log_problems(self, max_lines=200):
        """The last ``max_lines`` ERROR and WARNING lines of Cyborg's log
        (with the traceback lines logged under them): what a failed test
        attaches, since the log goes with the test's temporary directory.
        """
        try:
            with open(self.log_path, errors='replace') as log:
                lines = [line for line in log
                         if ' ERROR ' in line or ' WARNING ' in line]
        except OSError as e:
            return 'no Cyborg log: %s' % e
        return ''.join(lines[-max_lines:]) or 'no ERROR or WARNING logged'

    # REST helpers for test assertions (admin token).

    def request(self, method, path, expected=(200,), token=None,
                service_token=None, **kwargs):
        """Call Cyborg's API at ``endpoint + path``; return the Response.

        Raises :class:`CyborgError` with the body on other statuses.
        """
        headers = {'X-Auth-Token': token or identity.ADMIN_TOKEN}
        if service_token:
            headers['X-Service-Token'] = service_token
        headers.update(kwargs.pop('headers', {}))
        url = self.endpoint + path
        resp = self.session.request(method, url, headers=headers,
                                    timeout=self.REQUEST_TIMEOUT, **kwargs)
        if resp.status_code not in expected:
            raise CyborgError('%s %s: HTTP %s (expected %s): %s' % (
                method, url, resp.status_code, expected, resp.text))
        return resp

    def report_data(self, hostname, devices):
        """Report ``hostname``'s full device list like a cyborg-agent.

        ``devices`` uses the JSON shape documented in
        :mod:`tests.functional.harness.cyborg_process`.
        """
        resp = self.session.post(
            self.url + '/_harness/report_data',
            json={'hostname': hostname, 'devices': devices},
            timeout=self.REQUEST_TIMEOUT)
        if resp.status_code != 200:
            raise CyborgError('report_data(%s): HTTP %s: %s' % (
                hostname, resp.status_code, resp.text))
        return resp.json()

    def create_device_profile(self, name, groups, description=None):
        body = {'name': name, 'groups': groups}
        if description is not None:
            body['description'] = description
        return self.request('POST', '/device_profiles', json=[body],
                            expected=(201,)).json()

    def get_device_profiles(self, name=None):
        params = {'name': name} if name else None
        return self.request('GET', '/device_profiles',
                            params=params).json()['device_profiles']

    def list_arqs(self, instance_uuid=None):
        """All ARQs of all projects (admin), or those of one instance."""
        params = {'instance': instance_uuid} if instance_uuid else None
        return self.request('GET', '/accelerator_requests',
                            params=params).json()['arqs']

    def get_arq(self, uuid):
        return self.request('GET', '/accelerator_requests/%s' % uuid).json()

    def list_deployables(self):
        return self.request('GET', '/deployables').json()['deployables']

    def list_devices(self):
        return self.request('GET', '/devices').json()['devices']
