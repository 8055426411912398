"""Tests of the libvirt driver hooks."""

from unittest import mock

from lxml import etree
from nova import exception as nova_exception
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt import fake as fake_virt
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import event as libvirt_event
from nova.virt.libvirt import guest as libvirt_guest
from oslo_config import fixture as config_fixture
import testtools

from nova_cyborg import conf
from nova_cyborg import exception
from nova_cyborg.hooks import libvirt as libvirt_hooks
from nova_cyborg.virt import libvirt as nc_libvirt
from tests.unit.objects import test_accelerator_request as fakes

HOSTDEV_XML = (
    '<hostdev mode="subsystem" type="pci" managed="yes"><source>'
    '<address domain="0x0000" bus="0x0c" slot="0x00" function="0x2"/>'
    '</source></hostdev>')
MDEV_NAME = ('mdev_' + fakes.MDEV_UUID.replace('-', '_') + '_0000_0c_00_2')
OTHER_UUID = '22222222-3333-4444-8555-666666666666'


def compact(xml):
    parser = etree.XMLParser(remove_blank_text=True)
    return etree.tostring(etree.XML(xml, parser), encoding='unicode')


def hostile_arq():
    return fakes.with_info(fakes.pci_arq(), 'bus', '0c"/><evil')


def arq_with(base_arq, **fields):
    arq = dict(base_arq)
    arq.update(fields)
    return arq


class _Base(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.flags = self.useFixture(config_fixture.Config(conf.CONF))
        self.instance = mock.Mock(uuid=fakes.INSTANCE_UUID)


class PciArqsTestCase(_Base):

    def test_none_and_empty(self):
        self.assertEqual([], nc_libvirt.pci_arqs(self.instance, None))
        self.assertEqual([], nc_libvirt.pci_arqs(self.instance, []))

    def test_keeps_pci_leaves_mdev(self):
        pci = fakes.pci_arq()
        mdev = arq_with(fakes.mdev_arq(), uuid=OTHER_UUID)
        self.assertEqual([pci],
                         nc_libvirt.pci_arqs(self.instance, [mdev, pci]))

    def _assert_refused(self, arq, words):
        exc = self.assertRaises(exception.InvalidAttachHandle,
                                nc_libvirt.pci_arqs, self.instance,
                                [fakes.pci_arq(), arq])
        for word in words:
            self.assertIn(word, str(exc))

    def test_test_pci_refused(self):
        self._assert_refused(
            arq_with(fakes.pci_arq(), uuid=OTHER_UUID,
                     attach_handle_type='TEST_PCI'),
            [OTHER_UUID, 'TEST_PCI'])

    def test_unknown_type_refused(self):
        self._assert_refused(
            arq_with(fakes.pci_arq(), uuid=OTHER_UUID,
                     attach_handle_type='VFIO_AP'),
            [OTHER_UUID, 'VFIO_AP'])

    def test_disallowed_type_refused(self):
        self.flags.config(allowed_attach_types=['PCI'], group='nova_cyborg')
        self._assert_refused(arq_with(fakes.mdev_arq(), uuid=OTHER_UUID),
                             [OTHER_UUID, 'MDEV', 'allowed_attach_types'])

    def test_disallowed_pci_refused(self):
        self.flags.config(allowed_attach_types=['MDEV'], group='nova_cyborg')
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.pci_arqs, self.instance,
                          [fakes.pci_arq()])

    def test_without_attach_handle_refused(self):
        self._assert_refused(
            arq_with(fakes.pci_arq(), uuid=OTHER_UUID, state='Initial',
                     attach_handle_type='', attach_handle_info={}),
            [OTHER_UUID, 'attach handle'])

    def test_hostile_refused(self):
        self._assert_refused(hostile_arq(), [fakes.ARQ_UUID, 'bus'])


