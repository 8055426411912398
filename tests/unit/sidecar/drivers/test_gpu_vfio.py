"""The gpu driver on NVIDIA vGPU 17 cards (vendor-specific VFIO): the
simulator's H100 profile (sidecar_simulator.nvidia) read through sysfs."""

import os

from sidecar import model
from sidecar.drivers import gpu
from sidecar.sources import base as sources
from sidecar.sources import sysfs
from sidecar_simulator import nvidia
from tests.unit.sidecar import simhost

H100_4C = 'NVIDIA H100-4C'
TRAIT_4C = 'CUSTOM_NVIDIA_2331_H100_4C'


class _Card(simhost.SimHostTestCase):
    """An H100 with four VFs, VFs 0 and 2 given H100-4C."""

    def setUp(self):
        super().setUp()
        self.sim = nvidia.NvidiaHost()
        self.card = self.sim.add_vfio_vgpu_card(
            num_vfs=4, types={0: H100_4C, 2: H100_4C})
        self.vfs = self.card.vfs
        self.sim.write(self.root)
        self.config.config(group='gpu', device_selector=['10de:*'])
        self.driver = gpu.GpuDriver(self.conf, sysfs.SysfsSource(self.root))

    def _lines(self, level):
        return [line for line in self.log.output.splitlines()
                if line.startswith(level)]


class VfioVgpuTest(_Card):

    def test_vfs_with_a_type_are_vgpus(self):
        (device,) = self.driver.discover()
        deployables = tuple(
            model.Deployable(
                name=vf, resource_class='VGPU', num_accelerators=1,
                traits=(TRAIT_4C, 'OWNER_CYBORG'),
                attach_handles=(model.AttachHandle('PCI', vf,
                                                   managed='no'),),
                driver_name='nvidia')
            for vf in (self.vfs[0], self.vfs[2]))
        self.assertEqual(model.Device(
            type='GPU', vendor='10de', model='2331', address=self.card.pf,
            deployables=deployables,
            std_board_info=(('class', '030200'), ('product_id', '2331')),
            driver_name='nvidia'), device)
        self.assertEqual(
            {'domain': '0000', 'bus': '81', 'device': '00',
             'function': '1', 'managed': 'no'},
            device.deployables[0].attach_handles[0].attach_info())
        self.assertEqual([], self._lines('WARNING'))

    def test_vfs_without_a_type_said_once_at_info(self):
        self.driver.discover()
        (line,) = self._lines('INFO')
        self.assertIn(self.card.pf, line)
        self.assertIn('%s, %s' % (self.vfs[1], self.vfs[3]), line)
        self.assertIn('current_vgpu_type is 0', line)
        self.driver.discover()
        self.assertEqual([line], self._lines('INFO'))

    def test_no_type_no_device(self):
        for vf in (self.vfs[0], self.vfs[2]):
            self.sim.set_vgpu_type(self.card, vf, '0')
        self.assertEqual([], self.driver.discover())

    def test_type_set_later_is_reported(self):
        self.sim.set_vgpu_type(self.card, self.vfs[1], '1054')
        (device,) = self.driver.discover()
        self.assertEqual(self.vfs[:3], [d.name for d in device.deployables])

    def test_name_from_the_card_when_a_vf_lists_nothing(self):
        # A configured VF may list no type at all (kubevirt plugin's
        # vfio_vgpu.go); its free siblings name it.
        self.sim.write(self.root)
        path = os.path.join(self.root, 'bus/pci/devices', self.vfs[0],
                            'nvidia/creatable_vgpu_types')
        with open(path, 'w') as f:
            f.write(nvidia.HEADER + '\n')
        (device,) = self.driver.discover()
        self.assertEqual([TRAIT_4C] * 2, [d.traits[0]
                                          for d in device.deployables])

    def test_unknown_type_name_is_kept(self):
        # No list ever named 1054 (first start on a full card): the VFs
        # are reported all the same, so that Cyborg keeps their handles.
        for vf in self.vfs:
            path = os.path.join(self.root, 'bus/pci/devices', vf,
                                'nvidia/creatable_vgpu_types')
            with open(path, 'w') as f:
                f.write(nvidia.HEADER + '\n')
        (device,) = self.driver.discover()
        self.assertEqual(
            [(self.vfs[0], 'CUSTOM_NVIDIA_2331_TYPE_1054'),
             (self.vfs[2], 'CUSTOM_NVIDIA_2331_TYPE_1054')],
            [(d.name, d.traits[0]) for d in device.deployables])
        warnings = self._lines('WARNING')
        self.assertEqual(2, len(warnings))
        self.assertIn('type 1054 was never named', warnings[0])

    def test_ids_are_per_card(self):
        card = self.sim.add_vfio_vgpu_card(num_vfs=2, types={0: H100_4C})
        self.sim.write(self.root)
        # The second card calls its 1054 something else.
        path = os.path.join(self.root, 'bus/pci/devices', card.vfs[1],
                            'nvidia/creatable_vgpu_types')
        with open(path, 'w') as f:
            f.write('1054 : NVIDIA H100-80C\n')
        path = os.path.join(self.root, 'bus/pci/devices', card.vfs[0],
                            'nvidia/creatable_vgpu_types')
        with open(path, 'w') as f:
            f.write('')
        devices = {d.address: d for d in self.driver.discover()}
        self.assertEqual(('CUSTOM_NVIDIA_2331_H100_80C', 'OWNER_CYBORG'),
                         devices[card.pf].deployables[0].traits)
        self.assertEqual((TRAIT_4C, 'OWNER_CYBORG'),
                         devices[self.card.pf].deployables[0].traits)

    def test_bad_current_type_skips_the_vf(self):
        path = os.path.join(self.root, 'bus/pci/devices', self.vfs[0],
                            'nvidia/current_vgpu_type')
        with open(path, 'w') as f:
            f.write('abc\n')
        (device,) = self.driver.discover()
        self.assertEqual([self.vfs[2]], [d.name for d in device.deployables])
        self.assertIn('current_vgpu_type', '\n'.join(self._lines('WARNING')))


