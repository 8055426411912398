"""Tests of the check every start of a guest crosses (one device, one
guest) and of the domain XML reading under it."""

from unittest import mock

import fixtures
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from oslo_config import fixture as config_fixture
import testtools

from nova_cyborg import conf
from nova_cyborg import exception
from nova_cyborg.model import handoff
from nova_cyborg.virt import domain_devices as dd
from nova_cyborg.virt import guard
from nova_cyborg.virt import libvirt as nc_libvirt
from tests.unit.objects import test_accelerator_request as fakes

ACCEL = ('0x0000', '0x0c', '0x00', '0x2')
STRAY = ('0x0000', '0x81', '0x01', '0x1')
NOVA_PCI = ('0x0000', '0x81', '0x00', '0x3')


def hostdev(address):
    return ('<hostdev mode="subsystem" type="pci" managed="yes"><source>'
            '<address domain="%s" bus="%s" slot="%s" function="%s"/>'
            '</source></hostdev>' % address)


def mdev(uuid):
    return ('<hostdev mode="subsystem" type="mdev" model="vfio-pci">'
            '<source><address uuid="%s"/></source></hostdev>' % uuid)


def domain(*devices):
    return ('<domain type="kvm"><name>instance-00000001</name>'
            '<uuid>%s</uuid><devices><disk type="file"/>%s'
            '<interface type="hostdev"><source><address type="pci" '
            'domain="0x0000" bus="0x81" slot="0x02" function="0x0"/>'
            '</source></interface></devices></domain>'
            % (fakes.INSTANCE_UUID, ''.join(devices)))


class DomainDevicesTestCase(testtools.TestCase):

    def test_keys_as_libvirt_reads_the_address(self):
        # 0x hex however padded or cased; without 0x, decimal (or octal
        # after a leading 0), as libvirt's strtoul with base 0.
        for address in (ACCEL, ('0x0', '0xC', '0', '2'),
                        ('0', '12', '0', '2'), ('0000', '014', '00', '2')):
            self.assertEqual({('pci', (0, 0x0c, 0, 2))},
                             dd.keys_in(domain(hostdev(address))), address)

    def test_mdev_and_pci_not_interfaces_or_usb(self):
        usb = ('<hostdev mode="subsystem" type="usb"><source><vendor '
               'id="0x1234"/></source></hostdev>')
        self.assertEqual(
            {('pci', (0, 0x0c, 0, 2)), ('mdev', fakes.MDEV_UUID)},
            dd.keys_in(domain(hostdev(ACCEL), mdev(fakes.MDEV_UUID.upper()),
                              usb)))

    def test_no_hostdev_is_not_parsed(self):
        self.assertEqual(set(), dd.keys_in('not even XML'))

    def test_unreadable(self):
        for xml in ('<domain><devices><hostdev type="pci"/></devices>'
                    '</domain>',
                    domain(hostdev(('0000', 'zz', '00', '1'))),
                    domain(mdev('')),
                    '<hostdev type="pci"/>', '<domain><hostdev'):
            self.assertRaises(dd.UnreadableDomain, dd.keys_in, xml)

    def test_remove_and_add(self):
        root = dd.parse(domain(hostdev(ACCEL), hostdev(STRAY)))
        dd.remove(root, [dd.pci_key(*STRAY)])
        dd.add(root, [dd.parse(domain(mdev(fakes.MDEV_UUID))).find(
            './devices/hostdev')])
        self.assertEqual({dd.pci_key(*ACCEL), ('mdev', fakes.MDEV_UUID)},
                         dd.keys_in(dd.to_string(root)))

    def test_describe(self):
        self.assertEqual('0000:81:01.1', dd.describe(dd.pci_key(*STRAY)))
        self.assertEqual('0000:81:00.3',
                         dd.describe(dd.key_of_address('0000:81:00.3')))


class StraysAndMissingTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(config_fixture.Config(conf.CONF))
        self.pci, self.mdev = nc_libvirt.validated(
            [fakes.pci_arq(), fakes.mdev_arq()])

    def test_what_nothing_gives_is_stray(self):
        present = {dd.pci_key(*ACCEL), dd.pci_key(*STRAY),
                   dd.pci_key(*NOVA_PCI), ('mdev', 'other')}
        strays, missing = guard.strays_and_missing(
            present, [self.pci], {dd.pci_key(*NOVA_PCI)}, False)
        self.assertEqual([('mdev', 'other'), dd.pci_key(*STRAY)], strays)
        self.assertEqual([], missing)

    def test_bound_arq_device_missing(self):
        strays, missing = guard.strays_and_missing(
            {dd.pci_key(*ACCEL)}, [self.pci, self.mdev], set(), False)
        self.assertEqual(([], [self.mdev]), (strays, missing))

    def test_novas_vgpus_are_novas(self):
        present = {('mdev', 'nova-vgpu')}
        self.assertEqual(([], []), guard.strays_and_missing(
            present, [], set(), True))
        self.assertEqual(([('mdev', 'nova-vgpu')], []),
                         guard.strays_and_missing(present, [], set(), False))


class CheckedXmlTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.flags = self.useFixture(config_fixture.Config(conf.CONF))
        self.flags.config(host='compute-1')
        self.useFixture(fakelibvirt.LibvirtFixture())
        self.driver = mock.Mock()
        self.driver.get_available_nodes.return_value = ['compute-1.example']
        # [mdev_nvidia-35] mdev_class = CUSTOM_NOTVGPU, as Nova 34 allows.
        self.driver._get_supported_mdev_resource_classes.return_value = {
            'VGPU', 'CUSTOM_NOTVGPU'}
        self.context = mock.Mock(request_id='req-1')
        self.flavor = objects.Flavor(extra_specs={})
        self.instance = mock.Mock(
            uuid=fakes.INSTANCE_UUID, flavor=self.flavor,
            system_metadata={}, host='compute-1', node='compute-1.example')
        self.instance.get_pci_devices.return_value = [
            mock.Mock(address='0000:81:00.3')]
        self.get_client = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_client')).mock
        self.cyclient = self.get_client.return_value
        self.cyclient.get_arqs_for_instance.return_value = [fakes.pci_arq()]
        self.record = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.virt.guard._record')).mock

    def check(self, xml):
        return guard.checked_xml(self.driver, self.context, self.instance,
                                 xml)

    def with_profile(self):
        self.flavor.extra_specs['accel:device_profile'] = 'fpga-dp'

    def test_plain_server_costs_nothing(self):
        xml = domain()
        self.assertIs(xml, self.check(xml))
        self.get_client.assert_not_called()
        self.instance.get_pci_devices.assert_not_called()

    def test_novas_own_pci_device_is_kept_without_asking_cyborg(self):
        xml = domain(hostdev(NOVA_PCI))
        self.assertIs(xml, self.check(xml))
        self.get_client.assert_not_called()
        self.record.assert_not_called()

    def test_stray_of_a_server_without_accelerators_is_removed(self):
        logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        checked = self.check(domain(hostdev(NOVA_PCI), hostdev(STRAY)))
        self.assertEqual({dd.pci_key(*NOVA_PCI)}, dd.keys_in(checked))
        self.get_client.assert_not_called()
        self.record.assert_called_once_with(
            self.context, self.instance, guard.EVENT_REMOVED)
        self.assertIn('0000:81:01.1', logs.output)
        # Everything else is kept.
        self.assertIn('<interface type="hostdev">', checked)
        self.assertIn('<disk type="file"/>', checked)

    def test_novas_generic_mdev_of_a_server_without_accelerators(self):
        # A flavor asking resources:CUSTOM_NOTVGPU=1: Nova made the mdev.
        self.flavor.extra_specs['resources:CUSTOM_NOTVGPU'] = '1'
        xml = domain(mdev('4156e4a5-5d1c-4d4e-b1f1-2a4b5c6d7e8f'))
        self.assertIs(xml, self.check(xml))
        self.get_client.assert_not_called()
        self.record.assert_not_called()

    def test_any_mdev_of_a_server_without_accelerators_is_novas(self):
        # Whatever Nova's configuration: nova-cyborg gave it none.
        self.driver._get_supported_mdev_resource_classes.return_value = set()
        xml = domain(mdev('4156e4a5-5d1c-4d4e-b1f1-2a4b5c6d7e8f'),
                     hostdev(NOVA_PCI))
        self.assertIs(xml, self.check(xml))
        self.get_client.assert_not_called()

    def test_generic_mdev_beside_accelerators_is_novas(self):
        self.with_profile()
        self.flavor.extra_specs['resources1:CUSTOM_NOTVGPU'] = '1'
        nova_mdev = mdev('4156e4a5-5d1c-4d4e-b1f1-2a4b5c6d7e8f')
        xml = domain(hostdev(ACCEL), nova_mdev)
        self.assertIs(xml, self.check(xml))

    def test_mdev_of_a_class_nova_does_not_serve_is_a_stray(self):
        # A server with accelerators whose flavor asks for no mdev class
        # the driver serves: an mdev nothing gives it is removed.
        self.with_profile()
        self.flavor.extra_specs['resources:CUSTOM_OTHER'] = '1'
        checked = self.check(domain(
            hostdev(ACCEL), mdev('4156e4a5-5d1c-4d4e-b1f1-2a4b5c6d7e8f')))
        self.assertEqual({dd.pci_key(*ACCEL)}, dd.keys_in(checked))
        self.record.assert_called_once_with(
            self.context, self.instance, guard.EVENT_REMOVED)

    def test_a_ports_arq_is_its_interface_not_missing(self):
        # A port with a device profile beside the flavor's: Nova gives the
        # port's ARQ as the port's <interface type='hostdev'>; adding it
        # as a <hostdev> too would pass the VF through twice.
        self.with_profile()
        xml = ('<domain type="kvm"><devices><interface type="hostdev" '
               'managed="yes"><source><address type="pci" domain="0x0000" '
               'bus="0x0c" slot="0x00" function="0x2"/></source>'
               '</interface></devices></domain>')
        self.assertIs(xml, self.check(xml))
        self.record.assert_not_called()

    def test_server_with_accelerators_keeps_its_bound_arqs(self):
        self.with_profile()
        xml = domain(hostdev(ACCEL))
        self.assertIs(xml, self.check(xml))
        self.cyclient.get_arqs_for_instance.assert_called_once_with(
            fakes.INSTANCE_UUID)

    def test_arqs_handed_over_by_the_wait_are_not_read_again(self):
        # The build's wait for the binding read them for this request
        # (nova_cyborg.model.handoff): the spawn's check takes them, once.
        self.with_profile()
        self.addCleanup(handoff._KEPT.clear)
        handoff.keep(self.context, fakes.INSTANCE_UUID, [fakes.pci_arq()])
        xml = domain(hostdev(ACCEL))
        self.assertIs(xml, self.check(xml))
        self.cyclient.get_arqs_for_instance.assert_not_called()
        # Another start of the guest reads them.
        self.assertIs(xml, self.check(xml))
        self.cyclient.get_arqs_for_instance.assert_called_once_with(
            fakes.INSTANCE_UUID)

    def test_arqs_handed_over_are_checked_as_read_ones(self):
        # An ARQ handed over that is no longer Bound here gives nothing.
        self.with_profile()
        self.addCleanup(handoff._KEPT.clear)
        handoff.keep(self.context, fakes.INSTANCE_UUID,
                     [dict(fakes.pci_arq(), hostname='compute-2')])
        self.assertEqual(set(), dd.keys_in(self.check(
            domain(hostdev(ACCEL)))))
        self.cyclient.get_arqs_for_instance.assert_not_called()

    def test_arq_bound_elsewhere_or_unbound_gives_nothing_here(self):
        self.with_profile()
        for arq in (dict(fakes.pci_arq(), hostname='compute-2'),
                    dict(fakes.pci_arq(), state='Unbound')):
            self.cyclient.get_arqs_for_instance.return_value = [arq]
            self.assertEqual(set(), dd.keys_in(self.check(
                domain(hostdev(ACCEL)))))

    def test_node_name_counts_as_here(self):
        self.with_profile()
        self.cyclient.get_arqs_for_instance.return_value = [
            dict(fakes.pci_arq(), hostname='compute-1.example')]
        xml = domain(hostdev(ACCEL))
        self.assertIs(xml, self.check(xml))

    def test_service_name_counts_only_for_the_instances_host(self):
        # One process serving several computes (Nova's functional tests)
        # shares CONF.host: another host's name is not this host's.
        self.with_profile()
        self.flags.config(host='compute-2')
        self.assertEqual(set(), dd.keys_in(self.check(
            domain(hostdev(ACCEL)))))

    def test_missing_device_is_added(self):
        self.with_profile()
        checked = self.check(domain())
        self.assertEqual({dd.pci_key(*ACCEL)}, dd.keys_in(checked))
        self.record.assert_called_once_with(
            self.context, self.instance, guard.EVENT_ADDED)

    def test_refused_when_cyborg_does_not_answer(self):
        self.with_profile()
        self.cyclient.get_arqs_for_instance.side_effect = (
            exception.CyborgError(op='get', msg='unreachable'))
        self.assertRaises(guard.GuestDevicesUnchecked, self.check,
                          domain(hostdev(ACCEL)))

    def test_refused_for_a_hostile_attach_handle(self):
        self.with_profile()
        self.cyclient.get_arqs_for_instance.return_value = [
            fakes.with_info(fakes.pci_arq(), 'bus', '0c"/><evil')]
        self.assertRaises(guard.GuestDevicesUnchecked, self.check,
                          domain(hostdev(ACCEL)))

    def test_refused_for_an_unreadable_definition(self):
        self.assertRaises(guard.GuestDevicesUnchecked, self.check,
                          domain(hostdev(('0000', 'zz', '00', '1'))))

    def test_asked_change_is_no_fault(self):
        checked = guard.checked_xml(
            self.driver, self.context, self.instance,
            domain(hostdev(STRAY)), asked='removeAccelerator')
        self.assertEqual(set(), dd.keys_in(checked))
        self.record.assert_not_called()

    def test_soft_reboot_redefines_only_when_needed(self):
        guest = mock.Mock()
        guest.get_xml_desc.return_value = domain(hostdev(NOVA_PCI))
        define = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.virt.libvirt.define')).mock
        self.assertIs(guest, guard.checked_guest(
            self.driver, self.context, self.instance, guest))
        define.assert_not_called()
        guest.get_xml_desc.return_value = domain(hostdev(STRAY))
        self.assertIs(define.return_value, guard.checked_guest(
            self.driver, self.context, self.instance, guest))
        self.assertEqual(set(), dd.keys_in(define.call_args[0][1]))
        guest.get_xml_desc.assert_called_with(dump_inactive=True,
                                              dump_sensitive=True)