class AddPciHostdevsTestCase(_Base):

    def setUp(self):
        super().setUp()
        self.guest = vconfig.LibvirtConfigGuest()
        self.guest.virt_type = 'kvm'
        self.guest.name = 'instance-00000001'
        self.guest.uuid = fakes.INSTANCE_UUID
        self.guest.memory = 1024 * 1024
        self.guest.vcpus = 1
        self.guest.os_type = 'hvm'

    def _hostdevs(self):
        return [dev for dev in self.guest.devices
                if isinstance(dev, vconfig.LibvirtConfigGuestHostdevPCI)]

    def test_adds_hostdev(self):
        nc_libvirt.add_pci_hostdevs(self.guest, [fakes.pci_arq()])
        hostdevs = self._hostdevs()
        self.assertEqual(1, len(hostdevs))
        self.assertEqual(HOSTDEV_XML, compact(hostdevs[0].to_xml()))
        self.assertIn(HOSTDEV_XML, compact(self.guest.to_xml()))

    def test_unmanaged_hostdev(self):
        # An NVIDIA vGPU 17 VF: libvirt must leave it on its host driver.
        nc_libvirt.add_pci_hostdevs(self.guest, [fakes.pci_arq(
            managed='no')])
        unmanaged = HOSTDEV_XML.replace('managed="yes"', 'managed="no"')
        self.assertEqual(unmanaged, compact(self._hostdevs()[0].to_xml()))
        self.assertIn(unmanaged, compact(self.guest.to_xml()))

    def test_bad_managed_adds_nothing(self):
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.add_pci_hostdevs, self.guest,
                          [fakes.pci_arq(managed='no"/><x')])
        self.assertEqual([], self._hostdevs())

    def test_canonical_address(self):
        nc_libvirt.add_pci_hostdevs(self.guest, [fakes.pci_arq(
            domain='0', bus='C', device='1', function='0')])
        self.assertIn(
            '<address domain="0x0000" bus="0x0c" slot="0x01" '
            'function="0x0"/>', self._hostdevs()[0].to_xml())

    def test_one_per_pci_arq_skipping_mdev(self):
        second = arq_with(fakes.pci_arq(bus='0d'), uuid=OTHER_UUID)
        mdev = arq_with(fakes.mdev_arq(),
                        uuid='33333333-4444-4555-8666-777777777777')
        nc_libvirt.add_pci_hostdevs(self.guest,
                                    [fakes.pci_arq(), mdev, second])
        self.assertEqual(['0x0c', '0x0d'], [
            etree.XML(dev.to_xml()).find('source/address').get('bus')
            for dev in self._hostdevs()])
        self.assertEqual(2, len(self.guest.devices))

    def test_accepts_pci_arqs_output(self):
        accel_info = [fakes.pci_arq(), fakes.mdev_arq()]
        nc_libvirt.add_pci_hostdevs(
            self.guest, nc_libvirt.pci_arqs(self.instance, accel_info))
        self.assertEqual(1, len(self._hostdevs()))

    def test_hostile_adds_nothing(self):
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.add_pci_hostdevs, self.guest,
                          [fakes.pci_arq(), hostile_arq()])
        self.assertEqual([], self.guest.devices)
        self.assertNotIn('evil', self.guest.to_xml())

    def test_test_pci_adds_nothing(self):
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.add_pci_hostdevs, self.guest,
                          [arq_with(fakes.pci_arq(),
                                    attach_handle_type='TEST_PCI')])
        self.assertEqual([], self.guest.devices)


