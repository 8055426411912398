"""What the real-libvirt tests share: a guest on the tests' own libvirtd
(tests.libvirt_real.fixture), the server it stands for, its ARQs."""

import uuid

import libvirt
from nova.compute import vm_states
from nova import context as nova_context
from nova import objects
from nova.virt.libvirt import guest as libvirt_guest
from oslo_config import fixture as config_fixture
import testtools

from nova_cyborg import conf
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import handoff
from nova_cyborg.virt import domain_devices
from tests.libvirt_real import fixture
from tests.unit.objects import test_accelerator_request as arqs

#: The name Cyborg knows the host by in the ARQs (tests.unit's fakes).
HOST = 'compute-1'


class TestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        fixture.require(self)
        self.flags = self.useFixture(config_fixture.Config(conf.CONF))
        self.flags.config(host=HOST)
        self.driver = fixture.driver()
        self.daemon = fixture.daemon()
        self.conn = self.driver._host.get_connection()
        self.context = nova_context.get_admin_context()
        self.instance = objects.Instance(
            context=self.context, uuid=str(uuid.uuid4()), host=HOST,
            node=HOST, vm_state=vm_states.ACTIVE, system_metadata={},
            flavor=objects.Flavor(extra_specs={
                bookkeeping.DP_EXTRA_SPEC: 'fpga-dp'}),
            pci_devices=objects.PciDeviceList(objects=[]))

    def define(self, devices='', name=None):
        """Define the server's guest (a TCG guest with no OS) with
        ``devices``; undefined (and stopped) after the test."""
        name = name or 'instance-%s' % self.instance.uuid[:8]
        domain = self.conn.defineXML(
            fixture.domain_xml(name, self.instance.uuid, devices))
        self.addCleanup(self._remove, domain)
        return libvirt_guest.Guest(domain)

    @staticmethod
    def _remove(domain):
        try:
            if domain.isActive():
                domain.destroy()
            domain.undefine()
        except libvirt.libvirtError:
            pass

    def bound(self, *arq_dicts):
        """What Cyborg answers for the server's ARQs during this request
        (as the compute manager leaves them for the driver: no Cyborg
        call is made)."""
        handoff.keep(self.context, self.instance.uuid, list(arq_dicts))

    @staticmethod
    def keys(xml):
        """The PCI functions and mdevs a domain XML passes through."""
        return domain_devices.keys_in(xml)

    @staticmethod
    def saved(guest):
        return guest.get_xml_desc(dump_inactive=True)

    @staticmethod
    def live(guest):
        return guest.get_xml_desc()


def pci(bus='0c', function='2', **info):
    """An ARQ of a PCI VF (``0000:<bus>:00.<function>``)."""
    arq = arqs.pci_arq(bus=bus, function=function, **info)
    arq['uuid'] = str(uuid.uuid4())
    return arq


def key(bus, function):
    return domain_devices.pci_key('0000', bus, '00', function)
