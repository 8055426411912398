import testtools

from sidecar.discovery import domains

XML = """<domain type='kvm'><name>instance-1</name><devices>
<hostdev mode='subsystem' type='pci' managed='yes'><source>
<address domain='0x0000' bus='0x81' slot='0x00' function='0x1'/>
</source></hostdev>
<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source>
<address uuid='B5B1C7E2-4B5B-4E8C-9F61-0F5B2B5C2D11'/></source></hostdev>
<hostdev mode='subsystem' type='pci'><source>
<address domain='zz' bus='0x81' slot='0x00' function='0x2'/>
</source></hostdev>
<interface type='bridge'/>
</devices></domain>"""


class FakeDomain:
    """A domain as libvirt answers: XMLDesc(0) its live definition when it
    runs, XMLDesc(VIR_DOMAIN_XML_INACTIVE) its saved one (``saved``; the
    same unless given)."""

    def __init__(self, name, xml, active=1, saved=None):
        self._name, self._xml, self._active = name, xml, active
        self._saved = xml if saved is None else saved

    def name(self):
        return self._name

    def isActive(self):
        return self._active

    def UUIDString(self):
        return 'C0FFEE00-0000-4000-8000-00000000000' + self._name[-1]

    def XMLDesc(self, flags):
        if flags & domains.XML_INACTIVE or not self._active:
            return self._saved
        return self._xml


class FakeConnection:
    def __init__(self, doms):
        self.doms = doms

    def listAllDomains(self, flags):
        # Running and stopped domains both count.
        assert flags == 3, flags
        return self.doms


class DomainsTest(testtools.TestCase):

    def test_devices_in_xml(self):
        pci, mdevs = domains.devices_in_xml(XML)
        self.assertEqual({'0000:81:00.1'}, pci)
        self.assertEqual({'b5b1c7e2-4b5b-4e8c-9f61-0f5b2b5c2d11'}, mdevs)

    def test_devices_in_use(self):
        conn = FakeConnection([FakeDomain('instance-1', XML),
                               FakeDomain('instance-2', '<domain/>')])
        users = domains.DomainInspector(lambda: conn).devices_in_use()
        self.assertEqual('instance-1', users['0000:81:00.1'])
        self.assertEqual(2, len(users))

    def test_devices_running(self):
        mdev = 'b5b1c7e2-4b5b-4e8c-9f61-0f5b2b5c2d11'
        stopped = XML.replace('instance-1', 'instance-3')
        conn = FakeConnection([FakeDomain('instance-3', stopped, active=0)])
        inspector = domains.DomainInspector(lambda: conn)
        self.assertEqual({}, inspector.devices_running())
        self.assertEqual('instance-3', inspector.devices_in_use()[mdev])
        conn.doms.append(FakeDomain('instance-1', XML))
        self.assertEqual('instance-1', inspector.devices_running()[mdev])

    def test_addresses_read_as_libvirt_reads_them(self):
        # strtoul with base 0: hex with 0x, octal with a leading 0, else
        # decimal (libvirt's virPCIDeviceAddressParseXML).
        xml = XML.replace("bus='0x81' slot='0x00' function='0x1'",
                          "bus='129' slot='010' function='1'")
        pci, _mdevs = domains.devices_in_xml(xml)
        self.assertEqual({'0000:81:08.1'}, pci)

    def test_running_guest_holds_its_saved_definition_too(self):
        # A device only in a running guest's saved definition (plugged to
        # the definition only, or a live detach the guest has not yet
        # acknowledged is the other way round): it is the guest's.
        live = XML.replace("function='0x1'", "function='0x3'")
        conn = FakeConnection([FakeDomain('instance-1', live, saved=XML)])
        users = domains.DomainInspector(lambda: conn).devices_running()
        self.assertEqual('instance-1', users['0000:81:00.1'])
        self.assertEqual('instance-1', users['0000:81:00.3'])