class AllocateMdevsTestCase(_Base):

    def setUp(self):
        super().setUp()
        # As in Nova's own libvirt tests: the driver module's lazily
        # imported libvirt binding becomes fakelibvirt.
        self.useFixture(fakelibvirt.LibvirtFixture())
        self.driver = mock.Mock(spec=['_host', '_create_mdev',
                                      '_warn_if_nova_managed'])
        self.lookup = self.driver._host.device_lookup_by_name

    def _no_node_device(self, *args):
        raise fakelibvirt.make_libvirtError(
            fakelibvirt.libvirtError, 'Node device not found',
            error_code=fakelibvirt.VIR_ERR_NO_NODE_DEVICE)

    def test_creates_missing_mdev(self):
        self.lookup.side_effect = self._no_node_device
        self.assertEqual([fakes.MDEV_UUID], nc_libvirt.allocate_mdevs(
            self.driver, [fakes.pci_arq(), fakes.mdev_arq()]))
        self.lookup.assert_called_once_with(MDEV_NAME)
        self.driver._create_mdev.assert_called_once_with(
            'pci_0000_0c_00_2', 'nvidia-35', uuid=fakes.MDEV_UUID)
        self.driver._warn_if_nova_managed.assert_called_once_with({
            'domain': '0000', 'bus': '0c', 'device': '00', 'function': '2',
            'asked_type': 'nvidia-35'})

    def test_existing_mdev_not_created(self):
        self.assertEqual([fakes.MDEV_UUID], nc_libvirt.allocate_mdevs(
            self.driver, [fakes.mdev_arq()]))
        self.lookup.assert_called_once_with(MDEV_NAME)
        self.driver._create_mdev.assert_not_called()

    def test_other_libvirt_error_raised(self):
        self.lookup.side_effect = fakelibvirt.make_libvirtError(
            fakelibvirt.libvirtError, 'boom',
            error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR)
        self.assertRaises(fakelibvirt.libvirtError,
                          nc_libvirt.allocate_mdevs, self.driver,
                          [fakes.mdev_arq()])
        self.driver._create_mdev.assert_not_called()

    def test_no_mdev_arqs(self):
        self.assertEqual([], nc_libvirt.allocate_mdevs(self.driver, None))
        self.assertEqual([], nc_libvirt.allocate_mdevs(
            self.driver, [fakes.pci_arq()]))
        self.lookup.assert_not_called()

    def test_hostile_creates_nothing(self):
        self.lookup.side_effect = self._no_node_device
        for bad in (fakes.with_info(fakes.mdev_arq(), 'asked_type',
                                    '../../../../bin'),
                    fakes.with_field(fakes.mdev_arq(), 'attach_handle_uuid',
                                     'a/b'),
                    fakes.with_info(fakes.mdev_arq(), 'domain', '0000\n')):
            good = arq_with(fakes.mdev_arq(), uuid=OTHER_UUID)
            self.assertRaises(exception.InvalidAttachHandle,
                              nc_libvirt.allocate_mdevs, self.driver,
                              [good, bad])
        # A hostile PCI ARQ in the same list also stops mdev creation.
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.allocate_mdevs, self.driver,
                          [fakes.mdev_arq(), hostile_arq()])
        self.lookup.assert_not_called()
        self.driver._create_mdev.assert_not_called()

    def test_disallowed_mdev_creates_nothing(self):
        self.flags.config(allowed_attach_types=['PCI'], group='nova_cyborg')
        self.lookup.side_effect = self._no_node_device
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.allocate_mdevs, self.driver,
                          [fakes.mdev_arq()])
        self.driver._create_mdev.assert_not_called()


class AccelInfoTestCase(testtools.TestCase):
    """The hook that reads the ARQs where Nova does not pass them."""

    def _instance(self, extra_specs):
        return mock.Mock(uuid='1f1c2a9e-5b7d-4c10-8a2b-3c4d5e6f7a8b',
                         flavor=mock.Mock(extra_specs=extra_specs),
                         system_metadata={}, host='host1', node='host1')

    @mock.patch('nova_cyborg.clients.cyborg.get_client')
    def test_arqs_of_an_accelerated_instance(self, get_client):
        arq = {'uuid': 'a', 'hostname': 'host1'}
        get_client.return_value.get_arqs_for_instance.return_value = [arq]
        instance = self._instance({'accel:device_profile': 'dp'})
        self.assertEqual([arq],
                         libvirt_hooks.accel_info('ctx', instance))
        get_client.assert_called_once_with('ctx')
        get_client.return_value.get_arqs_for_instance.assert_called_once_with(
            instance.uuid)

    @mock.patch('nova_cyborg.clients.cyborg.get_client')
    def test_arqs_bound_to_another_host_are_left_out(self, get_client):
        # A failed resize left the destination's ARQ bound: its PCI
        # function is host2's, never this guest's.
        here = {'uuid': 'a', 'hostname': 'host1'}
        there = {'uuid': 'b', 'hostname': 'host2'}
        get_client.return_value.get_arqs_for_instance.return_value = [
            here, there]
        instance = self._instance({'accel:device_profile': 'dp'})
        self.assertEqual([here], libvirt_hooks.accel_info('ctx', instance))

    @mock.patch('nova_cyborg.clients.cyborg.get_client')
    def test_no_profile_asks_nobody(self, get_client):
        self.assertEqual([], libvirt_hooks.accel_info(
            'ctx', self._instance({'hw:cpu_policy': 'dedicated'})))
        get_client.assert_not_called()


