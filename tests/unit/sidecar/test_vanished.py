"""Vanished attach handles are put back, as the kernel shows them."""

import json
import os

import fixtures
import testtools

from sidecar.discovery import vanished
from sidecar import model

PF = '0000:81:00.0'
VF0, VF1 = '0000:81:00.1', '0000:81:00.2'


def region_card(*vfs):
    """A card with a region on each VF: one deployable per VF."""
    return model.Device(
        type='FPGA', vendor='8086', model='0b30', address=PF,
        deployables=tuple(model.Deployable(
            name=vf, resource_class='FPGA', num_accelerators=1,
            traits=('CUSTOM_FPGA_INTEL',),
            attach_handles=(model.AttachHandle('PCI', vf),))
            for vf in vfs))


class SysfsTestCase(testtools.TestCase):
    """A PF with two VFs in a sysfs tree; a state directory."""

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        devices = os.path.join(self.root, 'bus', 'pci', 'devices')
        os.makedirs(os.path.join(devices, PF))
        for index, vf in enumerate((VF0, VF1)):
            os.makedirs(os.path.join(devices, vf))
            os.symlink('../' + vf, os.path.join(devices, PF,
                                                'virtfn%d' % index))
        self.devices = devices
        self.state = self.useFixture(fixtures.TempDir()).path


class VanishedTest(SysfsTestCase):

    def test_declared_reads_dangling_links(self):
        os.rmdir(os.path.join(self.devices, VF1))
        self.assertEqual({VF0, VF1}, vanished.declared(self.root, PF))
        self.assertFalse(vanished.present(self.root, VF1))
        self.assertEqual(frozenset(), vanished.declared(self.root, VF0))

    def test_a_regions_vf_gone_keeps_its_deployable(self):
        tracker = vanished.Vanished(self.root, self.state)
        before = region_card(VF0, VF1)
        self.assertEqual((before, ()), tracker.apply(before))
        os.rmdir(os.path.join(self.devices, VF1))
        device, gone = tracker.apply(region_card(VF0), before)
        self.assertEqual((before, (VF1,)), (device, gone))

    def test_a_new_vf_is_added_beside_a_vanished_one(self):
        card = model.Device(
            type='PCI', vendor='8086', model='0b30', address=PF,
            deployables=(model.Deployable(
                name=PF, resource_class='CUSTOM_QAT', num_accelerators=2,
                attach_handles=(model.AttachHandle('PCI', VF0),
                                model.AttachHandle('PCI', VF1))),))
        tracker = vanished.Vanished(self.root)
        tracker.apply(card)
        os.rmdir(os.path.join(self.devices, VF0))
        now = model.Device(
            type='PCI', vendor='8086', model='0b30', address=PF,
            deployables=(model.Deployable(
                name=PF, resource_class='CUSTOM_QAT', num_accelerators=2,
                attach_handles=(model.AttachHandle('PCI', VF1),
                                model.AttachHandle('PCI', '0000:81:00.3'))),))
        device, gone = tracker.apply(now, card)
        (dep,) = device.deployables
        self.assertEqual((VF0,), gone)
        self.assertEqual([VF0, VF1, '0000:81:00.3'],
                         [h.address for h in dep.attach_handles])
        self.assertEqual(3, dep.num_accelerators)

    def test_a_corrupt_file_starts_from_nothing(self):
        with open(os.path.join(self.state, vanished.FILE), 'w') as f:
            f.write('[')
        tracker = vanished.Vanished(self.root, self.state)
        os.rmdir(os.path.join(self.devices, VF1))
        self.assertEqual(((), 1), (tracker.apply(region_card(VF0))[1],
                                   len(region_card(VF0).deployables)))
        self.assertTrue(any(n.startswith(vanished.FILE + '.corrupt')
                            for n in os.listdir(self.state)))


class RestartKeepsHandleFieldsTest(SysfsTestCase):
    """After a restart a vanished function's handle is rebuilt from the
    file with its managed mode and physical network: a vGPU 17 VF's
    managed='no' (a 'yes' would let libvirt take it from nvidia) and a
    NIC VF's physnet (Nova's accelerator-direct ports read it)."""

    def card(self, *handles):
        return model.Device(
            type='PCI', vendor='8086', model='1889', address=PF,
            deployables=(model.Deployable(
                name=PF, resource_class='CUSTOM_NIC_VF',
                num_accelerators=len(handles), attach_handles=handles),))

    def test_fields_survive_the_restart(self):
        vf0 = model.AttachHandle('PCI', VF0, managed='no',
                                 physical_network='physnet1')
        vf1 = model.AttachHandle('PCI', VF1, physical_network='physnet1')
        vanished.Vanished(self.root, self.state).apply(self.card(vf0, vf1))
        os.rmdir(os.path.join(self.devices, VF0))
        restarted = vanished.Vanished(self.root, self.state)
        device, gone = restarted.apply(self.card(vf1))
        self.assertEqual((VF0,), gone)
        self.assertEqual((vf0, vf1), device.deployables[0].attach_handles)
        self.assertEqual({'domain': '0000', 'bus': '81', 'device': '00',
                          'function': '1', 'managed': 'no',
                          'physical_network': 'physnet1'},
                         device.deployables[0].attach_handles[0]
                         .attach_info())

    def test_hostile_fields_are_dropped(self):
        with open(os.path.join(self.state, vanished.FILE), 'w') as f:
            json.dump({PF: {PF: [
                {'address': VF0, 'managed': "yes' onload='x",
                 'physical_network': '../../etc'},
                {'address': 'not-a-bdf', 'managed': 'no'},
                VF1]}}, f)
        os.rmdir(os.path.join(self.devices, VF0))
        vf1 = model.AttachHandle('PCI', VF1)
        device, gone = vanished.Vanished(self.root, self.state).apply(
            self.card(vf1))
        self.assertEqual((VF0,), gone)
        self.assertEqual((model.AttachHandle('PCI', VF0), vf1),
                         device.deployables[0].attach_handles)
