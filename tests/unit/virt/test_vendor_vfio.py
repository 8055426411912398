"""An NVIDIA vGPU 17 VF whose type the sidecar sets at bind: Cyborg holds
its attach handle as MDEV (cyborg-conductor then asks the sidecar to set
the type), and every path of the compute host passes it as the VF itself,
a PCI ``<hostdev managed='no'>``, never as an mdev."""

from unittest import mock

from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt.libvirt import config as vconfig

from nova_cyborg import exception
from nova_cyborg.model import actions
from nova_cyborg.virt import domain_devices
from nova_cyborg.virt import guard
from nova_cyborg.virt import libvirt as nc_libvirt
from tests.unit.objects import test_accelerator_request as fakes
from tests.unit.virt import test_libvirt

VF_HOSTDEV_XML = (
    '<hostdev mode="subsystem" type="pci" managed="no"><source>'
    '<address domain="0x0000" bus="0x81" slot="0x00" function="0x3"/>'
    '</source></hostdev>')


class VendorVfioTestCase(test_libvirt._Base):

    def setUp(self):
        super().setUp()
        self.vf = fakes.vfio_arq()
        self.mdev = test_libvirt.arq_with(fakes.mdev_arq(),
                                          uuid=test_libvirt.OTHER_UUID)

    def test_guest_config_has_the_vf_unmanaged(self):
        self.assertEqual([self.vf], nc_libvirt.pci_arqs(
            self.instance, [self.mdev, self.vf]))
        guest = vconfig.LibvirtConfigGuest()
        nc_libvirt.add_pci_hostdevs(guest, [self.vf, self.mdev])
        (dev,) = guest.devices
        self.assertEqual(VF_HOSTDEV_XML,
                         test_libvirt.compact(dev.to_xml()))
        self.assertEqual(VF_HOSTDEV_XML, test_libvirt.compact(
            nc_libvirt.hostdev_config(
                nc_libvirt.validated([self.vf])[0]).to_xml()))

    def test_no_mdev_is_created_for_it(self):
        self.useFixture(fakelibvirt.LibvirtFixture())
        driver = mock.Mock()
        self.assertEqual([], nc_libvirt.allocate_mdevs(driver, [self.vf]))
        driver._host.device_lookup_by_name.assert_not_called()
        driver._create_mdev.assert_not_called()

    def test_allowed_as_a_pci_function(self):
        self.flags.config(group='nova_cyborg', allowed_attach_types=['PCI'])
        self.assertEqual([self.vf], nc_libvirt.pci_arqs(self.instance,
                                                        [self.vf]))

    def test_hostile_marked_handle_adds_nothing(self):
        guest = vconfig.LibvirtConfigGuest()
        bad = fakes.with_info(self.vf, 'managed', 'yes')
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.add_pci_hostdevs, guest,
                          [self.vf, bad])
        self.assertEqual([], guest.devices)

    def test_unpluggable_from_a_running_server(self):
        actions.refuse_unpluggable([self.vf])
        self.assertRaises(exception.OperationRefused,
                          actions.refuse_unpluggable, [self.mdev])
        # A marker on anything but its own value is no PCI function.
        self.assertRaises(exception.OperationRefused,
                          actions.refuse_unpluggable, [fakes.with_info(
                              self.vf, 'vgpu_framework', 'mdev')])

    def test_guard_keys_it_by_its_pci_address(self):
        (arq,) = nc_libvirt.validated([self.vf])
        self.assertEqual(domain_devices.pci_key('0000', '81', '00', '3'),
                         guard._arq_key(arq))
