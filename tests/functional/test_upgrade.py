"""Upgrade safety: a compute that is not patched is never handed a server
with accelerators.

A patched and an unpatched nova-compute report the same Nova service
version; what tells them apart is the traits a patched compute reports on
its compute node provider (``nova_cyborg.model.capability``). Here ``compute2``
runs the patched code but its resource tracker does not report them,
which is all that Nova's scheduler and API see of an unpatched compute.
It has more free memory and devices than ``compute1``, so that without the
trait Nova would pick it.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402
from nova.compute import resource_tracker  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402

from tests.functional import test_lifecycle  # noqa: E402

#: What a compute patched by nova-cyborg reports: one trait per capability
#: version it serves; a server with accelerators needs 1.0 for all but
#: live migration.
TRAIT = 'CUSTOM_NOVA_CYBORG_1_0'
TRAITS = {TRAIT, 'CUSTOM_NOVA_CYBORG_1_1', 'CUSTOM_NOVA_CYBORG_1_2'}


class UpgradeTest(test_lifecycle.ServerWithAcceleratorBase):

    def setUp(self):
        super().setUp()
        unpatched = self.unpatched = set()
        real = resource_tracker.ResourceTracker._get_traits

        def _get_traits(rt, context, nodename, provider_tree):
            traits = real(rt, context, nodename, provider_tree)
            return [t for t in traits
                    if rt.host not in unpatched or t not in TRAITS]
        self.useFixture(fixtures.MockPatchObject(
            resource_tracker.ResourceTracker, '_get_traits', _get_traits))
        # As in test_move: no disks to copy.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._get_instance_disk_info',
            return_value=[]))
        self.useFixture(fixtures.MockPatch('os.rename'))
        self.unpatched.add('compute2')
        self.start_accel_compute('compute2', memory_gb=64, num_vfs=4)

    def traits(self, hostname):
        return set(self._get_provider_traits(
            self._get_provider_uuid_by_host(hostname)))

    def assert_unmoved(self):
        """The server still runs on compute1 with the ARQs of its boot."""
        server = self.api.get_server(self.server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({a['uuid'] for a in self.arqs},
                         {a['uuid'] for a in self.assert_accelerated(
                             server, 1)})
        self.assertEqual({}, {k: v for k, v in
                              self._fpga_usage('compute2').items() if v})

    def test_only_patched_computes_report_the_traits(self):
        self.assertTrue(TRAITS <= self.traits('compute1'))
        self.assertEqual(set(), TRAITS & self.traits('compute2'))

    def test_boot_goes_to_a_patched_compute(self):
        server = self.boot(self.flavor)
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assert_accelerated(server, 1)

    def test_migrate_to_unpatched_host_refused(self):
        exc = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            self.server['id'], {'migrate': {'host': 'compute2'}})
        self.assertEqual(409, exc.response.status_code)
        message = exc.response.text
        self.assertIn('destination host compute2 cannot move a server with '
                      'accelerators', message)
        self.assertIn(TRAIT, message)
        self.assertIn('not patched by nova-cyborg', message)
        self.assert_unmoved()

    def test_migrate_scheduled_to_patched_hosts_only(self):
        # No patched host but the source: no valid host, nothing changes.
        self.api.post_server_action(self.server['id'], {'migrate': None})
        self._wait_for_migration_status(self.server, ['error'])
        # The conductor errors the migration before it puts the server
        # back to ACTIVE (nova.scheduler.utils.set_vm_state_and_notify).
        self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None})
        self.assert_unmoved()
        # A patched host appears: the server goes there, never to compute2.
        self.start_accel_compute('compute3')
        self._migrate_server(self.server)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('compute3', server['OS-EXT-SRV-ATTR:host'])
        self._confirm_resize(self.server)
        self.assert_accelerated(self.api.get_server(self.server['id']), 1)

    def test_server_without_accelerators_migrates_as_before(self):
        flavor = self._create_flavor(name='plain')
        server = self._create_server(
            flavor_id=flavor, image_uuid=base.IMAGE, networks='none',
            host='compute1')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self._migrate_server(server, host='compute2')
        server = self.api.get_server(server['id'])
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self._confirm_resize(server)

    def test_migrate_from_unpatched_source_refused(self):
        # compute1 reverted to an unpatched Nova, and its traits removed as
        # the upgrade guide says: the source's half of the move cannot run.
        self.unpatched.add('compute1')
        rp = self._get_provider_uuid_by_host('compute1')
        self._set_provider_traits(rp, list(self.traits('compute1') - TRAITS))
        exc = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            self.server['id'], {'migrate': None})
        self.assertEqual(409, exc.response.status_code)
        self.assertIn('source host compute1 cannot move a server with '
                      'accelerators', exc.response.text)
        self.assert_unmoved()

    def test_evacuate_to_unpatched_host_refused(self):
        service = self.compute_service('compute1')
        self.computes['compute1'].stop()
        self.admin_api.put_service(service['id'], {'forced_down': 'true'})
        exc = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            self.server['id'], {'evacuate': {'host': 'compute2'}})
        self.assertEqual(409, exc.response.status_code)
        self.assertIn('destination host compute2 cannot move a server with '
                      'accelerators', exc.response.text)
        server = self.api.get_server(self.server['id'])
        self.assertEqual(('compute1', None), (
            server['OS-EXT-SRV-ATTR:host'], server['OS-EXT-STS:task_state']))
        self.assertEqual(
            [('Bound', 'compute1')],
            [(a['state'], a['hostname'])
             for a in self.cyborg.list_arqs(self.server['id'])])
