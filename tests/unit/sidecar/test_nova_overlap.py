"""Devices Nova manages (nova.conf) are never reported by the sidecar."""

import os

from sidecar.discovery import nova_overlap
from sidecar.drivers import fpga
from sidecar.drivers import gpu
from sidecar.drivers import pci
from sidecar.sources import base as sources
from tests.unit.sidecar import simhost
from tests.unit.sidecar import utils

FPGA = '0000:81:00.0'
NIC = '0000:3b:00.0'
NIC_VFS = ['0000:3b:00.1', '0000:3b:00.2']
NIC2 = '0000:3c:00.0'
GPU = '0000:82:00.0'


def function(address, vendor='8086', product='1528', physfn=None,
             mdev_types=()):
    return sources.PciFunction(address, vendor, product, '020000',
                               physfn=physfn, mdev_types=mdev_types)


class MatcherTest(simhost.SimHostTestCase):
    """Nova's device_spec semantics (nova.pci.devspec), without Nova."""

    def managed(self, nova_conf, fn):
        path = os.path.join(self.root, 'nova.conf')
        utils.write(path, nova_conf)
        return nova_overlap.parse(path).managed(fn, self.root)

    def test_vendor_product(self):
        conf = '[pci]\ndevice_spec = {"vendor_id": "8086", ' \
               '"product_id": "1528"}\n'
        self.assertIn('device_spec', self.managed(conf, function(NIC)))
        self.assertIsNone(self.managed(conf, function(NIC, product='1515')))

    def test_several_values_and_a_list(self):
        conf = ('[pci]\n'
                'device_spec = {"vendor_id": "10de"}\n'
                'device_spec = [{"address": "0000:3c:00.0"}, '
                '{"address": "*:3b:00.*", "physical_network": "p1"}]\n')
        self.assertTrue(self.managed(conf, function(NIC)))
        self.assertTrue(self.managed(conf, function(NIC_VFS[1])))
        self.assertTrue(self.managed(conf, function(NIC2)))
        self.assertTrue(self.managed(conf, function(GPU, vendor='10de')))
        self.assertIsNone(self.managed(conf, function('0000:3d:00.0')))

    def test_short_glob_and_regex_address(self):
        glob = '[pci]\ndevice_spec = {"address": "3b:00."}\n'
        self.assertTrue(self.managed(glob, function(NIC_VFS[0])))
        self.assertIsNone(self.managed(glob, function(NIC2)))
        regex = ('[pci]\ndevice_spec = {"address": {"bus": "3[bc]", '
                 '"function": "[0-1]"}}\n')
        self.assertTrue(self.managed(regex, function(NIC2)))
        self.assertTrue(self.managed(regex, function(NIC_VFS[0])))
        self.assertIsNone(self.managed(regex, function(NIC_VFS[1])))

    def test_pf_address_covers_its_vfs(self):
        conf = '[pci]\npassthrough_whitelist = {"address": "0000:3b:00.0"}\n'
        self.assertTrue(self.managed(conf, function(NIC_VFS[0],
                                                    physfn=NIC)))
        self.assertIsNone(self.managed(conf, function(NIC_VFS[0])))

    def test_devname(self):
        dev = os.path.join(self.root, 'devices', NIC)
        os.makedirs(dev)
        os.makedirs(os.path.join(self.root, 'class', 'net', 'ens1'))
        os.symlink(dev, os.path.join(self.root, 'class', 'net', 'ens1',
                                     'device'))
        conf = '[pci]\ndevice_spec = {"devname": "ens1"}\n'
        self.assertTrue(self.managed(conf, function(NIC)))
        self.assertTrue(self.managed(conf, function(NIC_VFS[0],
                                                    physfn=NIC)))
        self.assertIsNone(self.managed(conf, function(NIC2)))

    def test_alias_is_named(self):
        conf = ('[pci]\ndevice_spec = {"vendor_id": "8086"}\n'
                'alias = {"name": "nic", "vendor_id": "8086", '
                '"product_id": "1528", "device_type": "type-PF"}\n')
        self.assertIn('[pci] alias nic', self.managed(conf, function(NIC)))

    def test_mdev_types(self):
        t4 = sources.MdevType('GRID T4-1B', 'nvidia-222', 16, 'vfio-pci')
        gpu_fn = function(GPU, vendor='10de', mdev_types=(t4,))
        conf = '[devices]\nenabled_mdev_types = nvidia-222, nvidia-223\n'
        self.assertIn('enabled_mdev_types nvidia-222',
                      self.managed(conf, gpu_fn))
        limited = conf + '[mdev_nvidia-222]\ndevice_addresses = ' \
                         '0000:84:00.0\n'
        self.assertIsNone(self.managed(limited, gpu_fn))
        self.assertIsNone(self.managed(
            '[devices]\nenabled_mdev_types = nvidia-18\n', gpu_fn))

    def test_bad_entries_are_skipped(self):
        conf = ('[pci]\ndevice_spec = not json\n'
                'device_spec = {"address": {"bus": "("}}\n'
                'device_spec = {"vendor_id": "8086"}\n')
        self.assertTrue(self.managed(conf, function(NIC)))

    def test_no_file(self):
        self.assertIsNone(nova_overlap.parse(os.path.join(self.root, 'no')))
        self.assertIsNone(nova_overlap.NovaConfig('').devices())


