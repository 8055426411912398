"""Run the real Glance API in a child process for a test.

:class:`GlanceFixture` starts :mod:`tests.functional.harness.glance_process`
with the same interpreter: SQLite database, file store and staging area in
the fixture's directory, no Keystone (requests act as an admin). Tests give
its URL to the services that need images, such as cyborg-conductor, which
looks up FPGA bitstreams with openstacksdk (cloud ``devstack-admin``, see
:meth:`GlanceFixture.clouds_yaml`), and the sidecar, which downloads them
with keystoneauth (see :meth:`GlanceFixture.keystoneauth_options`).
"""

import os
import time

import fixtures
import requests

from tests.functional.harness import child

CONFIG_TEMPLATE = """\
[DEFAULT]
debug = true
log_file = {log_path}
use_stderr = false
enabled_backends = fs:file
enabled_import_methods = []

[database]
connection = sqlite:///{db_path}

[glance_store]
default_backend = fs

[fs]
filesystem_store_datadir = {base_dir}/images/

[os_glance_staging_store]
filesystem_store_datadir = {base_dir}/staging/

[os_glance_tasks_store]
filesystem_store_datadir = {base_dir}/tasks/

[oslo_concurrency]
lock_path = {base_dir}

[oslo_policy]
policy_file = {policy_path}

[paste_deploy]
config_file = {paste_path}
"""

# The unauthenticated context has is_admin set but no roles, and Glance's
# policies check "role:admin": make every request an admin one.
POLICY_YAML = """"context_is_admin": "@"
"""

# Glance's own no-Keystone pipeline ("unauthenticated-context": an admin
# context without user or project) without the optional middlewares.
PASTE_TEMPLATE = """\
[composite:glance-api]
paste.composite_factory = glance.api:root_app_factory
/: api
/healthcheck: healthcheck

[composite:api]
paste.composite_factory = glance.api:pipeline_factory
default = versionnegotiation unauthenticated-context rootapp

[composite:rootapp]
paste.composite_factory = glance.api:root_app_factory
/: apiversions
/v2: apiv2app

[app:apiversions]
paste.app_factory = glance.api.versions:create_resource

[app:apiv2app]
paste.app_factory = glance.api.v2.router:API.factory

[app:healthcheck]
paste.app_factory = oslo_middleware:Healthcheck.app_factory
backends = disable_by_file
disable_by_file_path = {base_dir}/healthcheck_disable

[filter:versionnegotiation]
paste.filter_factory = \
glance.api.middleware.version_negotiation:VersionNegotiationFilter.factory

[filter:unauthenticated-context]
paste.filter_factory = \
glance.api.middleware.context:UnauthenticatedContextMiddleware.factory
"""

# openstacksdk without Keystone: no auth, the image endpoint given. It must
# be the unversioned root, as in a Keystone catalog: openstacksdk runs
# version discovery on it (GET / answers 300 with the versions), while
# Glance has no discovery document under /v2 (/v2 redirects to /v2/, which
# is a 404), so ".../v2" fails with DiscoveryFailure.
CLOUDS_YAML_TEMPLATE = """\
clouds:
  {cloud}:
    auth_type: none
    region_name: RegionOne
    image_endpoint_override: {endpoint}
"""


class GlanceError(Exception):
    """Unexpected answer from the Glance child process."""


