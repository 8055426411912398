"""The sidecar marks the devices that can be live migrated (issue #16).

``HW_PCI_LIVE_MIGRATABLE`` on a device's provider in Placement is what
nova-api and the scheduler read: the generic PCI driver sets it for a
``[pci] device_spec`` entry with ``live_migratable``, the GPU driver for
a VGPU of one of ``[gpu] live_migratable_mdev_types``. When the
configuration no longer says so (the sidecar restarted with it), the
trait leaves the provider: cyborg-conductor removes the trait it no
longer receives.

How a test starts such hosts::

    self.start_accel_compute(
        'compute1', drivers=('pci',), extra_config=vf_spec(True))
    self.start_accel_compute(
        'compute1', num_mdevcap=1, drivers=('gpu',),
        mdev_types=('nvidia-11',), extra_config=GPU_MIGRATABLE)
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import json  # noqa: E402

from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

TRAIT = 'HW_PCI_LIVE_MIGRATABLE'
MDEV_TYPE = 'nvidia-11'
#: Appended to the sidecar's configuration (oslo.config merges sections).
GPU_MIGRATABLE = '[gpu]\nlive_migratable_mdev_types = %s' % MDEV_TYPE


def vf_spec(live_migratable, vendor_id=base.AcceleratorTestBase.FPGA_VENDOR):
    """``[pci] device_spec`` selecting the VFs of the simulated cards."""
    spec = {'vendor_id': vendor_id, 'resource_class': 'FPGA'}
    if live_migratable is not None:
        spec['live_migratable'] = live_migratable
    return '[pci]\ndevice_spec = %s' % json.dumps(spec)


class LiveMigratableTraitTest(base.AcceleratorTestBase):

    def traits(self, name):
        rps = self.placement.get(
            '/resource_providers?name=%s' % name,
            version='1.14').body['resource_providers']
        self.assertEqual(1, len(rps), name)
        return set(self.placement.get(
            '/resource_providers/%s/traits' % rps[0]['uuid'],
            version='1.6').body['traits'])

    def sriov_pfs(self, hostname):
        """The host's PFs with VFs (``plain_pfs``: fakelibvirt's)."""
        return sorted(f.address for f in self.hosts[hostname].functions
                      .values() if f.virtfns)

    def wait_trait(self, name, present):
        waits.wait_until(
            lambda: (TRAIT in self.traits(name)) == present,
            '%s %s on provider %s' % (
                TRAIT, 'set' if present else 'removed', name))

    def restart_sidecar(self, hostname, **kwargs):
        """Stop the host's sidecar and start it with another config."""
        self.sidecars[hostname].sidecar.stop()
        conn = self.computes[hostname].driver._host.get_connection()
        self.sidecars[hostname] = self.useFixture(
            sidecar_fixture.SidecarFixture(
                hostname, self.hosts[hostname], self.broker.transport_url,
                self.placement_url, lambda: conn,
                cyborg_url=self.cyborg.endpoint, **kwargs))
        self.sidecars[hostname].cycle()

    def test_vf_spec(self):
        self.start_accel_compute('compute1', num_pfs=2, drivers=('pci',),
                                 extra_config=vf_spec('yes'),
                                 plain_pfs=True)
        names = ['compute1_' + pf for pf in self.sriov_pfs('compute1')]
        for name in names:
            self.wait_trait(name, True)
            self.assertIn('OWNER_CYBORG', self.traits(name))
        # Restarted without the key: the trait goes, the others stay.
        self.restart_sidecar('compute1', drivers=('pci',),
                             extra=vf_spec(None))
        for name in names:
            self.wait_trait(name, False)
            self.assertIn('OWNER_CYBORG', self.traits(name))

    def test_vf_spec_without_the_key(self):
        self.start_accel_compute('compute1', drivers=('pci',),
                                 extra_config=vf_spec(False),
                                 plain_pfs=True)
        (pf,) = self.sriov_pfs('compute1')
        traits = self.traits('compute1_' + pf)
        self.assertIn('OWNER_CYBORG', traits)
        self.assertNotIn(TRAIT, traits)

    def test_vgpu_type(self):
        self.start_accel_compute('compute1', num_mdevcap=1,
                                 drivers=('gpu', 'fpga'),
                                 mdev_types=(MDEV_TYPE,),
                                 extra_config=GPU_MIGRATABLE)
        (gpu,) = [f.address for f in self.hosts['compute1'].functions
                  .values() if f.mdev_types]
        self.wait_trait('compute1_' + gpu, True)
        # The FPGAs beside it are not migratable.
        for pf in self.pf_bdfs('compute1'):
            for name in self.fpga_providers('compute1', pf):
                self.assertNotIn(TRAIT, self.traits(name))
        self.restart_sidecar('compute1', drivers=('gpu', 'fpga'),
                             mdev_types=(MDEV_TYPE,))
        self.wait_trait('compute1_' + gpu, False)