class RefusedTest(simhost.SimHostTestCase):
    """Each driver leaves out what Nova manages, with one WARNING."""

    def setUp(self):
        super().setUp()
        self.sim = self.host(
            pfs=[{'address': NIC, 'num_vfs': 2},
                 {'address': NIC2, 'product_id': '1572'}],
            fpgas=[{'address': FPGA}],
            gpus=[{'address': GPU, 'mdev_types': [simhost.T4_1B]}])
        self.source = self.write(self.sim)
        self.nova_conf = os.path.join(self.root, 'nova.conf')
        self.config.config(group='sidecar', nova_config_file=self.nova_conf)
        self.config.config(group='pci', device_spec=[
            '{"vendor_id": "8086", "product_id": "1528"}',
            '{"address": "0000:3c:00.0"}'])
        self.config.config(group='gpu', device_selector=['10de:*'],
                           enabled_mdev_types=['nvidia-222'])

    def discover(self, cls):
        return sorted(d.address for d in cls(self.conf,
                                             self.source).discover())

    def test_without_nova_conf_everything_is_reported(self):
        self.assertEqual([NIC, NIC2], self.discover(pci.PciDriver))
        self.assertEqual([FPGA], self.discover(fpga.FpgaDriver))
        self.assertEqual([GPU], self.discover(gpu.GpuDriver))
        self.assertEqual([], self.warnings())

    def test_a_vf_in_nova_device_spec_refuses_the_device(self):
        utils.write(self.nova_conf, '[pci]\ndevice_spec = '
                    '{"address": "0000:3b:00.2", "physical_network": "x"}\n')
        self.assertEqual([NIC2], self.discover(pci.PciDriver))
        self.assertOneWarning(
            'Not reporting PCI device 0000:3b:00.0 (driver pci)',
            'Nova manages 0000:3b:00.2 through [pci] device_spec',
            self.nova_conf, 'never both')

    def test_fpga_refused(self):
        utils.write(self.nova_conf, '[pci]\ndevice_spec = '
                    '{"vendor_id": "8086", "product_id": "0b2b"}\n')
        self.assertEqual([], self.discover(fpga.FpgaDriver))
        self.assertOneWarning('FPGA device 0000:81:00.0')

    def test_gpu_refused_for_nova_vgpus(self):
        utils.write(self.nova_conf,
                    '[devices]\nenabled_mdev_types = nvidia-222\n')
        self.assertEqual([], self.discover(gpu.GpuDriver))
        self.assertOneWarning('GPU device 0000:82:00.0',
                              '[devices] enabled_mdev_types nvidia-222')

    def test_change_of_nova_conf_is_read(self):
        driver = pci.PciDriver(self.conf, self.source)
        self.assertEqual(2, len(driver.discover()))
        utils.write(self.nova_conf, '[pci]\ndevice_spec = '
                    '{"product_id": "1572"}\n')
        self.assertEqual([NIC], [d.address for d in driver.discover()])
        # Logged once while it lasts.
        driver.discover()
        self.assertEqual(1, len(self.warnings()))
