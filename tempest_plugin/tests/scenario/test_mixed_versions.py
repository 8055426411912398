"""A mixed cloud: servers moved between patched and unpatched computes.

During a rolling upgrade (or while a compute is reverted) some
nova-computes run Nova without the nova-cyborg series. They do not report
the capability trait ``CUSTOM_NOVA_CYBORG_1_0`` on their compute node
provider (``nova_cyborg.model.capability``); that is how this test finds them,
through Placement, and it is skipped when the cloud has none (the local
cloud has one with ``python -m localcloud up --unpatched-computes 1``).

The admin (a project of its own) moves the owner's servers in every
direction a server of each kind can take:

* a server whose flavor names a device profile never lands on an
  unpatched compute: a cold migration, live migration or evacuation to
  one is refused before anything changes (HTTP 409 or 400 naming the host
  and the trait), and so is an unshelve to one (HTTP 409, the server
  stays shelved); a resize and an unshelve without a host land on a
  patched compute with the devices;
* a server whose accelerators were added with addAccelerator is not
  moved to an unpatched compute either;
* a server without accelerators moves between the two kinds of computes
  in both directions, as upstream Nova moves it; addAccelerator on the
  unpatched compute is refused (HTTP 409) and changes nothing.

After every refusal the server is ACTIVE on the same host with the same
accelerator requests (ARQs), Bound to the same providers, allocated and
in its domain's ``<hostdev>`` elements. The owner sees the server ACTIVE;
another tenant sees nothing of it. Once the owner deletes it nothing is
left: no ARQ, no allocation.
"""

from oslo_log import log as logging
from tempest.common import waiters
from tempest import config
from tempest.lib.common import api_microversion_fixture
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
import testtools

from tempest_plugin.services import server_accelerators_client as sa_client
from tempest_plugin.tests import base

CONF = config.CONF
LOG = logging.getLogger(__name__)

TRAIT_PREFIX = 'CUSTOM_NOVA_CYBORG_'
#: What every patched compute reports; an unpatched one does not.
CAPABILITY = TRAIT_PREFIX + '1_0'
#: What a live migration of a server with accelerators needs.
LIVE_CAPABILITY = TRAIT_PREFIX + '1_1'
#: Cold migration with a host (2.56), unshelve to a host (2.91).
MICROVERSION = '2.91'
#: The local cloud's live-migratable VFs (localcloud.configs).
MIGRATABLE_RC = 'CUSTOM_MIGRATABLE_VF'
MIGRATABLE_TRAIT = 'HW_PCI_LIVE_MIGRATABLE'
MOVES = (CONF.compute_feature_enabled.cold_migration and
         CONF.compute_feature_enabled.live_migration)


