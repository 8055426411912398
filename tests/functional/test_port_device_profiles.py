"""Ports with a device profile (upstream's accelerator-direct ports).

A Neutron port of vnic_type ``accelerator-direct`` names a Cyborg device
profile (``device_profile``); nova-api turns it into a request group, the
conductor creates and binds its ARQ and records the ARQ's UUID in the
server's requested network (``NetworkRequest.arq_uuid``), and
nova-compute hands the ARQ's device to Neutron in the port's
``binding:profile`` (``arq_uuid``, ``pci_slot``, ``physical_network``,
nova/network/neutron.py ``_populate_neutron_binding_profile``): the guest
gets it as the port's ``<interface type='hostdev'>``, never as a bare
``<hostdev>``; only the flavor's ARQs are ``<hostdev>``s.

compute1's sidecar offers the VFs of fakelibvirt's SR-IOV NIC (8086:1528,
its generic PCI driver, ``physical_network = physnet4``: the attach
handles name the network, the providers carry ``CUSTOM_PHYSNET4``). The
port is on Nova's Neutron fixture's physnet4 network. A user boots with
the port alone and with a flavor profile too; an operator checks the ARQs,
the port, the domain and Placement, and that a delete leaves nothing.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import json  # noqa: E402
from xml.etree import ElementTree  # noqa: E402

from nova.tests.functional.libvirt import base as libvirt_base  # noqa: E402

NEUTRON = libvirt_base.LibvirtNeutronFixture
PHYSNET = 'physnet4'
#: The NIC's VFs, by their PF's ids (fakelibvirt's PF_PROD_ID).
SPEC = {'vendor_id': '8086', 'product_id': '1528',
        'physical_network': PHYSNET}
PROFILE = [{'resources:CUSTOM_PCI': '1',
            'trait:CUSTOM_PHYSNET4': 'required'}]


class PortDeviceProfileTest(base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        self.neutron = self.useFixture(NEUTRON(self))
        self.start_accel_compute(
            'compute1', drivers=('pci',), plain_pfs=True,
            extra_config='[pci]\ndevice_spec = %s' % json.dumps(SPEC))
        self.dp, self.flavor = self.create_profile_flavor(PROFILE)
        self.port = self.neutron.create_port({'port': dict(
            NEUTRON.network_4_port_1, **{
                'binding:vnic_type': 'accelerator-direct',
                'binding:vif_type': 'hw_veb',
                'device_profile': self.dp})})['port']

    def boot_with_port(self, flavor_id=None):
        # The port is the Neutron fixture's project's: its user boots.
        return self._create_server(
            flavor_id=flavor_id, image_uuid=base.IMAGE,
            networks=[{'port': self.port['id']}])

    def interface_bdfs(self, server):
        """The PCI addresses of the guest's ``<interface type='hostdev'>``s
        (fakelibvirt writes them as ``<source hostdev='pci_...'/>``)."""
        root = ElementTree.fromstring(self.domain_xml(server))
        return sorted(
            base.bdf_of(el.find('./source').get('hostdev'))
            for el in root.findall('./devices/interface[@type="hostdev"]'))

    def binding_profile(self):
        return self.neutron.show_port(self.port['id'])['port'].get(
            'binding:profile', {})

    def assert_port_accelerated(self, server, n_flavor_arqs):
        """ACTIVE; the port's ARQ Bound, its device the port's interface
        and in its binding profile; a unit allocated per ARQ on its
        provider. Returns (the port's ARQ, the flavor's ARQs)."""
        server = self.admin_api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        arqs = self.cyborg.list_arqs(server['id'])
        self.assertEqual(1 + n_flavor_arqs, len(arqs))
        self.assertEqual({('Bound', 'compute1', self.dp)},
                         {(a['state'], a['hostname'],
                           a['device_profile_name']) for a in arqs})
        profile = self.binding_profile()
        (port_arq,) = [a for a in arqs if a['uuid'] ==
                       profile.get('arq_uuid')]
        flavor_arqs = [a for a in arqs if a is not port_arq]
        self.assertEqual(
            {'arq_uuid': port_arq['uuid'],
             'pci_slot': self.arq_bdf(port_arq),
             'physical_network': PHYSNET},
            {k: profile.get(k) for k in ('arq_uuid', 'pci_slot',
                                         'physical_network')})
        self.assertEqual([self.arq_bdf(port_arq)],
                         self.interface_bdfs(server))
        per_rp = {}
        for arq in arqs:
            per_rp[arq['device_rp_uuid']] = per_rp.get(
                arq['device_rp_uuid'], 0) + 1
        self.assertEqual(
            {rp: {'CUSTOM_PCI': n} for rp, n in per_rp.items()},
            {rp: alloc['resources'] for rp, alloc in self.allocations(
                server['id']).items() if rp in per_rp})
        return port_arq, flavor_arqs

    def assert_hostdevs(self, server, flavor_arqs):
        """The guest's ``<hostdev>``s are the flavor's ARQs' devices only
        (the port's is its interface)."""
        self.assertEqual(sorted(self.arq_bdf(a) for a in flavor_arqs),
                         self.hostdev_bdfs(server))

    def assert_deleted_leaves_nothing(self, server):
        self._delete_server(server)
        self.assert_nothing_left(server['id'])
        profile = self.binding_profile()
        self.assertNotIn('arq_uuid', profile)
        self.assertNotIn('pci_slot', profile)

    def test_port_alone(self):
        server = self.boot_with_port(self._create_flavor(name='plain'))
        arqs = self.assert_port_accelerated(server, 0)
        self.assert_hostdevs(server, arqs[1])
        # Restarted, the guest has the same device, as the port's only.
        self._reboot_server(server, hard=True)
        self.assertEqual(arqs, self.assert_port_accelerated(server, 0))
        self._stop_server(server)
        self._start_server(server)
        self.assertEqual(arqs, self.assert_port_accelerated(server, 0))
        self.assert_hostdevs(server, [])
        self.assert_deleted_leaves_nothing(server)

    def test_port_and_flavor_profile(self):
        server = self.boot_with_port(self.flavor)
        _port_arq, flavor_arqs = self.assert_port_accelerated(server, 1)
        # The guest-device guard leaves the port's ARQ to the port's
        # interface: the guest holds the flavor's device as a <hostdev>
        # and the port's VF once, as its interface (real libvirt refuses
        # a function assigned twice).
        self.assert_hostdevs(server, flavor_arqs)
        self.assert_deleted_leaves_nothing(server)
