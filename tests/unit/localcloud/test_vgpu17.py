"""The local cloud's hosts have an NVIDIA vGPU 17 card (an H100).

It comes after the other PFs on fakelibvirt's bus, with as many VFs; in
the sysfs tree it is NVIDIA's vGPU 17 shape (every function on
``nvidia``, a type written to each VF's ``nvidia/current_vgpu_type``).
The sidecar's gpu driver offers it as VGPU of the configured type; the
privileged type write reaches the simulated driver, whose lists follow;
a restarted host keeps the VFs' types, a reboot clears them.
"""

import configparser
import os

import fixtures
import testtools

from localcloud import configs
from localcloud import devices
from localcloud import layout as layout_mod
from nova.tests.fixtures import libvirt as fakelibvirt
from sidecar import exception
from sidecar import privileged
from sidecar.drivers import gpu
from sidecar.sources import sysfs
from sidecar_simulator import kernel
from sidecar_simulator import nvidia
from tests.unit.localcloud import test_vgpu

#: With one mdev GPU, one FPGA PF with 4 VFs and one plain PF with 4 VFs:
#: the H100 is the third PF (fakelibvirt's bus 0x81, slots in order).
ID_20C = '1059'


def _host(root, vgpu17=1):
    host = devices.simulated_host(1, 4, 1, gpus=1, vgpu17=vgpu17)
    return host.load_state(root)


def _card(host):
    (card,) = nvidia.of(host).cards
    return card


class LayoutTest(testtools.TestCase):

    def test_new_clouds_have_one_card(self):
        root = self.useFixture(fixtures.TempDir()).path
        layout_mod.Layout(root=root).save()
        self.assertEqual(1, layout_mod.Layout.load(root).vgpu17)

    def test_a_cloud_saved_before_has_none(self):
        root = self.useFixture(fixtures.TempDir()).path
        layout = layout_mod.Layout(root=root)
        layout.save()
        path = os.path.join(root, 'layout.json')
        with open(path) as f:
            text = f.read().replace('"vgpu17": 1,', '')
        with open(path, 'w') as f:
            f.write(text)
        self.assertEqual(0, layout_mod.Layout.load(root).vgpu17)

    def test_sidecar_offers_the_type(self):
        layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=31000,
            gpus=0)
        parser = configparser.RawConfigParser(strict=True)
        parser.read(configs.sidecar(layout, 'compute1', '/s'))
        self.assertEqual('fpga,pci,gpu',
                         parser.get('sidecar', 'enabled_drivers'))
        self.assertEqual('2331:' + configs.VGPU17_TYPE,
                         parser.get('gpu', 'vfio_vgpu_types'))
        self.assertFalse(parser.has_option('gpu', 'enabled_mdev_types'))


class Vgpu17HostTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.base = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(self.base, 'sys')
        privileged.sidecar_pctxt.set_client_mode(False)
        self.addCleanup(privileged.sidecar_pctxt.set_client_mode, True)
        self.host = _host(self.root)
        self.host.write(self.root)
        self.card = _card(self.host)
        for fixture in devices.NvidiaKernel(self.host).fixtures():
            self.useFixture(fixture)

    def _current(self, vf, root=None):
        with open(os.path.join(root or self.root, 'bus/pci/devices', vf,
                               'nvidia/current_vgpu_type')) as f:
            return f.read().strip()

    def _conf(self):
        return test_vgpu.sidecar_config(
            layout_mod.Layout(root=self.base, port_base=31000))

    def test_fakelibvirt_shows_the_same_functions(self):
        conn = fakelibvirt.Connection(
            'qemu:///system', version=fakelibvirt.FAKE_LIBVIRT_VERSION,
            hv_version=fakelibvirt.FAKE_QEMU_VERSION,
            host_info=fakelibvirt.HostInfo(),
            pci_info=fakelibvirt.HostPCIDevicesInfo(
                **devices.pci_info(1, 4, 1, gpus=1, vgpu17=1)),
            hostname='compute1')
        names = conn.listDevices('pci', 0)
        shown = {'%s:%s:%s.%s' % tuple(n[len('pci_'):].split('_'))
                 for n in names}
        self.assertLessEqual({self.card.pf} | set(self.card.vfs), shown)
        self.assertEqual(4, len(self.card.vfs))

    def test_the_gpu_driver_offers_the_card(self):
        driver = gpu.GpuDriver(self._conf(), sysfs.SysfsSource(self.root))
        by_address = {d.address: d for d in driver.discover()}
        device = by_address[self.card.pf]
        (deployable,) = device.deployables
        self.assertEqual(('VGPU', 4), (deployable.resource_class,
                                       deployable.num_accelerators))
        self.assertIn(configs.VGPU17_TRAIT, deployable.traits)

    def test_type_write_reaches_the_driver(self):
        vf, other = self.card.vfs[:2]
        privileged.set_vgpu_type(self.root, vf, ID_20C)
        self.assertEqual(ID_20C, self._current(vf))
        self.assertEqual(ID_20C, self.card.current[vf])
        # One type a card: the others' VFs list only that one now, and
        # the driver refuses another (EINVAL) even past the helper's check.
        self.assertEqual([(ID_20C, configs.VGPU17_TYPE)],
                         nvidia.of(self.host).creatable(
                             self.card, other))
        self.assertRaises(OSError, nvidia.of(self.host).
                          kernel_write, os.path.join(
                              self.root, 'bus/pci/devices', other,
                              'nvidia/current_vgpu_type'), '1054')
        self.assertTrue(privileged.clear_vgpu_type(self.root, vf, ID_20C))
        self.assertEqual('0', self._current(vf))

    def test_the_helpers_value_checks_still_apply(self):
        # Routed to the driver, the write is checked as the privileged
        # helper checks any sysfs value first.
        vf = self.card.vfs[0]
        self.assertRaises(exception.InvalidArgument,
                          privileged._write_sysfs, self.root, os.path.join(
                              'bus/pci/devices', vf,
                              'nvidia/current_vgpu_type'), ID_20C + '\n')
        self.assertEqual('0', self._current(vf))

    def test_restart_keeps_types_reboot_clears_them(self):
        vf = self.card.vfs[1]
        privileged.set_vgpu_type(self.root, vf, ID_20C)
        again = _host(self.root)
        again.write(self.root)
        self.assertEqual(ID_20C, _card(again).current[vf])
        self.assertEqual(ID_20C, self._current(vf))
        # The boot's sriov-manage -e enables the VFs again, untyped.
        kernel.reboot(again, reenable=[self.card.pf])
        self.assertEqual('0', self._current(vf))
        self.assertEqual('0', _card(_host(self.root)).current[vf])
