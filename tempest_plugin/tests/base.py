"""The base of every nova-cyborg test: clients, microversions, resources.

Servers are created by the primary user with ``networks='none'`` (compute
microversion 2.37) from ``[compute] image_ref``; device profiles, flavors,
Placement and the accelerator requests (ARQs) are handled by the admin.
"""

import json

from oslo_log import log as logging
from tempest.common import waiters
from tempest import config
from tempest.lib.common import api_microversion_fixture
from tempest.lib.common import api_version_utils
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import exceptions as lib_exc
from tempest import test

from tempest_plugin.tests import checks

CONF = config.CONF
LOG = logging.getLogger(__name__)

DP_EXTRA_SPEC = 'accel:device_profile'


class DeviceProfile(object):
    """A device profile the tests created in Cyborg."""

    def __init__(self, name, uuid, groups):
        self.name = name
        self.uuid = uuid
        self.groups = groups

    def group_resources(self, index):
        """{resource class: amount} of group ``index``."""
        return {key.split(':', 1)[1]: int(value)
                for key, value in self.groups[index].items()
                if key.startswith('resources:')}

    @property
    def resource_classes(self):
        return {rc for index in range(len(self.groups))
                for rc in self.group_resources(index)}

    @property
    def device_count(self):
        """How many ARQs Cyborg makes for it: one per unit of resource."""
        return sum(sum(self.group_resources(index).values())
                   for index in range(len(self.groups)))


def configured_profile_groups():
    """``[nova_cyborg] device_profile_groups``, parsed and checked."""
    raw = CONF.nova_cyborg.device_profile_groups
    try:
        groups = json.loads(raw)
    except ValueError as e:
        raise lib_exc.InvalidConfiguration(
            '[nova_cyborg] device_profile_groups is not JSON: %s' % e)
    if (not isinstance(groups, list) or not groups or
            not all(isinstance(g, dict) and any(
                k.startswith('resources:') for k in g) for g in groups)):
        raise lib_exc.InvalidConfiguration(
            '[nova_cyborg] device_profile_groups must be a non-empty list '
            'of groups, each with a "resources:<RC>" key: %s' % raw)
    return groups


class BaseNovaCyborgTest(api_version_utils.BaseMicroversionTest,
                         test.BaseTestCase):
    """Clients and resource helpers; no server checks (see checks.py)."""

    credentials = ['primary', 'admin']

    # networks='none' when creating a server.
    min_microversion = '2.37'
    # root_provider_uuid of resource providers.
    placement_microversion = '1.14'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.nova_cyborg:
            raise cls.skipException(
                '[service_available] nova_cyborg is false: the cloud does '
                'not run nova-cyborg')
        if not CONF.service_available.nova:
            raise cls.skipException('Nova is not available')
        api_version_utils.check_skip_with_microversion(
            cls.min_microversion, cls.max_microversion,
            CONF.compute.min_microversion, CONF.compute.max_microversion)
        # Nova 34 itself needs a far newer Placement: unless the
        # configuration caps it, 1.14 is there.
        api_version_utils.check_skip_with_microversion(
            cls.placement_microversion, 'latest',
            CONF.placement.min_microversion,
            CONF.placement.max_microversion or 'latest')
        configured_profile_groups()

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.servers_client = cls.os_primary.servers_client
        cls.server_accelerators_client = (
            cls.os_primary.nova_cyborg_compute.ServerAcceleratorsClient())
        cls.admin_servers_client = cls.os_admin.servers_client
        cls.flavors_client = cls.os_admin.flavors_client
        cls.accelerator_client = cls.os_admin.nova_cyborg.AcceleratorClient()
        cls.placement_client = cls.os_admin.placement_client
        cls.resource_providers_client = (
            cls.os_admin.resource_providers_client)

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.request_microversion = (
            api_version_utils.select_request_microversion(
                cls.min_microversion, CONF.compute.min_microversion))
        cls.setup_api_microversion_fixture(
            compute_microversion=cls.request_microversion,
            placement_microversion=cls.placement_microversion)

    # Device profiles and flavors. Class-wide by default: pass
    # cleanup=self.addCleanup to tie one to a test.

    @classmethod
    def create_device_profile(cls, groups=None, cleanup=None):
        groups = groups or configured_profile_groups()
        name = data_utils.rand_name(
            prefix='tempest', name='nova-cyborg-dp')
        body = cls.accelerator_client.create_device_profile(name, groups)
        (cleanup or cls.addClassResourceCleanup)(
            test_utils.call_and_ignore_notfound_exc,
            cls.accelerator_client.delete_device_profile, body['uuid'])
        return DeviceProfile(name, body['uuid'], groups)

    @classmethod
    def create_flavor(cls, device_profile=None, cleanup=None):
        """A flavor the size of ``[compute] flavor_ref``.

        :param device_profile: the value of ``accel:device_profile``; a
            DeviceProfile for its name, or any string. None: no extra spec.
        """
        base = cls.flavors_client.show_flavor(
            CONF.compute.flavor_ref)['flavor']
        flavor = cls.flavors_client.create_flavor(
            name=data_utils.rand_name(prefix='tempest', name='nova-cyborg'),
            ram=base['ram'], vcpus=base['vcpus'], disk=base['disk'],
            id=data_utils.rand_uuid())['flavor']
        (cleanup or cls.addClassResourceCleanup)(
            test_utils.call_and_ignore_notfound_exc,
            cls.flavors_client.delete_flavor, flavor['id'])
        if device_profile is not None:
            cls.flavors_client.set_flavor_extra_spec(
                flavor['id'],
                **{DP_EXTRA_SPEC: getattr(device_profile, 'name',
                                          device_profile)})
        return flavor['id']

    # Servers

    def server_create_args(self, flavor_id):
        return dict(name=data_utils.rand_name(prefix='tempest',
                                              name='nova-cyborg'),
                    imageRef=CONF.compute.image_ref, flavorRef=flavor_id,
                    networks='none')

    def create_server(self, flavor_id, status='ACTIVE'):
        """Boot a server, wait for ``status``; return its id."""
        server = self.servers_client.create_server(
            **self.server_create_args(flavor_id))['server']
        self.addCleanup(waiters.wait_for_server_termination,
                        self.servers_client, server['id'])
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        self.servers_client.delete_server, server['id'])
        self.wait_for_status(server['id'], status)
        return server['id']

    def wait_for_status(self, server_id, status, **kwargs):
        return waiters.wait_for_server_status(
            self.servers_client, server_id, status, **kwargs)

    def show_server(self, server_id):
        """The server as the admin sees it (with its host)."""
        return self.admin_servers_client.show_server(server_id)['server']


class AcceleratorTest(checks.AcceleratorChecksMixin, BaseNovaCyborgTest):
    """A class-wide device profile and a flavor that asks for it."""

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.profile = cls.create_device_profile()
        cls.flavor = cls.create_flavor(cls.profile)


#: Migrations with their uuid (the consumer of the source's allocation).
MIGRATION_UUID_MICROVERSION = '2.59'


class AdminMoveTest(AcceleratorTest):
    """The cloud admin (another project) moves the owner's servers."""

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.migrations_client = cls.os_admin.migrations_client

    def setUp(self):
        super().setUp()
        # The fixture's cleanup resets every microversion it knows of:
        # give Placement's again too.
        self.useFixture(api_microversion_fixture.APIMicroversionFixture(
            compute_microversion=MIGRATION_UUID_MICROVERSION,
            placement_microversion=self.placement_microversion))

    @property
    def owner_project(self):
        return self.os_primary.credentials.project_id
