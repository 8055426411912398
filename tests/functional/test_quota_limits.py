"""Unified limits for the devices a server gets after its boot.

The owner's project may use one FPGA (``class:FPGA``, a Keystone limit,
Nova's UnifiedLimitsFixture; Placement counts the usage). Its first
accelerated server takes it. Then neither addAccelerator nor a resize into
a flavor with the device profile may give the project a second one: HTTP
403 naming the resource class, and nothing changes. Once the cloud admin
raises the project's limit, the same request succeeds.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

import os  # noqa: E402

import nova.conf  # noqa: E402
from nova.tests import fixtures as nova_fixtures  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402

OWNER_PROJECT = attach_base.OWNER_PROJECT
LIMITS = {'servers': 10, 'class:VCPU': 64, 'class:MEMORY_MB': 65536,
          'class:DISK_GB': 1000, 'class:FPGA': 1}


class UnifiedLimitsTest(attach_base.AttachTestBase):

    def setUp(self):
        self.flags(driver='nova.quota.UnifiedLimitsDriver', group='quota')
        super().setUp()
        self.limits = self.useFixture(nova_fixtures.UnifiedLimitsFixture())
        for name, value in LIMITS.items():
            self.limits.create_registered_limit(resource_name=name,
                                                default_limit=value)
        self.plain = self._create_flavor(name='plain')
        with self.acting(self.owner_api):
            self.first = self.boot(self.accel_flavor)
        self.assert_accelerated(self.first, 1)

    def fpga_usage(self):
        return sum(self._get_provider_usages(rp).get('FPGA', 0)
                   for rp in self.device_rp_uuids('compute1').values())

    def refused(self, server, body):
        ex = self.assertRaises(
            client.OpenStackApiException, self.owner_api.post_server_action,
            server['id'], body)
        self.assertEqual(403, ex.response.status_code)
        self.assertIn('class:FPGA', str(ex))

    def assert_unchanged(self, server):
        """As the owner sees it: ACTIVE, its flavor, no task; no device,
        no ARQ, nothing allocated beyond the first server's FPGA."""
        seen = self.owner_api.get_server(server['id'])
        self.assertEqual('ACTIVE', seen['status'])
        self.assertIsNone(seen['OS-EXT-STS:task_state'])
        flavor = seen['flavor']
        self.assertIn(flavor.get('original_name', flavor.get('id')),
                      ('plain', self.plain))
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        self.assertEqual([], self.hostdev_bdfs(
            self.admin_api.get_server(server['id'])))
        self.assertEqual({}, self._device_allocations(server['id']))
        self.assertEqual(1, self.fpga_usage())

    def raise_limit(self):
        """The cloud admin gives the owner's project a second FPGA."""
        self.limits.create_limit(project_id=OWNER_PROJECT,
                                 resource_name='class:FPGA',
                                 resource_limit=2)

    def test_add_accelerator_at_the_limit(self):
        with self.acting(self.owner_api):
            server = self.boot(self.plain)
        self.refused(server, {'addAccelerator': {'device_profile': self.dp}})
        self.assert_unchanged(server)
        # The cloud admin's add on the owner's server counts the owner's
        # project too.
        ex = self.assertRaises(
            client.OpenStackApiException,
            self.cloud_admin_api.post_server_action, server['id'],
            {'addAccelerator': {'device_profile': self.dp}})
        self.assertEqual(403, ex.response.status_code)
        self.assert_unchanged(server)
        self.raise_limit()
        self.accelerator_action(self.owner_api, server, 'addAccelerator',
                                self.dp)
        self.assert_owner_has_devices(server, 'compute1', 1)
        self.assertEqual(2, self.fpga_usage())

    def test_resize_into_a_profile_flavor_at_the_limit(self):
        self.flags(allow_resize_to_same_host=True)
        self.without_disks()
        with self.acting(self.owner_api):
            server = self.boot(self.plain)
        # The resize moves the instance directory aside; the harness
        # writes no disks into it.
        os.makedirs(os.path.join(nova.conf.CONF.instances_path,
                                 server['id']), exist_ok=True)
        self.refused(server, {'resize': {'flavorRef': self.accel_flavor}})
        self.assert_unchanged(server)
        self.raise_limit()
        with self.acting(self.owner_api):
            self._resize_server(server, self.accel_flavor)
        self.assertEqual(2, self.fpga_usage())
        self.assertEqual(
            1, len(self.cyborg.list_arqs(server['id'])))
