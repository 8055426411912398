"""Boot servers with accelerators through real Nova, Placement and Cyborg.

What each test checks is what a user or operator would: the server's
state and fault, the ``<hostdev>`` elements of its domain XML against the
host's PCI inventory, each ARQ's state, host and provider against the
Placement allocation, and that nothing is left behind.
"""

from nova.tests.functional.api import client as api_client

from tests.functional import base


class BootTestMixin(object):
    """Tests that hold for this project and for upstream Nova alike."""

    def _device_allocations(self, server_id):
        """{provider uuid: FPGA amount} of the server's allocation."""
        return {rp: alloc['resources']['FPGA']
                for rp, alloc in self.allocations(server_id).items()
                if 'FPGA' in alloc['resources']}

    def assert_accelerated(self, server, expected_arqs):
        """ACTIVE, one hostdev per ARQ with its BDF, ARQs bound right."""
        self.assertEqual('ACTIVE', server['status'])
        host = server['OS-EXT-SRV-ATTR:host']
        arqs = self.cyborg.list_arqs(server['id'])
        self.assertEqual(expected_arqs, len(arqs))
        device_allocs = self._device_allocations(server['id'])
        for arq in arqs:
            self.assertEqual('Bound', arq['state'])
            self.assertEqual(host, arq['hostname'])
            self.assertEqual(server['id'], arq['instance_uuid'])
            self.assertIn(arq['device_rp_uuid'], device_allocs)
            self.assertEqual('PCI', arq['attach_handle_type'])
        # Each provider's allocation matches the ARQs bound to it.
        per_rp = {}
        for arq in arqs:
            per_rp[arq['device_rp_uuid']] = per_rp.get(
                arq['device_rp_uuid'], 0) + 1
        self.assertEqual(device_allocs, per_rp)
        # The domain has exactly the ARQs' BDFs, each a real VF of the host.
        arq_bdfs = sorted(self.arq_bdf(arq) for arq in arqs)
        self.assertEqual(arq_bdfs, self.hostdev_bdfs(server))
        self.assertEqual(len(arq_bdfs), len(set(arq_bdfs)))
        self.assertTrue(set(arq_bdfs) <= self.handle_bdfs(host))
        return arqs

    def assert_nothing_left(self, server_id):
        self.assertEqual([], self.cyborg.list_arqs(server_id))
        self.assertEqual({}, self.allocations(server_id))

    def test_boot_and_delete(self):
        self.start_accel_compute('compute1')
        _name, flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}])
        server = self.boot(flavor)
        self.assert_accelerated(server, 1)

        self._delete_server(server)
        self.assert_nothing_left(server['id'])


class BootTest(BootTestMixin, base.AcceleratorTestBase):
    """The spine, through the patched Nova."""

    def test_two_accelerators_in_one_group(self):
        self.start_accel_compute('compute1', num_vfs=2)
        _name, flavor = self.create_profile_flavor([{'resources:FPGA': '2'}])
        server = self.boot(flavor)
        arqs = self.assert_accelerated(server, 2)
        self.assertEqual(1, len({arq['device_rp_uuid'] for arq in arqs}))

    def test_two_groups_and_forbidden_trait(self):
        # compute1: PF0 is Intel, PF1 is Xilinx. compute2: both Xilinx, so
        # only compute1 can serve group 0.
        self.start_accel_compute(
            'compute1', num_pfs=2, num_vfs=4,
            traits=[('CUSTOM_FPGA_INTEL',), ('CUSTOM_FPGA_XILINX',)])
        self.start_accel_compute(
            'compute2', num_pfs=2, num_vfs=4,
            traits=[('CUSTOM_FPGA_XILINX',), ('CUSTOM_FPGA_XILINX',)])
        _name, flavor = self.create_profile_flavor([
            {'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'},
            {'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'forbidden'},
        ])
        server = self.boot(flavor)
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        arqs = self.assert_accelerated(server, 2)
        rps = self.device_rp_uuids('compute1')
        intel_rp, xilinx_rp = (rps['compute1_' + pf]
                               for pf in self.pf_bdfs('compute1'))
        by_group = {arq['device_profile_group_id']: arq['device_rp_uuid']
                    for arq in arqs}
        self.assertEqual({0: intel_rp, 1: xilinx_rp}, by_group)

    def test_no_valid_host_leaves_no_arq(self):
        self.start_accel_compute('compute1')
        _name, flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_NOBODY': 'required'}])
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual([], self.cyborg.list_arqs())
        self.assertEqual({}, self.allocations(server['id']))

    def test_bind_failure_is_error_with_fault(self):
        # Cyborg knows compute1's handles as in use while Placement still
        # offers them: Cyborg refuses the bind, which on a first build
        # puts the server in ERROR with Cyborg's reason as the fault.
        self.start_accel_compute('compute1', report=False)
        self._report_handles_in_use('compute1')
        _name, flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1'}])
        server = self.boot(flavor, expected_state='ERROR')
        fault = self._get_fault_details(server)
        self.assertIn('Failed to bind accelerator requests: Cyborg answered '
                      'HTTP 404 to PATCH /accelerator_requests', fault)
        self.assertIn('AttachHandle not found', fault)
        self.assertEqual([], self.cyborg.list_arqs())
        self.assertEqual({}, self.allocations(server['id']))

    def _assert_create_refused(self, flavor, message):
        exc = self.assertRaises(
            api_client.OpenStackApiException, self.api.post_server,
            {'server': self._build_server(flavor_id=flavor,
                                          image_uuid=base.IMAGE,
                                          networks='none')})
        self.assertEqual(400, exc.response.status_code)
        self.assertIn(message, exc.response.text)
        self.assertEqual([], self.api.get_servers())
        self.assertEqual([], self.cyborg.list_arqs())

    def test_unknown_profile_is_refused(self):
        self.start_accel_compute('compute1')
        flavor = self._create_flavor(
            name='accel-missing',
            extra_spec={'accel:device_profile': 'no-such-profile'})
        self._assert_create_refused(flavor, 'no such device profile')

    def test_malformed_profile_is_refused(self):
        # Cyborg stores this profile; nova-cyborg refuses to schedule it.
        self.start_accel_compute('compute1')
        _name, flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1'},
             {'trait:CUSTOM_FPGA_INTEL': 'forbidden'}])
        self._assert_create_refused(
            flavor, 'group 1: a group must request at least one resource')

    def _report_handles_in_use(self, hostname):
        devices = self.hosts[hostname]
        for dev in devices:
            for dep in dev['deployables']:
                for handle in dep['attach_handles']:
                    handle['in_use'] = True
        self.cyborg.report_data(hostname, devices)

    def _get_fault_details(self, server):
        server = self.admin_api.get_server(server['id'])
        fault = server.get('fault', {})
        return fault.get('message', '') + fault.get('details', '')
