"""The local cloud's hosts have mdev-capable GPUs (vGPUs).

fakelibvirt's GPUs come first on the bus; the sidecar's gpu driver
reports each as a VGPU provider with an MDEV attach handle per instance;
an mdev the sidecar creates or removes appears in or leaves both the
host's sysfs tree and fakelibvirt's node devices, and a restarted host
takes its mdevs back.
"""

import configparser
import json
import os

import fixtures
import testtools
from oslo_config import cfg

from localcloud import configs
from localcloud import devices
from localcloud import layout as layout_mod
from nova.tests.fixtures import libvirt as fakelibvirt
from sidecar import conf as sidecar_conf
from sidecar import exception
from sidecar import privileged
from sidecar.drivers import gpu
from sidecar.sources import sysfs

GPU = '0000:81:00.0'
MDEV = '0e8bd7a1-5a4b-4c3f-9d1e-2b7c6a5f4e3d'
OTHER = '1f9ce8b2-6b5c-4d40-8e2f-3c8d7b6a5f4e'


def _connection(gpus=1):
    return fakelibvirt.Connection(
        'qemu:///system', version=fakelibvirt.FAKE_LIBVIRT_VERSION,
        hv_version=fakelibvirt.FAKE_QEMU_VERSION,
        host_info=fakelibvirt.HostInfo(),
        pci_info=fakelibvirt.HostPCIDevicesInfo(
            **devices.pci_info(1, 4, 1, gpus)),
        hostname='compute1')


def _address(name):
    """``pci_0000_81_00_0`` -> ``0000:81:00.0``."""
    d, b, s, f = name[len('pci_'):].split('_')
    return '%s:%s:%s.%s' % (d, b, s, f)


class SimulatedGpusTest(testtools.TestCase):

    def test_gpus_first_as_fakelibvirt_places_them(self):
        host = devices.simulated_host(1, 4, 1, gpus=1)
        conn = _connection()
        self.assertEqual(sorted(_address(n) for n in
                                conn.pci_info.get_all_devices()),
                         sorted(host.functions))
        self.assertEqual(
            [GPU], [_address(n) for n in
                    conn.pci_info.get_all_mdev_capable_devices()])
        roots = [f for f in host.functions.values() if f.physfn is None]
        self.assertEqual([GPU, '0000:81:01.0', '0000:81:02.0'],
                         [f.address for f in roots])
        self.assertEqual([('nvidia-11', 16)], [
            (t.type_id, t.available_instances)
            for t in roots[0].mdev_types])
        self.assertEqual(['0000:81:01.0'], host.fpga_pfs())
        self.assertEqual(4, len(host.fpga_card('0000:81:01.0').handles()))
        self.assertEqual(('8086', '1528'), (roots[2].vendor_id,
                                            roots[2].product_id))

    def test_without_gpus_the_devices_are_as_before(self):
        self.assertEqual(
            list(devices.simulated_host(1, 4, 1, gpus=0).functions),
            list(devices.simulated_host(1, 4, 1).functions))


def sidecar_config(layout):
    """compute1's sidecar configuration in the layout, parsed."""
    conf = cfg.ConfigOpts()
    sidecar_conf.register_opts(conf)
    conf(['--config-file', configs.sidecar(layout, 'compute1', '/s')],
         project='nova-cyborg', default_config_files=[],
         default_config_dirs=[])
    return conf


class SidecarGpuDriverTest(testtools.TestCase):

    def _conf(self, layout):
        return sidecar_config(layout)

    def test_each_gpu_is_a_vgpu_provider(self):
        root = self.useFixture(fixtures.TempDir()).path
        layout = layout_mod.Layout(root=root, port_base=31000)
        self.assertEqual(1, layout.gpus)
        conf = self._conf(layout)
        self.assertEqual(['fpga', 'pci', 'gpu'],
                         conf.sidecar.enabled_drivers)
        tree = devices.simulated_host(1, 4, 1, gpus=1).write(
            os.path.join(root, 'sys'))
        driver = gpu.GpuDriver(conf, sysfs.SysfsSource(tree))
        (device,) = driver.discover()
        (deployable,) = device.deployables
        self.assertEqual((GPU, 'VGPU', 16), (
            device.address, deployable.resource_class,
            deployable.num_accelerators))
        self.assertEqual(
            {('MDEV', GPU, configs.VGPU_MDEV_TYPE)},
            {(h.attach_type, h.address, h.mdev_type)
             for h in deployable.attach_handles})

    def test_no_gpu_driver_without_gpus(self):
        layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=31000,
            gpus=0, vgpu17=0)
        path = configs.sidecar(layout, 'compute1', '/s')
        parser = configparser.RawConfigParser(strict=True)
        parser.read(path)
        self.assertEqual('fpga,pci', parser.get('sidecar', 'enabled_drivers'))
        self.assertFalse(parser.has_section('gpu'))


