"""nova-api refuses a live migration whose devices cannot move (#16).

A device (a VF, a vGPU) can move with a running guest only when its
provider carries ``HW_PCI_LIVE_MIGRATABLE`` (the sidecar sets it from its
configuration, :mod:`tests.functional.test_sidecar_live_migratable`). A
cloud admin's live migration of an owner's server using any other device
(an FPGA VF, a VF or a vGPU type not marked), the flavor's or one
attached with addAccelerator, is refused with HTTP 400 naming the
ARQ, its device profile, the device and the host; so is a forced
destination. Nothing changes: the server stays ACTIVE on its host with the
same ARQs and allocation, no migration record and no live-migration
action exist.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import json  # noqa: E402

from nova.tests.functional.api import client  # noqa: E402

from tests.functional import attach_base  # noqa: E402
from tests.functional.harness import identity  # noqa: E402

TRAIT = 'HW_PCI_LIVE_MIGRATABLE'
#: compute1 and compute2 each with two FPGAs reported by the generic PCI
#: driver: the VFs of the first PF (0000:81:00.0) support VFIO migration,
#: those of the second do not.
PCI_SPECS = '[pci]\ndevice_spec = %s' % json.dumps([
    {'address': '0000:81:00.0', 'resource_class': 'FPGA',
     'traits': ['MOVABLE'], 'live_migratable': True},
    {'vendor_id': '8086', 'resource_class': 'FPGA', 'traits': ['FIXED']}])
# Cyborg 17 takes only CUSTOM_ traits in a device profile (it refuses
# HW_PCI_LIVE_MIGRATABLE there): the devices are told apart by their own.
MIGRATABLE = [{'resources:FPGA': '1', 'trait:CUSTOM_MOVABLE': 'required'}]
NOT_MIGRATABLE = [{'resources:FPGA': '1', 'trait:CUSTOM_FIXED': 'required'}]


class RefusalChecks(attach_base.AttachSteps):
    """What the refusal leaves: nothing changed."""

    def snapshot(self):
        """What must not change: the server's host, state and task, its
        ARQs (uuid, state, device, handle) and its allocation."""
        server = self.admin_api.get_server(self.server['id'])
        arqs = sorted(
            (a['uuid'], a['state'], a['hostname'], a['device_rp_uuid'],
             json.dumps(a['attach_handle_info'], sort_keys=True))
            for a in self.cyborg.list_arqs(self.server['id']))
        return (server['status'], server['OS-EXT-SRV-ATTR:host'],
                server['OS-EXT-STS:task_state'], arqs,
                self.allocations(self.server['id']))

    def assert_refused(self, body, *words, api=None):
        """The cloud admin's live migration gets HTTP 400 with ``words``;
        nothing changed."""
        before = self.snapshot()
        api = api or self.cloud_admin_api
        ex = self.assertRaises(
            client.OpenStackApiException, api.post_server_action,
            self.server['id'], {'os-migrateLive': body})
        self.assertEqual(400, ex.response.status_code)
        message = ex.response.json()['badRequest']['message']
        self.assertIn('Live migration of this server with accelerators is '
                      'refused: ', message)
        for word in words:
            self.assertIn(word, message)
        self.assertEqual(before, self.snapshot())
        self.assertEqual('ACTIVE', before[0])
        self.assertEqual([], self.admin_api.get_migrations())
        self.assertNotIn('live-migration', [
            a['action'] for a in
            self.admin_api.get_instance_actions(self.server['id'])])
        self.assert_owner_has_devices(self.server, before[1],
                                      len(before[3]))
        self.assert_host_free('compute2')
        return message


class LiveMigrationRefusedTest(RefusalChecks, base.AcceleratorTestBase):
    """compute1 and compute2 with FPGAs of the fpga driver (not marked)."""

    def setUp(self):
        super().setUp()
        self.without_disks()
        self.start_accel_compute('compute1')
        self.dp, flavor = self.create_profile_flavor(attach_base.PROFILE)
        self.server = self.boot(flavor, api=self.owner_api)
        self.arqs = self.assert_owner_has_devices(self.server, 'compute1', 1)
        self.start_accel_compute('compute2')

    def test_device_without_trait(self):
        # compute1's FPGAs are reported by the fpga driver, not marked.
        (arq,) = self.arqs
        devices = {uuid: name for name, uuid in
                   self.device_rp_uuids('compute1').items()}
        message = self.assert_refused(
            {'host': None, 'block_migration': 'auto'},
            'accelerator request %s (device profile %s) uses device %s on '
            'host compute1, whose resource provider does not have trait %s'
            % (arq['uuid'], self.dp, devices[arq['device_rp_uuid']], TRAIT),
            'openstack server migrate')
        # The same with a destination the scheduler checks.
        self.assertEqual(message, self.assert_refused(
            {'host': 'compute2', 'block_migration': 'auto'}))


class LiveMigrationRefusedPciTest(RefusalChecks, base.AcceleratorTestBase):
    """Hosts with a live-migratable FPGA and one that is not."""

    def setUp(self):
        super().setUp()
        self.without_disks()
        self.start_pci_compute('compute1')
        self.dp, flavor = self.create_profile_flavor(MIGRATABLE)
        self.dp_fixed, _ = self.create_profile_flavor(NOT_MIGRATABLE)
        self.server = self.boot(flavor, api=self.owner_api)
        self.arqs = self.assert_owner_has_devices(self.server, 'compute1', 1)
        self.assertIn(TRAIT, self.traits(self.arqs[0]['device_rp_uuid']))
        self.start_pci_compute('compute2')

    def start_pci_compute(self, hostname):
        self.start_accel_compute(hostname, num_pfs=2, drivers=('pci',),
                                 extra_config=PCI_SPECS)

    def traits(self, rp_uuid):
        return set(self.placement.get(
            '/resource_providers/%s/traits' % rp_uuid,
            version='1.6').body['traits'])

    def test_attached_device_without_trait(self):
        # The flavor's device can move; the one the owner attached (to the
        # stopped server: Cyborg binds none to a running one with ARQs)
        # cannot.
        with self.acting(self.owner_api):
            self._stop_server(self.server)
            self.accelerator_action(self.owner_api, self.server,
                                    'addAccelerator', self.dp_fixed)
            self._start_server(self.server)
        arqs = self.assert_owner_has_devices(self.server, 'compute1', 2)
        (fixed,) = [a for a in arqs
                    if a['device_profile_name'] == self.dp_fixed]
        message = self.assert_refused(
            {'host': None, 'block_migration': 'auto'},
            'accelerator request %s (device profile %s) uses device '
            'compute1_0000:81:01.0 on host compute1' % (fixed['uuid'],
                                                        self.dp_fixed))
        self.assertNotIn(self.arqs[0]['uuid'], message)

    def test_forced_destination(self):
        # Every device could move, but the destination is forced (2.30 to
        # 2.67): the scheduler must choose the destination's devices.
        api = self.api_as(identity.CLOUD_ADMIN)
        api.microversion = '2.67'
        self.assert_refused(
            {'host': 'compute2', 'block_migration': 'auto', 'force': True},
            'the destination host compute2 is forced',
            'scheduler must choose the devices', api=api)
        # Below 2.30 a named host is always forced.
        api.microversion = '2.25'
        self.assert_refused(
            {'host': 'compute2', 'block_migration': 'auto'},
            'the destination host compute2 is forced', api=api)


class LiveMigrationRefusedVgpuTest(base.AcceleratorTestBase):
    """A vGPU of a type not in ``[gpu] live_migratable_mdev_types``."""

    def test_vgpu_type_not_marked(self):
        self.start_accel_compute('compute1', num_mdevcap=1, drivers=('gpu',),
                                 mdev_types=('nvidia-11',))
        (gpu,) = [f.address for f in self.hosts['compute1'].functions
                  .values() if f.mdev_types]
        dp, flavor = self.create_profile_flavor([{'resources:VGPU': '1'}])
        server = self.boot(flavor)
        (arq,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual(('Bound', 'MDEV'),
                         (arq['state'], arq['attach_handle_type']))
        allocations = self.allocations(server['id'])
        ex = self.assertRaises(
            client.OpenStackApiException, self.admin_api.post_server_action,
            server['id'], {'os-migrateLive': {
                'host': None, 'block_migration': 'auto'}})
        self.assertEqual(400, ex.response.status_code)
        self.assertIn(
            'accelerator request %s (device profile %s) uses device '
            'compute1_%s on host compute1, whose resource provider does not '
            'have trait %s' % (arq['uuid'], dp, gpu, TRAIT), str(ex))
        server = self.admin_api.get_server(server['id'])
        self.assertEqual(('ACTIVE', 'compute1', None), (
            server['status'], server['OS-EXT-SRV-ATTR:host'],
            server['OS-EXT-STS:task_state']))
        self.assertEqual([arq], self.cyborg.list_arqs(server['id']))
        self.assertEqual(allocations, self.allocations(server['id']))
        self.assertEqual([], self.admin_api.get_migrations())
