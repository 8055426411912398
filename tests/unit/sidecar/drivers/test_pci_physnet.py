"""``[pci] device_spec`` ``physical_network``: NIC VFs name their Neutron
physical network in the attach_info that Nova reads."""

import json

from nova_cyborg.model.objects import accelerator_request
from sidecar import exception
from sidecar.drivers import pci
from tests.unit.sidecar import simhost

PF = '0000:81:00.0'


class PhysnetTest(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        # An E810 PF (8086:1592) with its VFs (8086:1889).
        self.source = self.write(self.host(pfs=[
            {'product_id': '1592', 'num_vfs': 2, 'vf_product_id': '1889'}]))

    def deployable(self, spec):
        self.config.config(group='pci', device_spec=[json.dumps(spec)])
        (device,) = pci.PciDriver(self.conf, self.source).discover()
        return device.deployables[0]

    def handles(self, spec):
        return self.deployable(spec).attach_handles

    def test_physnet_trait_as_cyborgs_nic_driver_names_it(self):
        dep = self.deployable({'address': PF,
                               'physical_network': 'physnet-a.1'})
        self.assertIn('CUSTOM_PHYSNET_A_1', dep.traits)
        self.assertNotIn('CUSTOM_PHYSNET_A_1', self.deployable(
            {'address': PF}).traits)

    def test_vfs_carry_the_physical_network(self):
        handles = self.handles({'vendor_id': '8086', 'product_id': '1592',
                                'physical_network': 'physnet1'})
        self.assertEqual(2, len(handles))
        for index, handle in enumerate(handles):
            info = handle.attach_info()
            self.assertEqual({'domain': '0000', 'bus': '81',
                              'device': '00', 'function': str(index + 1),
                              'physical_network': 'physnet1'}, info)
            # What nova-compute makes of it, as Cyborg hands it back.
            parsed = accelerator_request.AttachHandle.from_cyborg(
                {'attach_handle_type': 'PCI', 'attach_handle_info': info,
                 'attach_handle_uuid': None}, 'arq1')
            self.assertEqual('physnet1', parsed.physical_network)

    def test_without_it_no_key(self):
        for handle in self.handles({'address': PF}):
            self.assertNotIn('physical_network', handle.attach_info())

    def test_bad_names_are_refused_naming_the_entry(self):
        for bad in ('', 'phys net', '../x', 'a..b', 5, 'x' * 65, '-x'):
            spec = json.dumps({'address': PF, 'physical_network': bad})
            error = self.assertRaises(exception.InvalidArgument,
                                      pci.parse_device_specs, [spec])
            self.assertIn('physical_network %r is not a physical network '
                          'name' % (bad,), str(error))
            self.assertIn(spec, str(error))