class LayoutGpusTest(testtools.TestCase):

    def test_saved_and_loaded(self):
        root = self.useFixture(fixtures.TempDir()).path
        layout_mod.Layout(root=root, gpus=2).save()
        self.assertEqual(2, layout_mod.Layout.load(root).gpus)

    def test_a_cloud_saved_before_gpus_has_none(self):
        root = self.useFixture(fixtures.TempDir()).path
        layout_mod.Layout(root=root).save()
        path = os.path.join(root, 'layout.json')
        with open(path) as f:
            saved = json.load(f)
        del saved['gpus']
        with open(path, 'w') as f:
            json.dump(saved, f)
        self.assertEqual(0, layout_mod.Layout.load(root).gpus)


class MdevKernelTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'sys')
        # Privileged calls in this process, as the host runs them.
        privileged.sidecar_pctxt.set_client_mode(False)
        self.addCleanup(privileged.sidecar_pctxt.set_client_mode, True)
        self.patches = []
        self.addCleanup(self._unpatch)
        self.host, self.conn, self.kernel = self._start()

    def _unpatch(self):
        while self.patches:
            self.patches.pop().cleanUp()

    def _start(self):
        """A host process: its tree (taken back), connection, kernel;
        the one before is gone."""
        self._unpatch()
        host = devices.simulated_host(1, 4, 1, gpus=1).load_state(self.root)
        host.write(self.root)
        conn = _connection()
        kernel = devices.MdevKernel(host, conn)
        kernel.restore()
        for fixture in kernel.fixtures():
            fixture.setUp()
            self.patches.append(fixture)
        return host, conn, kernel

    def _in_tree(self):
        path = os.path.join(self.root, 'bus', 'mdev', 'devices')
        return sorted(os.listdir(path)) if os.path.isdir(path) else []

    def _available(self):
        with open(os.path.join(self.root, 'class', 'mdev_bus', GPU,
                               'mdev_supported_types', 'nvidia-11',
                               'available_instances')) as f:
            return int(f.read())

    def _in_libvirt(self, conn=None):
        return sorted((conn or self.conn).listDevices('mdev', 0))

    def test_created_mdev_is_in_sysfs_and_libvirt(self):
        privileged.create_mdev(self.root, GPU, 'nvidia-11', MDEV)
        self.assertEqual([MDEV], self._in_tree())
        self.assertEqual(15, self._available())
        name = devices.node_name(MDEV, GPU)
        self.assertEqual(['mdev_%s_0000_81_00_0' % MDEV.replace('-', '_')],
                         self._in_libvirt())
        # As Nova looks it up before defining the guest.
        self.assertIn("<type id='nvidia-11'/>",
                      self.conn.nodeDeviceLookupByName(name).XMLDesc(0))

    def test_removed_mdev_leaves_both(self):
        privileged.create_mdev(self.root, GPU, 'nvidia-11', MDEV)
        privileged.create_mdev(self.root, GPU, 'nvidia-11', OTHER)
        privileged.remove_mdev(self.root, MDEV)
        self.assertEqual([OTHER], self._in_tree())
        self.assertEqual([devices.node_name(OTHER, GPU)],
                         self._in_libvirt())
        self.assertEqual(15, self._available())
        self.assertRaises(exception.MdevError, privileged.remove_mdev,
                          self.root, MDEV)

    def test_no_instance_left_is_refused(self):
        self.host.set_available_instances(GPU, 'nvidia-11', 0)
        self.assertRaises(exception.MdevError, privileged.create_mdev,
                          self.root, GPU, 'nvidia-11', MDEV)
        self.assertEqual([], self._in_tree())
        self.assertEqual([], self._in_libvirt())

    def test_a_restarted_host_takes_its_mdevs_back(self):
        privileged.create_mdev(self.root, GPU, 'nvidia-11', MDEV)
        host, conn, kernel = self._start()
        self.assertEqual([MDEV], self._in_tree())
        self.assertEqual(15, self._available())
        self.assertEqual([devices.node_name(MDEV, GPU)],
                         self._in_libvirt(conn))
        self.assertEqual({MDEV: (GPU, 'nvidia-11')}, kernel.mdevs())
        # And removes them as before.
        privileged.remove_mdev(self.root, MDEV)
        self.assertEqual([], self._in_tree())
        self.assertEqual([], self._in_libvirt(conn))