class GlanceFixture(child.ChildServiceFixture):
    """Real Glance API (v2) in a child process.

    :param base_dir: where to put the config, DB, images and logs; a
        temporary directory removed at cleanup when None.

    After setUp: ``endpoint`` (``http://127.0.0.1:P``, the root: the API is
    under ``/v2``), ``log_path``, ``base_dir``, ``startup_time`` (seconds).
    """

    NAME = 'Glance'
    ERROR = GlanceError
    REQUEST_TIMEOUT = 30
    ACTIVE_TIMEOUT = 30

    def __init__(self, base_dir=None):
        super().__init__()
        self._base_dir = base_dir

    def _setUp(self):
        self.base_dir = (self._base_dir
                         or self.useFixture(fixtures.TempDir()).path)
        os.makedirs(self.base_dir, exist_ok=True)
        self.config_dir = os.path.join(self.base_dir, 'etc')
        self.log_path = os.path.join(self.base_dir, 'glance.log')
        self.output_path = os.path.join(self.base_dir, 'glance-process.out')
        port_file = os.path.join(self.base_dir, 'glance.port')
        db_path = os.path.join(self.base_dir, 'glance.sqlite')
        # A reused base_dir starts from scratch.
        for path in (port_file, db_path, self.log_path, self.output_path):
            if os.path.exists(path):
                os.unlink(path)
        for name in ('etc', 'images', 'staging', 'tasks'):
            os.makedirs(os.path.join(self.base_dir, name), exist_ok=True)
        paste_path = os.path.join(self.config_dir, 'glance-api-paste.ini')
        policy_path = os.path.join(self.config_dir, 'policy.yaml')
        with open(os.path.join(self.config_dir, 'glance-api.conf'),
                  'w') as f:
            f.write(CONFIG_TEMPLATE.format(
                log_path=self.log_path, db_path=db_path,
                base_dir=self.base_dir, paste_path=paste_path,
                policy_path=policy_path))
        with open(policy_path, 'w') as f:
            f.write(POLICY_YAML)
        with open(paste_path, 'w') as f:
            f.write(PASTE_TEMPLATE.format(base_dir=self.base_dir))

        env = dict(os.environ, OS_GLANCE_CONFIG_DIR=self.config_dir)
        port = self.start_child(
            'tests.functional.harness.glance_process',
            ['--config-dir', self.config_dir], port_file, env=env)
        self.endpoint = 'http://127.0.0.1:%d' % port
        self.session = requests.Session()
        self.addCleanup(self.session.close)

    # Client configuration for the services under test.

    def clouds_yaml(self, path, cloud='devstack-admin'):
        """Write an openstacksdk clouds.yaml reaching this Glance.

        Point ``OS_CLIENT_CONFIG_FILE`` at ``path``; then
        ``openstack.connection.Connection(cloud=cloud).image`` talks to
        this Glance without Keystone. Returns ``path``.
        """
        with open(path, 'w') as f:
            f.write(CLOUDS_YAML_TEMPLATE.format(cloud=cloud,
                                                endpoint=self.endpoint))
        return path

    def keystoneauth_options(self):
        """keystoneauth options (a config group) to reach this Glance.

        For a group registered with keystoneauth1.loading's
        ``register_session_conf_options``, ``register_auth_conf_options``
        and ``register_adapter_conf_options`` (the sidecar's ``[glance]``):
        an Adapter loaded from them sends ``GET /v2/images/{id}/file``
        to this Glance without a token. ``endpoint_override`` is the
        unversioned root and requests carry ``/v2``; an Adapter given no
        ``version``/``min_version`` does no discovery (Glance has no
        discovery document under ``/v2``; the root one works).
        """
        return {'auth_type': 'none',
                'endpoint_override': self.endpoint}

    # REST helpers for test assertions.

    def request(self, method, path, expected=(200,), **kwargs):
        """Call ``endpoint + /v2 + path``; return the Response.

        Raises :class:`GlanceError` with the body on other statuses.
        """
        url = self.endpoint + '/v2' + path
        resp = self.session.request(method, url,
                                    timeout=self.REQUEST_TIMEOUT, **kwargs)
        if resp.status_code not in expected:
            raise GlanceError('%s %s: HTTP %s (expected %s): %s' % (
                method, url, resp.status_code, expected, resp.text))
        return resp

    def create_image(self, name, data, properties=None,
                     disk_format='raw', container_format='bare'):
        """Create an image, upload ``data`` and wait until it is active.

        ``properties`` become image properties (string values, e.g.
        ``{'accel:function_id': '...'}``). Returns the image id.
        """
        body = {'name': name, 'disk_format': disk_format,
                'container_format': container_format,
                'visibility': 'public'}
        body.update(properties or {})
        image = self.request('POST', '/images', expected=(201,),
                             json=body).json()
        self.request('PUT', '/images/%s/file' % image['id'],
                     expected=(204,), data=data,
                     headers={'Content-Type': 'application/octet-stream'})
        deadline = time.monotonic() + self.ACTIVE_TIMEOUT
        while True:
            image = self.get_image(image['id'])
            if image['status'] == 'active':
                return image['id']
            if image['status'] in ('killed', 'deleted'):
                raise GlanceError('image %s is %s' % (image['id'],
                                                      image['status']))
            if time.monotonic() > deadline:
                raise GlanceError('image %s still %s after %s s' % (
                    image['id'], image['status'], self.ACTIVE_TIMEOUT))
            time.sleep(0.05)

    def get_image(self, image_id):
        return self.request('GET', '/images/%s' % image_id).json()

    def list_images(self, **filters):
        return self.request('GET', '/images', params=filters).json()[
            'images']

    def download(self, image_id):
        return self.request('GET', '/images/%s/file' % image_id).content
