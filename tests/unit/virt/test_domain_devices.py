"""Device keys read from a domain XML as libvirt reads it."""

from lxml import etree
import testtools

from nova_cyborg.virt import domain_devices as dd

HOSTDEV = """<hostdev mode='subsystem' type='pci' managed='yes'>
  <source><address domain='%s' bus='%s' slot='%s' function='%s'/></source>
</hostdev>"""


def _key(*parts):
    return dd.key_of(etree.fromstring(HOSTDEV % parts))


class KeyOfTest(testtools.TestCase):

    def test_hex_as_libvirt_writes_it(self):
        self.assertEqual(('pci', (0, 0x81, 0, 1)),
                         _key('0x0000', '0x81', '0x00', '0x1'))
        self.assertEqual(('pci', (0, 0x81, 0x1f, 7)),
                         _key('0X0000', '0X81', '0x1F', '0x7'))

    def test_without_0x_as_libvirt_reads_it(self):
        # strtoul with base 0 (virXMLPropUInt): decimal, or octal after a
        # leading 0; never hex.
        self.assertEqual(('pci', (0, 81, 8, 1)),
                         _key('0000', '81', '010', '1'))

    def test_unreadable_attributes_refused(self):
        for parts in (('0x0000', '0x8g', '0x00', '0x1'),
                      ('0000', '08', '00', '1'),  # 8 is no octal digit
                      ('0000', '', '00', '1')):
            self.assertRaises(dd.UnreadableDomain, _key, *parts)
        no_bus = etree.fromstring(
            "<hostdev type='pci'><source><address domain='0x0' slot='0x0' "
            "function='0x0'/></source></hostdev>")
        self.assertRaises(dd.UnreadableDomain, dd.key_of, no_bus)

    def test_linux_addresses_are_hex(self):
        self.assertEqual(('pci', (0, 0x81, 0, 1)),
                         dd.key_of_address('0000:81:00.1'))