class FakeDomain(object):
    """A running domain's live XML, with its PCI hostdevs.

    ``hostdevs`` holds (domain, bus, slot, function) attribute strings as
    libvirt reports them; ``stuck`` ones stay after a detach, as when the
    guest does not let go of the device.
    """

    def __init__(self, hostdevs=(), stuck=(), saved=None, aliases=False):
        #: Whether the live hostdevs carry libvirt's alias (real libvirt
        #: names every live device; Nova's fakelibvirt does not).
        self.aliases = aliases
        self.hostdevs = list(hostdevs)
        self.stuck = set(stuck)
        #: The persistent definition's hostdevs, where they differ.
        self.saved = saved
        self.xml_reads = 0
        self.detached = []
        self.attached = []

    def XMLDesc(self, flags):
        self.xml_reads += 1
        hostdevs, alias = self.hostdevs, self.aliases
        if (self.saved is not None and
                flags & fakelibvirt.VIR_DOMAIN_XML_INACTIVE):
            hostdevs, alias = self.saved, False
        devices = ''.join(
            '<hostdev mode="subsystem" type="pci" managed="yes"><source>'
            '<address domain="%s" bus="%s" slot="%s" function="%s"/>'
            '</source>%s</hostdev>' % (address + (
                '<alias name="hostdev%d"/>' % index if alias else '',))
            for index, address in enumerate(hostdevs))
        # An mdev is a hostdev too, but not a PCI one.
        devices += (
            '<hostdev mode="subsystem" type="mdev" model="vfio-pci">'
            '<source><address uuid="%s"/></source></hostdev>' %
            fakes.MDEV_UUID)
        return ('<domain type="kvm"><name>instance-00000001</name>'
                '<uuid>%s</uuid><memory>1048576</memory><vcpu>1</vcpu>'
                '<devices>%s</devices></domain>' %
                (fakes.INSTANCE_UUID, devices))

    @staticmethod
    def _key(xml):
        address = etree.XML(xml).find('source/address')
        return tuple(int(address.get(k), 16)
                     for k in ('domain', 'bus', 'slot', 'function'))

    def detachDeviceFlags(self, xml, flags):
        self.detached.append((compact(xml), flags))
        key = self._key(xml)
        if key not in self.stuck:
            self.hostdevs = [a for a in self.hostdevs
                             if tuple(int(p, 16) for p in a) != key]

    def attachDeviceFlags(self, xml, flags):
        self.attached.append((compact(xml), flags))