@testtools.skipUnless(MOVES, 'Cold or live migration is not available.')
class MixedVersionsTest(base.AdminMoveTest):

    credentials = ['primary', 'alt', 'admin']
    min_microversion = MICROVERSION

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.alt_servers_client = cls.os_alt.servers_client

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.patched, cls.unpatched = cls.computes()
        if not cls.unpatched:
            raise cls.skipException(
                'Every compute reports %s: the cloud has no unpatched '
                'nova-compute (the local cloud: python -m localcloud up '
                '--unpatched-computes 1)' % CAPABILITY)
        if not cls.patched:
            raise cls.skipException('No compute reports %s' % CAPABILITY)
        cls.old = sorted(cls.unpatched)[0]
        # The flavor's profile: a live-migratable device where the cloud
        # has one, so that only the host's version refuses the move.
        migratable = [
            rp for rp in cls.resource_providers_client.
            list_resource_providers(resources='%s:1' % MIGRATABLE_RC)[
                'resource_providers']
            if MIGRATABLE_TRAIT in cls.resource_providers_client.
            list_resource_provider_traits(rp['uuid'])['traits']]
        cls.flavor_profile = (cls.create_device_profile(
            [{'resources:%s' % MIGRATABLE_RC: '1'}]) if migratable
            else cls.profile)
        cls.accel_flavor = cls.create_flavor(cls.flavor_profile)
        cls.resize_flavor = cls.create_flavor(cls.flavor_profile)
        cls.plain_flavor = cls.create_flavor()
        # A plain flavor an operator keeps on patched computes (servers
        # that may get accelerators later).
        cls.patched_flavor = cls.create_flavor()
        cls.flavors_client.set_flavor_extra_spec(
            cls.patched_flavor, **{'trait:%s' % CAPABILITY: 'required'})

    @classmethod
    def computes(cls):
        """``({host: provider}, {host: provider})``: the compute nodes
        (root providers with MEMORY_MB) that report the capability trait,
        and those that do not, by name (a libvirt compute node's name is
        its host's)."""
        patched, unpatched = {}, {}
        rps = cls.resource_providers_client
        for rp in rps.list_resource_providers(resources='MEMORY_MB:1')[
                'resource_providers']:
            traits = rps.list_resource_provider_traits(rp['uuid'])['traits']
            (patched if CAPABILITY in traits else unpatched)[rp['name']] = (
                rp['uuid'])
        return patched, unpatched

    def setUp(self):
        super().setUp()
        self.useFixture(api_microversion_fixture.APIMicroversionFixture(
            compute_microversion=MICROVERSION,
            placement_microversion=self.placement_microversion))

    # What the owner, the other tenant and the admin see

    def host_of(self, server_id):
        return self.show_server(server_id)['OS-EXT-SRV-ATTR:host']

    def state(self, server_id, profile):
        """(host, ARQ uuid -> provider) of an ACTIVE server, its devices
        checked (allocation, Bound ARQs, domain hostdevs)."""
        arqs = (self.assert_accelerated(server_id, profile)
                if profile else [])
        if not profile:
            self.assertEqual([], self.list_arqs(server_id))
        return (self.host_of(server_id),
                {arq['uuid']: arq['device_rp_uuid'] for arq in arqs})

    def assert_owner_view(self, server_id):
        """The owner sees it ACTIVE; the other tenant does not see it."""
        self.assertEqual('ACTIVE', self.servers_client.show_server(
            server_id)['server']['status'])
        self.assertRaises(lib_exc.NotFound,
                          self.alt_servers_client.show_server, server_id)

    def assert_refused(self, error, server_id, profile, before, call,
                       *args, **kwargs):
        """``call`` is refused with ``error`` naming the unpatched host
        (or ``kwargs['why']``, what else keeps the server's devices where
        they are); nothing changed. Returns the message."""
        why = kwargs.pop('why', self.old)
        exc = self.assertRaises(error, call, server_id, *args, **kwargs)
        LOG.info('%s of server %s refused: %s', call.__name__, server_id,
                 exc)
        self.assertIn(why, str(exc), 'The refusal does not say %s: %s' % (
            why, exc))
        self.wait_for_status(server_id, 'ACTIVE')
        self.assertEqual(before, self.state(server_id, profile))
        self.assert_owner_view(server_id)
        return str(exc)

    # Moves

    def cold_migrate(self, server_id, host):
        self.admin_servers_client.migrate_server(server_id, host=host)
        self.wait_for_status(server_id, 'VERIFY_RESIZE')
        self.assertEqual(host, self.host_of(server_id))
        self.servers_client.confirm_resize_server(server_id)
        self.wait_for_status(server_id, 'ACTIVE')

    def live_migrate(self, server_id, host):
        self.admin_servers_client.live_migrate_server(
            server_id, host=host, block_migration='auto')
        waiters.wait_for_server_status(self.servers_client, server_id,
                                       'ACTIVE')
        self.wait_until(lambda: self.host_of(server_id) == host,
                        'server %s on %s' % (server_id, host))
        self.assertEqual(host, self.host_of(server_id))

    def shelve_offload(self, server_id):
        self.servers_client.shelve_server(server_id)
        if CONF.compute.shelved_offload_time < 0:
            self.wait_for_status(server_id, 'SHELVED')
            self.admin_servers_client.shelve_offload_server(server_id)
        self.wait_for_status(server_id, 'SHELVED_OFFLOADED')

    def add_accelerator(self, server_id, profile):
        """The owner adds ``profile``; its event ends in Success."""
        request_id = self.server_accelerators_client.add_accelerator(
            server_id, profile.name).response['x-openstack-request-id']
        found = {}

        def finished():
            action = self.admin_servers_client.show_instance_action(
                server_id, request_id)['instanceAction']
            for event in action.get('events', []):
                if (event['event'] == sa_client.EVENTS[sa_client.ADD] and
                        event.get('result')):
                    found.update(event)
            return bool(found)

        self.wait_until(finished, 'addAccelerator of %s' % server_id)
        self.assertEqual('Success', found.get('result'), found)

    # Tests

    @decorators.idempotent_id('4f0b7a59-3f4e-4b61-9d8e-6c1f0f7b2a11')
    def test_flavor_accelerators_stay_on_patched_computes(self):
        profile = self.flavor_profile
        server_id = self.create_server(self.accel_flavor)
        before = self.state(server_id, profile)
        self.assertIn(before[0], self.patched,
                      'A server with accelerators was scheduled to the '
                      'unpatched compute %s' % before[0])

        self.assertIn(CAPABILITY, self.assert_refused(
            lib_exc.Conflict, server_id, profile, before,
            self.admin_servers_client.migrate_server, host=self.old))
        self.assertIn(LIVE_CAPABILITY, self.assert_refused(
            lib_exc.BadRequest, server_id, profile, before,
            self.admin_servers_client.live_migrate_server, host=self.old,
            block_migration='auto'))
        self.assertIn(CAPABILITY, self.assert_refused(
            lib_exc.Conflict, server_id, profile, before,
            self.admin_servers_client.evacuate_server, host=self.old))

        # A resize is scheduled among the patched computes only.
        self.servers_client.resize_server(server_id, self.resize_flavor)
        self.wait_for_status(server_id, 'VERIFY_RESIZE')
        self.assertIn(self.host_of(server_id), self.patched)
        self.assert_accelerated(server_id, profile, 'VERIFY_RESIZE')
        self.servers_client.confirm_resize_server(server_id)
        self.wait_for_status(server_id, 'ACTIVE')
        resized = self.state(server_id, profile)
        self.assertIn(resized[0], self.patched)

        # Unshelved to the unpatched compute: refused by nova-api with the
        # reason, the server stays offloaded; then unshelved where it may
        # go.
        self.shelve_offload(server_id)
        self.assert_not_accelerated(server_id, profile, 'SHELVED_OFFLOADED')
        exc = self.assertRaises(
            lib_exc.Conflict, self.admin_servers_client.unshelve_server,
            server_id, host=self.old)
        LOG.info('unshelve of server %s to %s refused: %s', server_id,
                 self.old, exc)
        self.assertIn(self.old, str(exc))
        self.assertIn(CAPABILITY, str(exc))
        self.assertEqual('SHELVED_OFFLOADED',
                         self.show_server(server_id)['status'])
        self.assert_not_accelerated(server_id, profile, 'SHELVED_OFFLOADED')
        self.servers_client.unshelve_server(server_id)
        self.wait_for_status(server_id, 'ACTIVE')
        unshelved = self.state(server_id, profile)
        self.assertIn(unshelved[0], self.patched)
        self.assert_owner_view(server_id)
        self.delete_server_and_assert_released(server_id)

    @decorators.idempotent_id('a3c9e0d2-5b7f-4e8a-9c1d-2f6b8e4d7c35')
    def test_added_accelerators_stay_on_patched_computes(self):
        profile = self.profile
        server_id = self.create_server(self.patched_flavor)
        self.assertIn(self.host_of(server_id), self.patched)
        self.add_accelerator(server_id, profile)
        before = self.state(server_id, profile)

        # A cold migration is refused for any destination (only the
        # flavor's devices would move); the others for the unpatched one.
        self.assert_refused(
            lib_exc.BadRequest, server_id, profile, before,
            self.admin_servers_client.migrate_server, host=self.old,
            why='addAccelerator')
        self.assertIn(LIVE_CAPABILITY, self.assert_refused(
            lib_exc.BadRequest, server_id, profile, before,
            self.admin_servers_client.live_migrate_server, host=self.old,
            block_migration='auto'))
        self.assertIn(CAPABILITY, self.assert_refused(
            lib_exc.Conflict, server_id, profile, before,
            self.admin_servers_client.evacuate_server, host=self.old))
        self.assert_owner_view(server_id)
        self.delete_server_and_assert_released(server_id)

    @decorators.idempotent_id('c7d1f4b8-6a2e-4d3c-8b9f-1e5a7c0d9b46')
    def test_server_without_accelerators_moves_as_upstream(self):
        server_id = self.create_server(self.plain_flavor)
        patched = sorted(self.patched)[0]
        if self.host_of(server_id) != self.old:
            self.live_migrate(server_id, self.old)
        before = self.state(server_id, None)

        # addAccelerator on the unpatched compute: refused, nothing kept.
        exc = self.assertRaises(
            lib_exc.Conflict, self.server_accelerators_client.add_accelerator,
            server_id, self.profile.name)
        LOG.info('addAccelerator of server %s refused: %s', server_id, exc)
        # Named from Placement: the unpatched compute is not asked.
        self.assertIn(self.old, str(exc))
        self.assertIn(CAPABILITY, str(exc))
        self.assertEqual(before, self.state(server_id, None))
        self.assert_not_accelerated(server_id, self.profile)

        self.cold_migrate(server_id, patched)
        self.cold_migrate(server_id, self.old)
        self.live_migrate(server_id, patched)
        self.live_migrate(server_id, self.old)
        self.shelve_offload(server_id)
        self.admin_servers_client.unshelve_server(server_id, host=patched)
        self.wait_for_status(server_id, 'ACTIVE')
        self.assertEqual(patched, self.host_of(server_id))
        self.assert_owner_view(server_id)
        self.delete_server_and_assert_released(server_id)
