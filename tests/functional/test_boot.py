"""Boot servers with accelerators through real Nova, Placement and Cyborg.

What each test checks is what a user or operator would: the server's
state and fault, the ``<hostdev>`` elements of its domain XML against the
host's PCI inventory, each ARQ's state, host and provider against the
Placement allocation, and that nothing is left behind.
"""

import json

import fixtures
from nova.tests.functional.api import client as api_client

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception as nc_exception
from tests.functional import base


class BootTestMixin(object):
    """Tests that hold for this project and for upstream Nova alike."""

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
        # Two VFs from one provider: the generic PCI driver reports a PF
        # with its VFs as one (a DFL card's ports are a provider each).
        self.start_accel_compute(
            'compute1', num_vfs=2, drivers=('pci',),
            extra_config='[pci]\ndevice_spec = %s' % json.dumps(
                {'vendor_id': self.FPGA_VENDOR, 'resource_class': 'FPGA'}))
        _name, flavor = self.create_profile_flavor([{'resources:FPGA': '2'}])
        server = self.boot(flavor)
        arqs = self.assert_accelerated(server, 2)
        self.assertEqual(1, len({arq['device_rp_uuid'] for arq in arqs}))

    def test_two_groups_and_forbidden_trait(self):
        # compute1: PF0 is Intel, PF1 is Xilinx. compute2: both Xilinx, so
        # only compute1 can serve group 0.
        self.start_accel_compute(
            'compute1', num_pfs=2, num_vfs=4,
            vendors=['8086', '10ee'])
        self.start_accel_compute(
            'compute2', num_pfs=2, num_vfs=4,
            vendors=['10ee', '10ee'])
        _name, flavor = self.create_profile_flavor([
            {'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'},
            {'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'forbidden'},
        ])
        server = self.boot(flavor)
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        arqs = self.assert_accelerated(server, 2)
        rps = self.device_rp_uuids('compute1')
        intel_pf, xilinx_pf = self.pf_bdfs('compute1')
        intel_rps = {rps[name] for name in
                     self.fpga_providers('compute1', intel_pf)}
        (xilinx_rp,) = (rps[name] for name in
                        self.fpga_providers('compute1', xilinx_pf))
        by_group = {arq['device_profile_group_id']: arq['device_rp_uuid']
                    for arq in arqs}
        self.assertIn(by_group[0], intel_rps)
        self.assertEqual(xilinx_rp, by_group[1])

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
        self.start_accel_compute('compute1', sidecar=False)
        self.report_via_harness('compute1', in_use=True)
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

    def _get_fault_details(self, server):
        server = self.admin_api.get_server(server['id'])
        fault = server.get('fault', {})
        return fault.get('message', '') + fault.get('details', '')


class MultiCreateTest(base.AcceleratorTestBase):
    """``--min/--max`` when each provider holds only part of the total
    (upstream bug 1874664)."""

    def test_two_servers_on_two_providers(self):
        # Two FPGAs with one VF each: each server needs its own provider.
        self.start_accel_compute('compute1', num_pfs=2, num_vfs=2)
        _name, flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}])
        body = self._build_server(flavor_id=flavor, image_uuid=base.IMAGE,
                                  networks='none')
        body['min_count'] = body['max_count'] = 2
        self.api.post_server({'server': body})
        servers = self.api.get_servers()
        self.assertEqual(2, len(servers))
        servers = [self._wait_for_state_change(s, 'ACTIVE') for s in servers]
        arqs = [self.assert_accelerated(s, 1)[0] for s in servers]
        self.assertEqual(2, len({a['device_rp_uuid'] for a in arqs}))
        self.assertEqual(2, len({self.arq_bdf(a) for a in arqs}))
        for server in servers:
            self._delete_server(server)
            self.assertEqual([], self.cyborg.list_arqs(server['id']))
            self.assertEqual({}, self.allocations(server['id']))

    def test_one_bind_failing_leaves_the_other_server_whole(self):
        self.start_accel_compute('compute1', num_pfs=2, num_vfs=2)
        _name, flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}])
        real = nc_client.CyborgClient.bind_arqs
        calls = []

        def bind_arqs(cyclient, bindings):
            calls.append(bindings)
            if len(calls) == 1:
                raise nc_exception.AcceleratorRequestBindingFailed(
                    arqs=list(bindings), msg='injected: HTTP 503')
            return real(cyclient, bindings)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))
        body = self._build_server(flavor_id=flavor, image_uuid=base.IMAGE,
                                  networks='none')
        body['min_count'] = body['max_count'] = 2
        self.api.post_server({'server': body})

        ids = [s['id'] for s in self.api.get_servers(detail=False)]
        self.assertEqual(2, len(ids))

        def built():
            servers = [self.api.get_server(i) for i in ids]
            self.assertNotIn('BUILD', [s['status'] for s in servers])
            return servers
        servers = self._wait_for_assert(built, max_retries=40)
        by_status = {s['status']: s for s in servers}
        self.assertEqual({'ACTIVE', 'ERROR'}, set(by_status))
        failed = by_status['ERROR']
        self.assertIn('injected: HTTP 503', failed['fault']['message'])
        self.assert_nothing_left(failed['id'])
        self.assert_accelerated(by_status['ACTIVE'], 1)
        for server in servers:
            self._delete_server(server)
            self.assert_nothing_left(server['id'])