class PciHotplugTestCase(_Base):

    ACCEL = ('0x0000', '0x0c', '0x00', '0x2')
    #: A device that Nova passed through itself (a PCI alias).
    NOVA_PCI = ('0x0000', '0x81', '0x00', '0x1')
    SECOND_XML = HOSTDEV_XML.replace('bus="0x0c"', 'bus="0x0d"')

    def setUp(self):
        super().setUp()
        self.useFixture(fakelibvirt.LibvirtFixture())
        self.second = arq_with(fakes.pci_arq(bus='0d'), uuid=OTHER_UUID)
        self.mdev = arq_with(fakes.mdev_arq(),
                             uuid='33333333-4444-4555-8666-777777777777')

    def guest(self, *args, **kwargs):
        self.domain = FakeDomain(*args, **kwargs)
        return libvirt_guest.Guest(self.domain)

    def test_fake_domain_is_parsed(self):
        # Guest.get_all_devices() answers [] for XML it cannot parse, which
        # would make every test below meaningless.
        guest = self.guest([self.ACCEL, self.NOVA_PCI])
        self.assertEqual(2, len(guest.get_all_devices(
            devtype=vconfig.LibvirtConfigGuestHostdevPCI)))

    def test_detach_only_pci_arqs_live(self):
        guest = self.guest([self.ACCEL, self.NOVA_PCI])
        nc_libvirt.detach_pci_hostdevs(
            guest, [self.mdev, fakes.pci_arq()])
        self.assertEqual([(HOSTDEV_XML, fakelibvirt.VIR_DOMAIN_AFFECT_LIVE)],
                         self.domain.detached)
        self.assertEqual([self.NOVA_PCI], self.domain.hostdevs)
        self.assertEqual([], self.domain.attached)

    def test_detach_several(self):
        second = ('0x0000', '0x0d', '0x00', '0x2')
        guest = self.guest([self.ACCEL, second])
        nc_libvirt.detach_pci_hostdevs(guest,
                                       [fakes.pci_arq(), self.second])
        self.assertEqual([HOSTDEV_XML, self.SECOND_XML],
                         [xml for xml, _flags in self.domain.detached])
        self.assertEqual([], self.domain.hostdevs)

    def test_detach_nothing(self):
        guest = self.guest([self.NOVA_PCI])
        nc_libvirt.detach_pci_hostdevs(guest, None)
        nc_libvirt.detach_pci_hostdevs(guest, [self.mdev])
        self.assertEqual([], self.domain.detached)

    def test_detach_still_there_raises(self):
        guest = self.guest([self.ACCEL, self.NOVA_PCI],
                           stuck=[(0, 0x0c, 0, 2)])
        exc = self.assertRaises(nova_exception.PciDeviceDetachFailed,
                                nc_libvirt.detach_pci_hostdevs, guest,
                                [fakes.pci_arq()])
        # The device is named (0000:0c:00 then the function).
        self.assertIn('0000:0c:00', exc.format_message())
        self.assertIn('still in the domain after detach',
                      exc.format_message())

    def test_detach_still_there_written_otherwise_raises(self):
        # libvirt may write the address without padding or prefix.
        guest = self.guest([('0x0', '0xC', '0', '2')],
                           stuck=[(0, 0x0c, 0, 2)])
        self.assertRaises(nova_exception.PciDeviceDetachFailed,
                          nc_libvirt.detach_pci_hostdevs, guest,
                          [fakes.pci_arq()])

    def test_detach_hostile_touches_nothing(self):
        guest = self.guest([self.ACCEL])
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.detach_pci_hostdevs, guest,
                          [fakes.pci_arq(), hostile_arq()])
        self.assertEqual([], self.domain.detached)
        self.assertEqual(0, self.domain.xml_reads)
        self.assertEqual([self.ACCEL], self.domain.hostdevs)

    def test_attach_the_missing_ones(self):
        guest = self.guest([self.NOVA_PCI])
        nc_libvirt.attach_pci_hostdevs(
            guest, [fakes.pci_arq(), self.mdev, self.second])
        live = fakelibvirt.VIR_DOMAIN_AFFECT_LIVE
        self.assertEqual([(HOSTDEV_XML, live), (self.SECOND_XML, live)],
                         self.domain.attached)
        self.assertEqual([], self.domain.detached)

    def test_attach_and_detach_keep_managed_no(self):
        unmanaged = HOSTDEV_XML.replace('managed="yes"', 'managed="no"')
        arq = fakes.pci_arq(managed='no')
        guest = self.guest([self.NOVA_PCI])
        nc_libvirt.attach_pci_hostdevs(guest, [arq])
        live = fakelibvirt.VIR_DOMAIN_AFFECT_LIVE
        self.assertEqual([(unmanaged, live)], self.domain.attached)
        guest = self.guest([self.ACCEL])
        nc_libvirt.detach_pci_hostdevs(guest, [arq])
        self.assertEqual([(unmanaged, live)], self.domain.detached)

    def test_attach_skips_present(self):
        for written in (self.ACCEL, ('0x0', '0xc', '0x0', '0x2'),
                        ('0000', '0C', '00', '2'),
                        ('0x0000', '0x0C', '0', '2')):
            guest = self.guest([written, self.NOVA_PCI])
            nc_libvirt.attach_pci_hostdevs(
                guest, [fakes.pci_arq(), self.second])
            self.assertEqual(
                [(self.SECOND_XML, fakelibvirt.VIR_DOMAIN_AFFECT_LIVE)],
                self.domain.attached, written)

    def test_attach_all_present(self):
        guest = self.guest([self.ACCEL, ('0x0000', '0x0d', '0x00', '0x2')])
        nc_libvirt.attach_pci_hostdevs(guest, [fakes.pci_arq(), self.second])
        self.assertEqual([], self.domain.attached)

    def test_attach_nothing(self):
        guest = self.guest()
        nc_libvirt.attach_pci_hostdevs(guest, None)
        nc_libvirt.attach_pci_hostdevs(guest, [self.mdev])
        self.assertEqual([], self.domain.attached)

    def test_attach_hostile_touches_nothing(self):
        guest = self.guest()
        for bad in (hostile_arq(),
                    arq_with(fakes.pci_arq(), attach_handle_type='TEST_PCI')):
            self.assertRaises(exception.InvalidAttachHandle,
                              nc_libvirt.attach_pci_hostdevs, guest,
                              [self.second, bad])
        self.assertEqual([], self.domain.attached)
        self.assertEqual(0, self.domain.xml_reads)

    def test_attach_persistent_changes_the_definition_too(self):
        guest = self.guest([self.NOVA_PCI])
        nc_libvirt.attach_pci_hostdevs(guest, [fakes.pci_arq()],
                                       persistent=True)
        self.assertEqual(
            [(HOSTDEV_XML, fakelibvirt.VIR_DOMAIN_AFFECT_CONFIG |
              fakelibvirt.VIR_DOMAIN_AFFECT_LIVE)], self.domain.attached)

    def test_attach_persistent_gives_each_definition_what_it_lacks(self):
        # libvirt refuses a device already in the definition ("already in
        # the domain configuration") or already live: each gets only what
        # it lacks.
        live = fakelibvirt.VIR_DOMAIN_AFFECT_LIVE
        config = fakelibvirt.VIR_DOMAIN_AFFECT_CONFIG
        second = ('0x0000', '0x0d', '0x00', '0x2')
        guest = self.guest([self.NOVA_PCI, second],
                           saved=[self.NOVA_PCI, self.ACCEL])
        nc_libvirt.attach_pci_hostdevs(guest, [fakes.pci_arq(), self.second],
                                       persistent=True)
        self.assertEqual([(HOSTDEV_XML, live), (self.SECOND_XML, config)],
                         self.domain.attached)
        guest = self.guest([self.ACCEL], saved=[self.ACCEL])
        nc_libvirt.attach_pci_hostdevs(guest, [fakes.pci_arq()],
                                       persistent=True)
        self.assertEqual([], self.domain.attached)

    def test_remove_without_alias_detaches_both_at_once(self):
        guest = self.guest([self.ACCEL, self.NOVA_PCI])
        driver = mock.Mock()
        nc_libvirt.remove_pci_hostdevs(driver, guest, self.instance,
                                       [fakes.pci_arq()])
        driver._detach_with_retry.assert_not_called()
        self.assertEqual(
            [(HOSTDEV_XML, fakelibvirt.VIR_DOMAIN_AFFECT_CONFIG |
              fakelibvirt.VIR_DOMAIN_AFFECT_LIVE)], self.domain.detached)

    def test_remove_hostile_touches_nothing(self):
        guest = self.guest([self.ACCEL], saved=[self.ACCEL], aliases=True)
        driver = mock.Mock()
        self.assertRaises(exception.InvalidAttachHandle,
                          nc_libvirt.remove_pci_hostdevs, driver, guest,
                          self.instance, [fakes.pci_arq(), hostile_arq()])
        driver._detach_with_retry.assert_not_called()
        self.assertEqual(0, self.domain.xml_reads)

    def test_detach_persistent_changes_the_definition_too(self):
        guest = self.guest([self.ACCEL, self.NOVA_PCI])
        nc_libvirt.detach_pci_hostdevs(guest, [fakes.pci_arq()],
                                       persistent=True)
        self.assertEqual(
            [(HOSTDEV_XML, fakelibvirt.VIR_DOMAIN_AFFECT_CONFIG |
              fakelibvirt.VIR_DOMAIN_AFFECT_LIVE)], self.domain.detached)
        self.assertEqual([self.NOVA_PCI], self.domain.hostdevs)

    def test_detach_persistent_still_defined_raises(self):
        # The definition (read with VIR_DOMAIN_XML_INACTIVE) still holds
        # the device: a later start from it would bring it back.
        guest = self.guest([self.ACCEL], stuck=[(0, 0x0c, 0, 2)])
        self.assertRaises(nova_exception.PciDeviceDetachFailed,
                          nc_libvirt.detach_pci_hostdevs, guest,
                          [fakes.pci_arq()], persistent=True)


