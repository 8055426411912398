"""Captures of real hosts (``nova-cyborg-sidecar-manage capture``), loaded
as simulated hosts: what the sidecar reads there stays what it read on the
real host.

``h100-sxm-nvidia.tar.gz``: a VM given an NVIDIA H100 SXM5 80GB
(10de:2330) on the ``nvidia`` driver 580.159.04, kernel 6.18; no IOMMU
group, NUMA node -1, no AER counter files (the VM's root bus exposes
none), link 32.0 GT/s x16 at its maximum.
"""

import os

import fixtures
import testtools

from sidecar import model
from sidecar.discovery import health
from sidecar.sources import sysfs
from sidecar_simulator import capture

CAPTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'sidecar_simulator',
    'captures')
H100 = '0000:00:06.0'


class H100SxmCaptureTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = capture.load(
            os.path.join(CAPTURES, 'h100-sxm-nvidia.tar.gz'),
            os.path.join(self.useFixture(fixtures.TempDir()).path, 'sys'))

    def test_source_reads_the_gpu_as_the_host_showed_it(self):
        functions = {f.address: f for f in
                     sysfs.SysfsSource(self.root).functions()}
        self.assertEqual(7, len(functions))
        gpu = functions[H100]
        self.assertEqual(('10de', '2330', '030200', 'nvidia', None, None,
                          ()),
                         (gpu.vendor_id, gpu.product_id, gpu.class_id,
                          gpu.driver, gpu.iommu_group, gpu.numa_node,
                          gpu.mdev_types))

    def test_a_healthy_gpu_without_aer_files_is_healthy(self):
        # No aer_dev_* file and no upstream port: nothing to read there is
        # not "unreadable" (which would end in Unknown health and hold it).
        device = model.Device(
            type='GPU', vendor='10de', model='2330', address=H100,
            deployables=(model.Deployable(
                name=H100, resource_class='PGPU', num_accelerators=1,
                traits=(), attach_handles=(model.AttachHandle('PCI', H100),),
                driver_name='nvidia'),),
            std_board_info=(), driver_name='nvidia')
        self.assertEqual(health.Observation(),
                         health.pci_observation(self.root, device))
