"""Do no harm: Nova's own mediated devices on patched computes.

Servers without any accelerator of this project get mdevs from Nova
itself: a vGPU (``[devices] enabled_mdev_types``, flavor
``resources:VGPU=1``) and a generic mdev (``[mdev_mlx5_core] mdev_class =
CUSTOM_NOTVGPU``, flavor ``resources:CUSTOM_NOTVGPU=1``), configured as
upstream's test_vgpu.DifferentMdevClassesTests does: each of the two
GPUs of a host serves one class. Two patched computes
(:mod:`tests.functional.harness.nova_devices`).

The owner reboots, stops and starts, rescues and unrescues; the cloud
admin cold-migrates (confirmed) and live-migrates back. After each step
the server is ACTIVE where it should be, its guest holds one mdev of the
right type on the right GPU, whose provider holds the server's unit, the
mdev is the same through every restart on one host, and the guest-device
guard never removed or added anything.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402

from tests.functional.harness import nova_devices  # noqa: E402
from tests.functional import live_base  # noqa: E402


class NovaMdevsUntouchedTest(nova_devices.NovaDevicesSteps,
                             live_base.LiveMigrationBase):

    def setUp(self):
        super().setUp()
        nova_devices.configure_mdevs(self)
        # Cold migration: no instance directory to move aside.
        self.useFixture(fixtures.MockPatch('os.rename'))
        for host in self.HOSTS:
            self.start_compute(hostname=host,
                               pci_info=nova_devices.mdev_host_info())

    def walk_with(self, resource_class):
        flavor = self._create_flavor(
            extra_spec={'resources:%s' % resource_class: '1'})
        with self.acting(self.owner_api):
            server = self._create_server(flavor_id=flavor,
                                         image_uuid=base.IMAGE,
                                         networks='none')

        def check(server, hostname):
            return self.assert_nova_mdev(server, hostname, resource_class)
        self.walk(server, self.owner_api, check)
        self._delete_server(server)
        self.assertEqual({}, self.allocations(server['id']))

    def test_vgpu(self):
        self.walk_with('VGPU')

    def test_generic_mdev(self):
        self.walk_with(nova_devices.GENERIC_CLASS)
