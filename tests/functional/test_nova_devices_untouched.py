"""Do no harm: Nova's own PCI devices on patched computes.

Servers without any accelerator of this project get PCI devices from Nova
itself: a flavor's ``pci_passthrough:alias`` (a plain PCI device of
``[pci] device_spec``, or a VF marked ``live_migratable``) and SR-IOV
ports, a ``direct`` port (a VF, an ``<interface type='hostdev'>``) and a
``direct-physical`` one (a PF, a ``<hostdev>``), bound through Nova's
Neutron fixture as in upstream's SRIOVServersTest. Two patched computes,
each with those devices in Nova's fakelibvirt
(:mod:`tests.functional.harness.nova_devices`).

The owner reboots, stops and starts, rescues and unrescues; the cloud
admin cold-migrates (confirmed) and live-migrates back where Nova can.
After each step the server is ACTIVE where it should be, its guest holds
exactly the devices Nova allocated to it (the ports' binding profiles name
the same), its allocation is on its host only, and the guest-device guard
never removed or added anything.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402
from nova.tests.functional.libvirt import base as libvirt_base  # noqa: E402

from tests.functional.harness import nova_devices  # noqa: E402
from tests.functional import live_base  # noqa: E402

PLAIN, PF, VF = (fakelibvirt.PCI_PROD_ID, fakelibvirt.PF_PROD_ID,
                 fakelibvirt.VF_PROD_ID)
NEUTRON = libvirt_base.LibvirtNeutronFixture


class NovaPciUntouchedTest(nova_devices.NovaDevicesSteps,
                           live_base.LiveMigrationBase):

    ADDITIONAL_FILTERS = ['PciPassthroughFilter']

    def setUp(self):
        super().setUp()
        nova_devices.configure_pci(self)
        # Nova's Neutron fixture with the SR-IOV network (physnet4), as
        # upstream's SRIOVServersTest.
        self.neutron = self.useFixture(NEUTRON(self))
        # Cold migration: no instance directory to move aside.
        self.useFixture(fixtures.MockPatch('os.rename'))
        # A VF's detach before a live migration is answered at once.
        self.flags(device_detach_timeout=1, group='libvirt')
        for slot, host in enumerate(self.HOSTS):
            self.start_compute(hostname=host,
                               pci_info=nova_devices.pci_host_info(slot))

    def test_flavor_alias(self):
        flavor = self._create_flavor(
            extra_spec={'pci_passthrough:alias': nova_devices.ALIAS + ':1'})
        with self.acting(self.owner_api):
            server = self._create_server(flavor_id=flavor,
                                         image_uuid=base.IMAGE,
                                         networks='none')

        def check(server, hostname):
            return self.assert_nova_pci(server, hostname, [PLAIN])[PLAIN]
        # A plain PCI device does not live-migrate (Nova refuses it).
        self.walk(server, self.owner_api, check, live_migrate=False)
        self.assert_freed(server)

    def test_live_migratable_vf_alias(self):
        """A VF by alias, live-migratable (Nova's VFIO migration of
        devices ``live_migratable`` in ``[pci] device_spec``)."""
        flavor = self._create_flavor(extra_spec={
            'pci_passthrough:alias': nova_devices.VF_ALIAS + ':1'})
        with self.acting(self.owner_api):
            server = self._create_server(flavor_id=flavor,
                                         image_uuid=base.IMAGE,
                                         networks='none')
        src = self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']
        dst = (set(self.HOSTS) - {src}).pop()
        self.assert_nova_pci(server, src, [VF])
        self.admin_live_migrates(server)
        self.assert_nova_pci(server, dst, [VF])
        self.assert_freed(server)

    def port(self, template):
        return self.neutron.create_port({'port': template})['port']

    def port_check(self, ports):
        """The check of a server with SR-IOV ports {product id: port}: the
        devices Nova allocated, each port's binding profile naming its
        device."""
        def check(server, hostname):
            devices = self.assert_nova_pci(server, hostname, list(ports))
            self.assertEqual(
                {p['id']: devices[product] for product, p in ports.items()},
                {p['id']: self.neutron.show_port(p['id'])['port'][
                    'binding:profile'].get('pci_slot')
                 for p in ports.values()})
            return devices
        return check

    def boot_with_ports(self, ports):
        # The ports are the Neutron fixture's project's: its user boots.
        return self._create_server(
            image_uuid=base.IMAGE,
            networks=[{'port': p['id']} for p in ports.values()])

    def assert_ports_unbound(self, ports):
        for port in ports.values():
            self.assertNotIn('pci_slot', self.neutron.show_port(
                port['id'])['port'].get('binding:profile', {}))

    def test_sriov_ports(self):
        ports = {VF: self.port(NEUTRON.network_4_port_1),
                 PF: self.port(NEUTRON.network_4_port_pf)}
        server = self.boot_with_ports(ports)
        # fakelibvirt writes an <interface type='hostdev'> back as <source
        # hostdev='pci_...'/>, without the address libvirt writes: Nova
        # cannot find it in the guest to detach it before a live
        # migration, nor can fakelibvirt read it back from the XML
        # unrescue defines. Neither step is walked with a VF port; the
        # PF's <hostdev> is (test_direct_physical_port_live_migrates, and
        # rescue as the flavor alias's device).
        self.walk(server, self.api, self.port_check(ports),
                  live_migrate=False, rescue=False)
        self.assert_freed(server)
        self.assert_ports_unbound(ports)

    def test_direct_physical_port_live_migrates(self):
        ports = {PF: self.port(NEUTRON.network_4_port_pf)}
        server = self.boot_with_ports(ports)
        check = self.port_check(ports)
        src = server['OS-EXT-SRV-ATTR:host']
        dst = (set(self.HOSTS) - {src}).pop()
        check(server, src)
        self.admin_live_migrates(server)
        check(server, dst)
        self.assert_freed(server)
        self.assert_ports_unbound(ports)

    def assert_freed(self, server):
        """Deleted: no allocation, no PCI device of Nova's left to it
        once the hosts audited their resources (a host that got the
        server by a move tracks it from its first audit on)."""
        self._delete_server(server)
        self.assertEqual({}, self.allocations(server['id']))
        for compute in self.computes.values():
            compute.manager.update_available_resource(
                nova_context.get_admin_context())
        self.assertEqual([], self.nova_pci(server))