class LibvirtDomain(FakeDomain):
    """A running, persistent domain as libvirt answers Nova's driver:
    a detach from the definition (VIR_DOMAIN_AFFECT_CONFIG) takes effect
    at once; a live one (VIR_DOMAIN_AFFECT_LIVE) only once the guest lets
    go, after ``slow`` more requests for that device (a guest slow to
    release it), and only then does libvirt send
    VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED with the device's alias
    (libvirt's qemuDomainRemoveDevice; Nova's LibvirtDriver hands it to
    its waiters as a DeviceRemovedEvent)."""

    def __init__(self, hostdevs, saved, slow=None, on_removed=None):
        super().__init__(hostdevs, saved=saved, aliases=True)
        self.slow = dict(slow or {})
        self.on_removed = on_removed

    def info(self):
        return [fakelibvirt.VIR_DOMAIN_RUNNING, 1048576, 1048576, 1, 0]

    def ID(self):
        return 1

    def name(self):
        return 'instance-00000001'

    def UUIDString(self):
        return fakes.INSTANCE_UUID

    def isPersistent(self):
        return True

    def detachDeviceFlags(self, xml, flags):
        self.detached.append((compact(xml), flags))
        key = self._key(xml)

        def without(addresses):
            return [a for a in addresses
                    if tuple(int(p, 16) for p in a) != key]
        if flags & fakelibvirt.VIR_DOMAIN_AFFECT_CONFIG:
            self.saved = without(self.saved)
        if flags & fakelibvirt.VIR_DOMAIN_AFFECT_LIVE:
            if self.slow.get(key):
                self.slow[key] -= 1
                return
            index = [tuple(int(p, 16) for p in a)
                     for a in self.hostdevs].index(key)
            self.hostdevs = without(self.hostdevs)
            self.on_removed('hostdev%d' % index)