class VendorVgpuParseTest(simhost.SimHostTestCase):

    def test_lenient_like_nvidia_tools(self):
        vgpu = sources.make_vendor_vgpu(
            '1054', 'ID    : vGPU Name\n\n1054 : NVIDIA H100-4C\n'
            ' 1414:NVIDIA H200X-1-18C  \nnot a type\n')
        self.assertEqual(1054, vgpu.current)
        self.assertEqual((('1054', 'NVIDIA H100-4C'),
                          ('1414', 'NVIDIA H200X-1-18C')), vgpu.creatable)

    def test_hostile_name_is_malformed(self):
        for name in ('NVIDIA <x>', 'a' * 80, 'NVIDIA H100\'-4C'):
            self.assertRaises(sources.MalformedDevice,
                              sources.make_vendor_vgpu, '0',
                              '1054 : %s\n' % name)

    def test_bad_current(self):
        for value in ('-1', 'x', ''):
            self.assertRaises(sources.MalformedDevice,
                              sources.make_vendor_vgpu, value, '')
        self.assertIsNone(sources.make_vendor_vgpu(None, '').current)

    def test_driver_and_group_validated(self):
        function = sources.make_function(
            '0000:81:00.1', '10de', '2331', '030200', driver='nvidia',
            iommu_group='12')
        self.assertEqual(('nvidia', 12),
                         (function.driver, function.iommu_group))
        self.assertRaises(sources.MalformedDevice, sources.make_function,
                          '0000:81:00.1', '10de', '2331', '030200',
                          driver='../x')


class VfioVgpuHealthTest(_Card):

    def _problems(self, device):
        return self.driver.health(device).problems

    def test_healthy(self):
        (device,) = self.driver.discover()
        self.assertEqual((), self._problems(device))

    def test_type_removed(self):
        (device,) = self.driver.discover()
        self.sim.set_vgpu_type(self.card, self.vfs[2], '0')
        self.assertEqual(
            ('vGPU %s lost its vGPU type (nvidia/current_vgpu_type is 0)'
             % self.vfs[2],), self._problems(device))

    def test_rebound_to_vfio_pci(self):
        (device,) = self.driver.discover()
        self.sim.host.functions[self.vfs[0]].driver = 'vfio-pci'
        self.sim.write(self.root)
        self.assertEqual(
            ('vGPU %s is no longer bound to nvidia (vfio-pci)'
             % self.vfs[0],), self._problems(device))
