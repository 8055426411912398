"""The simulator's kernel model (sidecar_simulator.kernel): a function
given to a guest, given back, and a host reboot, each as the kernel
source its docstring names does it."""

import os

from sidecar.sources import dfl as dfl_source
from sidecar_simulator import dfl
from sidecar_simulator import host as simulator
from sidecar_simulator import kernel
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost

PF = '0000:81:00.0'
VF0, VF1 = '0000:81:00.1', '0000:81:00.2'
AFU = simhost.FUNCTION_ID
OTHER = 'ab' * 16


class KernelTest(simhost.SimHostTestCase):

    def _host(self, profile='d5005', sriov=False, ports=1, **kw):
        self.host = simulator.SimulatedHost()
        self.dfl = dfl.DflHost(self.host)
        self.card = self.dfl.add_card(profile, afu_id=AFU, sriov=sriov,
                                      ports=ports, **kw)
        self.sys = os.path.join(self.root, 'sys')
        self.dev = os.path.join(self.root, 'dev')
        self.dfl.write(self.sys, self.dev)

    def _driver(self, address):
        link = os.path.join(self.sys, 'bus/pci/devices', address, 'driver')
        return (os.path.basename(os.readlink(link))
                if os.path.lexists(link) else None)

    def _exists(self, relpath):
        return os.path.lexists(os.path.join(self.sys, relpath))

    def _card(self):
        return dfl_source.cards(self.sys).get(PF)

    def _every_path_has_a_source(self):
        paths = dfl.written_paths(self.sys)
        self.assertEqual([], [p for p in paths if dfl.source_of(p) is None
                              and kernel.source_of(p) is None])

    def _paths(self):
        """The tree's paths, but vfio-pci's directory: the driver stays
        registered when no function is bound to it."""
        return sorted(p for p in dfl.written_paths(self.sys)
                      if not p.startswith('bus/pci/drivers/vfio-pci'))

    # (a) bound to vfio-pci

    def test_pf_to_vfio_takes_the_cards_devices(self):
        self._host()
        self.assertEqual('dfl-pci', self._driver(PF))
        self.assertIsNotNone(self._card())
        kernel.bind_vfio(self.host, PF)
        self.assertEqual('vfio-pci', self._driver(PF))
        self.assertFalse(self._exists('bus/pci/drivers/dfl-pci/' + PF))
        self.assertTrue(self._exists('bus/pci/drivers/vfio-pci/' + PF))
        self.assertIsNone(self._card())
        self.assertFalse(self._exists(
            'devices/pci0000:00/%s/fpga_region' % PF))
        self.assertEqual([], os.listdir(
            os.path.join(self.sys, 'class/fpga_region')))
        self.assertEqual([], os.listdir(os.path.join(
            self.sys, 'bus/platform/devices')))
        self.assertEqual([], os.listdir(self.dev))
        # The PCI function itself stays.
        self.assertTrue(self._exists('bus/pci/devices/' + PF))
        # A second detach changes nothing (libvirt: already on the stub).
        kernel.bind_vfio(self.host, PF)
        self.assertEqual('vfio-pci', self._driver(PF))

    def test_vf_to_vfio_takes_its_port_only(self):
        self._host('n6000', sriov=True, ports=2)
        kernel.bind_vfio(self.host, VF0)
        self.assertEqual('vfio-pci', self._driver(VF0))
        self.assertEqual('dfl-pci', self._driver(VF1))
        card = self._card()
        self.assertEqual([VF1], [p.address for p in card.ports])
        self.assertFalse(self._exists(
            'devices/pci0000:00/%s/fpga_region' % VF0))
        self.assertEqual(['dfl-fme.0', 'dfl-port.3'],
                         sorted(os.listdir(self.dev)))
        self._every_path_has_a_source()

    def test_pf_of_an_sriov_card_to_vfio_disables_sriov(self):
        self._host('n6000', sriov=True, ports=2)
        kernel.bind_vfio(self.host, PF)
        self.assertNotIn(VF0, self.host.functions)
        self.assertFalse(self._exists('bus/pci/devices/' + VF0))
        with open(os.path.join(self.sys, 'bus/pci/devices', PF,
                               'sriov_numvfs')) as f:
            self.assertEqual('0', f.read().strip())
        # Given back: both ports under the PF, with the ids they had.
        kernel.release(self.host, PF)
        card = self._card()
        self.assertEqual([(PF, 0), (PF, 1)],
                         [(p.address, p.number) for p in card.ports])
        self.assertEqual(['dfl-port.0', 'dfl-port.1'],
                         [p.name for p in card.ports])

    def test_other_function_changes_driver_only(self):
        self.host = simulator.SimulatedHost()
        nic = self.host.add_pf('8086', '1528', num_vfs=1).virtfns[0]
        self.sys = self.host.write(os.path.join(self.root, 'sys'))
        kernel.bind_vfio(self.host, nic)
        self.assertEqual('vfio-pci', self._driver(nic))
        kernel.release(self.host, nic)
        self.assertIsNone(self._driver(nic))
        self.assertEqual({}, self.host.overridden)

    # (b) given back

    def test_pf_back_to_dfl_pci_reprobes_the_card(self):
        self._host()
        before = self._paths()
        kernel.bind_vfio(self.host, PF)
        kernel.release(self.host, PF)
        self.assertEqual('dfl-pci', self._driver(PF))
        self.assertEqual(before, self._paths())
        port = self._card().ports[0]
        with open(os.path.join(port.path, 'afu_id')) as f:
            self.assertEqual(AFU, f.read().strip())
        self.assertEqual(['dfl-fme.0', 'dfl-port.0'],
                         sorted(os.listdir(self.dev)))

    def test_the_loaded_afu_survives_the_guest(self):
        # A programmer that wrote afu_id to the tree alone.
        self._host()
        with open(os.path.join(self._card().ports[0].path, 'afu_id'),
                  'w') as f:
            f.write(OTHER + '\n')
        kernel.bind_vfio(self.host, PF)
        self.assertEqual(OTHER, self.card.afu_id)
        kernel.release(self.host, PF)
        with open(os.path.join(self._card().ports[0].path, 'afu_id')) as f:
            self.assertEqual(OTHER, f.read().strip())

    def test_vf_back_to_dfl_pci_returns_its_port(self):
        self._host('n6000', sriov=True, ports=2)
        before = self._paths()
        kernel.bind_vfio(self.host, VF1)
        self.dfl.set_afu_id(self.card, OTHER, 0)  # the other port, live
        kernel.release(self.host, VF1)
        self.assertEqual(before, self._paths())
        self.assertEqual([VF0, VF1],
                         [p.address for p in self._card().ports])

    def test_release_of_a_function_no_guest_took(self):
        self._host()
        kernel.release(self.host, PF)
        self.assertEqual('dfl-pci', self._driver(PF))

    def test_a_restarted_host_keeps_what_a_guest_has(self):
        self._host()
        kernel.bind_vfio(self.host, PF)
        again = simulator.SimulatedHost()
        again_dfl = dfl.DflHost(again)
        again_dfl.add_card('d5005', afu_id=AFU)
        again.load_state(self.sys)
        again_dfl.write(self.sys, self.dev)
        self.assertEqual('vfio-pci', self._driver(PF))
        self.assertIsNone(self._card())
        kernel.release(again, PF)
        self.assertEqual('dfl-pci', self._driver(PF))
        self.assertIsNotNone(self._card())

    # (c) host reboot

    def test_reboot_returns_released_ports_and_default_afus(self):
        self._host('n6000', sriov=True, ports=2)
        kernel.bind_vfio(self.host, VF0)
        self.dfl.set_afu_id(self.card, OTHER, 1)
        self.dfl.set_error(self.card, 'fme/fme_errors', '0x1')
        kernel.reboot(self.host)
        self.assertEqual({}, self.host.overridden)
        self.assertEqual([PF], sorted(self.host.functions))
        card = self._card()
        self.assertEqual([(PF, 0, 'dfl-port.0'), (PF, 1, 'dfl-port.1')],
                         [(p.address, p.number, p.name) for p in card.ports])
        for port in card.ports:
            with open(os.path.join(port.path, 'afu_id')) as f:
                self.assertEqual(AFU, f.read().strip())
        with open(os.path.join(card.fme, 'errors', 'fme_errors')) as f:
            self.assertEqual('0x0', f.read().strip())
        self.assertEqual(['dfl-fme.0', 'dfl-port.0', 'dfl-port.1'],
                         sorted(os.listdir(self.dev)))
        self._every_path_has_a_source()

    def test_warm_reboot_keeps_the_loaded_afu(self):
        self._host()
        self.dfl.set_afu_id(self.card, OTHER)
        kernel.reboot(self.host, cold=False)
        with open(os.path.join(self._card().ports[0].path, 'afu_id')) as f:
            self.assertEqual(OTHER, f.read().strip())
        kernel.reboot(self.host)
        with open(os.path.join(self._card().ports[0].path, 'afu_id')) as f:
            self.assertEqual(AFU, f.read().strip())

    def test_reboot_drops_vfs_and_mdevs(self):
        self.host = simulator.SimulatedHost()
        nic = self.host.add_pf('8086', '1528', num_vfs=2,
                               vf_product_id='1515')
        other = self.host.add_pf('8086', '1528', num_vfs=2,
                                 vf_product_id='1515')
        gpu = self.host.add_gpu(mdev_types=[{'type_id': 'nvidia-222',
                                             'available_instances': 4}])
        self.sys = self.host.write(os.path.join(self.root, 'sys'))
        uuid = self.host.create_mdev(gpu.address, 'nvidia-222')
        kernel.bind_vfio(self.host, nic.virtfns[0])
        kernel.reboot(self.host, reenable=[other.address])
        self.assertEqual({}, nic.virtfns)
        self.assertFalse(self._exists('bus/pci/devices/0000:81:00.1'))
        with open(os.path.join(self.sys, 'bus/pci/devices', nic.address,
                               'sriov_numvfs')) as f:
            self.assertEqual('0', f.read().strip())
        self.assertEqual(2, len(other.virtfns))
        self.assertIsNone(self._driver(other.virtfns[0]))
        self.assertFalse(self._exists('bus/mdev/devices/' + uuid))
        self.assertEqual(4, gpu.mdev_types[0].available_instances)

    def test_reboot_untypes_vgpu17_vfs(self):
        self.host = simulator.SimulatedHost()
        gpus = nvidia.NvidiaHost(self.host)
        card = gpus.add_vfio_vgpu_card(num_vfs=2, types={
            0: 'NVIDIA H100-40C'})
        self.sys = gpus.write(os.path.join(self.root, 'sys'))
        kernel.reboot(self.host, reenable=[card.pf])
        for vf in card.vfs:
            with open(os.path.join(self.sys, 'bus/pci/devices', vf,
                                   'nvidia/current_vgpu_type')) as f:
                self.assertEqual('0', f.read().strip())
            self.assertEqual('nvidia', self._driver(vf))
        # Without the boot unit's sriov-manage -e there is no VF at all.
        kernel.reboot(self.host)
        self.assertEqual([], card.vfs)

    def test_reboot_refuses_to_reenable_a_dfl_card(self):
        self._host('n6000', sriov=True)
        self.assertRaises(ValueError, kernel.reboot, self.host,
                          reenable=[PF])