class RemoveWithNovaDetachTestCase(_Base):
    """removeAccelerator on a running guest through Nova's own
    LibvirtDriver._detach_with_retry (the real driver, on Nova's
    fakelibvirt connection): the definition first, the live domain
    waiting for libvirt's device-removed event, retried while the guest
    holds on."""

    ACCEL = PciHotplugTestCase.ACCEL
    NOVA_PCI = PciHotplugTestCase.NOVA_PCI

    def setUp(self):
        super().setUp()
        self.useFixture(fakelibvirt.LibvirtFixture())
        self.driver = libvirt_driver.LibvirtDriver(fake_virt.FakeVirtAPI(),
                                                   False)
        # A guest that did not let go is asked again after 1 s.
        self.flags.config(device_detach_timeout=1, device_detach_attempts=3,
                          group='libvirt')

    def guest(self, hostdevs, saved, slow=None):
        def removed(alias):
            self.driver._device_event_handler.notify_waiters(
                libvirt_event.DeviceRemovedEvent(fakes.INSTANCE_UUID,
                                                 alias))
        self.domain = LibvirtDomain(hostdevs, saved, slow, removed)
        return libvirt_guest.Guest(self.domain)

    def remove(self, guest):
        nc_libvirt.remove_pci_hostdevs(self.driver, guest, self.instance,
                                       [fakes.pci_arq()])

    def test_definition_then_live_domain(self):
        guest = self.guest([self.ACCEL, self.NOVA_PCI],
                           [self.ACCEL, self.NOVA_PCI])
        self.remove(guest)
        self.assertEqual([self.NOVA_PCI], self.domain.hostdevs)
        self.assertEqual([self.NOVA_PCI], self.domain.saved)
        self.assertEqual([fakelibvirt.VIR_DOMAIN_AFFECT_CONFIG,
                          fakelibvirt.VIR_DOMAIN_AFFECT_LIVE],
                         [flags for _xml, flags in self.domain.detached])
        self.assertEqual({(0, 0x0c, 0, 2)}, {
            self.domain._key(xml) for xml, _flags in self.domain.detached})

    def test_guest_slow_to_let_go_is_asked_again(self):
        guest = self.guest([self.ACCEL], [self.ACCEL],
                           slow={(0, 0x0c, 0, 2): 1})
        self.remove(guest)
        self.assertEqual([], self.domain.hostdevs)
        self.assertEqual(3, len(self.domain.detached))

    def test_guest_that_never_lets_go_fails_and_a_retry_finishes(self):
        guest = self.guest([self.ACCEL], [self.ACCEL],
                           slow={(0, 0x0c, 0, 2): 3})
        exc = self.assertRaises(nova_exception.PciDeviceDetachFailed,
                                self.remove, guest)
        self.assertIn('0000:0c:00.2', exc.format_message())
        # Gone from the definition, still live: the retry (the guest let
        # go meanwhile) detaches it from the live domain only, where
        # libvirt would answer "device not found" for the definition.
        self.assertEqual([], self.domain.saved)
        self.domain.slow.clear()
        self.domain.detached = []
        self.remove(guest)
        self.assertEqual([], self.domain.hostdevs)
        self.assertEqual([fakelibvirt.VIR_DOMAIN_AFFECT_LIVE],
                         [flags for _xml, flags in self.domain.detached])
        # Gone from both: nothing to do.
        self.domain.detached = []
        self.remove(guest)
        self.assertEqual([], self.domain.detached)
