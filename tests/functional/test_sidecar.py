"""The sidecar against the real cyborg-conductor, Placement and Nova.

What a deployer checks after replacing cyborg-agent: the providers,
inventories and traits each driver produces; that an unchanged host sends
nothing; that a boot asking for a bitstream programs the FPGA and ends
ACTIVE with the new function trait; and that two boots asking different
functions of one single-program FPGA never reprogram it under a server.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import json  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from xml.etree import ElementTree  # noqa: E402

import fixtures  # noqa: E402
from nova.virt.libvirt import driver as libvirt_driver  # noqa: E402

from tests.functional.harness import cyborg_fixture  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

F_A = 'a1a1a1a1b2b2b2b2c3c3c3c3d4d4d4d4'
F_B = 'f0f0f0f01e1e1e1e2d2d2d2d3c3c3c3c'
F_OLD = '00000000000000000000000000000abc'


def function_trait(function_id, vendor='INTEL'):
    return 'CUSTOM_FPGA_FUNCTION_ID_%s_%s' % (vendor, function_id.upper())


class SidecarTestBase(base.AcceleratorTestBase):

    def provider(self, name):
        rp = self.placement.get(
            '/resource_providers?name=%s' % name,
            version='1.14').body['resource_providers']
        self.assertEqual(1, len(rp), name)
        return rp[0]

    def inventory(self, name):
        uuid = self.provider(name)['uuid']
        return self.placement.get(
            '/resource_providers/%s/inventories' % uuid,
            version='1.26').body['inventories']

    def traits(self, name):
        uuid = self.provider(name)['uuid']
        return set(self.placement.get(
            '/resource_providers/%s/traits' % uuid,
            version='1.6').body['traits'])

    def programmed(self, hostname):
        """(address, function id) of every programming job on a host."""
        log = os.path.join(
            os.path.dirname(self.sidecars[hostname].sysfs_root),
            'programmed.log')
        if not os.path.exists(log):
            return []
        with open(log) as f:
            return [tuple(line.split()[1:]) for line in f]

    def loaded(self, hostname, address):
        """The afu_id of the port reached through ``address``; while a
        guest holds that function (on vfio-pci, dfl-pci's devices gone:
        sidecar_simulator.kernel) what the FPGA loaded."""
        host = self.hosts[hostname]
        try:
            with open(host.afu_id_path(address)) as f:
                return f.read().strip()
        except FileNotFoundError:
            self.assertEqual('vfio-pci', host.functions[address].driver)
            card, index = host.dfl.find_port(address)
            return card.ports[index].afu_id


class ReportTest(SidecarTestBase):

    def test_fpga_providers_inventories_traits(self):
        # PF0 an Intel DFL card whose two ports are released to its VFs,
        # PF1 an Alveo card (its management PF; the user PF is attached).
        self.start_accel_compute('compute1', num_pfs=2, num_vfs=4,
                                 vendors=['8086', '10ee'],
                                 function_ids=[F_OLD, None])
        intel_pf, xilinx_pf = self.pf_bdfs('compute1')
        ports = self.fpga_providers('compute1', intel_pf)
        (xilinx,) = self.fpga_providers('compute1', xilinx_pf)
        self.assertEqual(2, len(ports))
        for name in ports + [xilinx]:
            inv = self.inventory(name)['FPGA']
            self.assertEqual((1, 1, 0), (inv['total'], inv['max_unit'],
                                         inv['reserved']))
        for intel in ports:
            self.assertTrue({'OWNER_CYBORG', 'CUSTOM_FPGA_INTEL',
                             function_trait(F_OLD)} <= self.traits(intel))
        xilinx_traits = self.traits(xilinx)
        self.assertIn('CUSTOM_FPGA_XILINX', xilinx_traits)
        self.assertFalse([t for t in xilinx_traits
                          if t.startswith('CUSTOM_FPGA_FUNCTION_ID')])
        # The providers hang under the compute node's provider.
        compute_rp = self._get_provider_uuid_by_host('compute1')
        self.assertEqual(compute_rp,
                         self.provider(ports[0])['parent_provider_uuid'])
        # Cyborg holds the devices, deployables and attach handles.
        deployables = {d['name']: d for d in self.cyborg.list_deployables()}
        self.assertEqual(set(ports) | {xilinx}, set(deployables))
        self.assertEqual(1, deployables[ports[0]]['num_accelerators'])

    def test_gpu_providers(self):
        self.start_accel_compute('compute1', num_mdevcap=2,
                                 drivers=('gpu', 'fpga'),
                                 mdev_types=('nvidia-11',))
        gpus = sorted(f.address for f in self.hosts['compute1'].functions
                      .values() if f.mdev_types)
        for gpu in gpus:
            name = 'compute1_' + gpu
            inv = self.inventory(name)
            self.assertEqual(['VGPU'], list(inv))
            self.assertEqual(16, inv['VGPU']['total'])
            self.assertIn('OWNER_CYBORG', self.traits(name))
        # The FPGAs are still reported beside them.
        for pf in self.pf_bdfs('compute1'):
            for name in self.fpga_providers('compute1', pf):
                self.assertIn('FPGA', self.inventory(name))

    def test_pci_device_spec(self):
        spec = {'vendor_id': '8086', 'product_id': '1528',
                'resource_class': 'CUSTOM_QAT', 'traits': ['qat-c62x']}
        self.start_accel_compute(
            'compute1', drivers=('pci',), plain_pfs=True,
            extra_config='[pci]\ndevice_spec = %s' % json.dumps(spec))
        (pf,) = [f.address for f in self.hosts['compute1'].functions.values()
                 if f.virtfns]
        name = 'compute1_' + pf
        self.assertEqual(2, self.inventory(name)['CUSTOM_QAT']['total'])
        self.assertLessEqual({'OWNER_CYBORG', 'CUSTOM_QAT_C62X',
                              'CUSTOM_PCI_8086',
                              'CUSTOM_PCI_PRODUCT_ID_1515'},
                             self.traits(name))

    def test_unchanged_sends_nothing_and_changes_are_reported(self):
        self.start_accel_compute('compute1', num_vfs=4, num_pfs=1)
        sidecar = self.sidecars['compute1']
        self.assertFalse(sidecar.cycle())
        (pf,) = self.pf_bdfs('compute1')
        names = self.fpga_providers('compute1', pf)
        self.assertEqual(4, len(names))
        host = self.hosts['compute1']
        # A function is loaded out of band in port 0: its trait follows,
        # the other ports' do not change.
        vf = host.functions[pf].virtfns[0]
        host.set_function_id(vf, F_A)
        self.assertTrue(sidecar.cycle())
        self.assertIn(function_trait(F_A), self.traits(names[0]))
        self.assertNotIn(function_trait(F_A), self.traits(names[1]))
        host.set_function_id(vf, F_B)
        self.assertTrue(sidecar.cycle())
        traits = self.traits(names[0])
        self.assertIn(function_trait(F_B), traits)
        self.assertNotIn(function_trait(F_A), traits)
        self.assertIn('CUSTOM_FPGA_INTEL', traits)
        self.assertFalse(sidecar.cycle())

    def test_resync_after_the_conductor_comes_back(self):
        # cyborg-conductor dies and comes back with an empty database: the
        # report that failed meanwhile is sent again, whole.
        self.start_accel_compute('compute1', num_vfs=4, num_pfs=1,
                                 rpc_timeout=3)
        (pf,) = self.pf_bdfs('compute1')
        names = self.fpga_providers('compute1', pf)
        self.cyborg.stop()
        host = self.hosts['compute1']
        host.set_function_id(pf, F_A)
        self.assertFalse(self.sidecars['compute1'].cycle())
        self.cyborg = self.useFixture(cyborg_fixture.CyborgFixture(
            self.placement_url, self.nova_url,
            transport_url=self.broker.transport_url))
        self.assertTrue(self.sidecars['compute1'].cycle())
        self.assertEqual(sorted(names), sorted(
            d['name'] for d in self.cyborg.list_deployables()))
        for name in names:
            self.assertEqual(1, self.inventory(name)['FPGA']['total'])
            self.assertIn(function_trait(F_A), self.traits(name))


class ProgramTest(SidecarTestBase):

    def _profile(self, function_id):
        image = self.create_bitstream(function_id)
        return self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:bitstream_id': image}])[1]

    def test_boot_programs_the_fpga(self):
        # A card with two ports, each released to its VF: the server's
        # port is programmed, the other keeps what it had.
        self.start_glance()
        flavor = self._profile(F_A)
        self.start_accel_compute('compute1', function_ids=[F_OLD])
        server = self.boot(flavor)
        self.assert_accelerated(server, 1)
        (vf,) = self.hostdev_bdfs(server)
        (other,) = self.handle_bdfs('compute1') - {vf}
        name = 'compute1_' + vf
        self.assertEqual(F_A, self.loaded('compute1', vf))
        self.assertEqual(F_OLD, self.loaded('compute1', other))
        self.assertEqual([(vf, F_A)], self.programmed('compute1'))
        traits = self.traits(name)
        self.assertIn(function_trait(F_A), traits)
        self.assertNotIn(function_trait(F_OLD), traits)
        self.assertIn(function_trait(F_OLD),
                      self.traits('compute1_' + other))
        self.assertEqual(0, self.inventory(name)['FPGA']['reserved'])
        # The sidecar's next report agrees with what the conductor wrote.
        self.sidecars['compute1'].cycle()
        self.assertIn(function_trait(F_A), self.traits(name))
        self._delete_server(server)
        self.assert_nothing_left(server['id'])

    def _boot_both(self, flavor_a, flavor_b):
        """Create two servers at once; wait until neither is building."""
        servers = [self.api.post_server({'server': self._build_server(
            flavor_id=flavor, image_uuid=base.IMAGE, networks='none',
            name='server-%d' % i)})
            for i, flavor in enumerate((flavor_a, flavor_b))]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            servers = [self.api.get_server(s['id']) for s in servers]
            if all(s['status'] in ('ACTIVE', 'ERROR') for s in servers):
                return servers
            time.sleep(0.2)
        self.fail('servers still building: %s' % servers)

    def test_two_functions_two_hosts(self):
        # Both servers are first sent to compute1 (more RAM), whose card
        # has one port: one is served there, the other on compute2's.
        self.start_glance()
        flavor_a, flavor_b = self._profile(F_A), self._profile(F_B)
        self.start_accel_compute('compute1', memory_gb=32, num_vfs=1)
        self.start_accel_compute('compute2', memory_gb=16, num_vfs=1)
        servers = self._boot_both(flavor_a, flavor_b)
        self.assertEqual(['ACTIVE', 'ACTIVE'],
                         [s['status'] for s in servers])
        hosts = [s['OS-EXT-SRV-ATTR:host'] for s in servers]
        self.assertEqual({'compute1', 'compute2'}, set(hosts))
        for server, host, function_id in zip(servers, hosts, (F_A, F_B)):
            (vf,) = self.handle_bdfs(host)
            self.assertEqual(function_id, self.loaded(host, vf))
            # Programmed once: never under the other server.
            self.assertEqual([(vf, function_id)], self.programmed(host))
            self.assertIn(function_trait(function_id),
                          self.traits(host + '_' + vf))
            self.assertEqual(
                0, self.inventory(host + '_' + vf)['FPGA']['reserved'])
            self.assert_accelerated(server, 1)

    def test_two_functions_one_host(self):
        # Each port of a card is programmed on its own: two servers asking
        # two functions at once each get a port holding theirs.
        self.start_glance()
        flavor_a, flavor_b = self._profile(F_A), self._profile(F_B)
        self.start_accel_compute('compute1')
        servers = self._boot_both(flavor_a, flavor_b)
        self.assertEqual(['ACTIVE', 'ACTIVE'],
                         [s['status'] for s in servers])
        want = []
        for server, function_id in zip(servers, (F_A, F_B)):
            (vf,) = self.hostdev_bdfs(server)
            self.assertEqual(function_id, self.loaded('compute1', vf))
            self.assertIn(function_trait(function_id),
                          self.traits('compute1_' + vf))
            want.append((vf, function_id))
        self.assertEqual(2, len({vf for vf, _f in want}))
        self.assertEqual(sorted(want), sorted(self.programmed('compute1')))

    def test_never_reprogrammed_under_a_running_server(self):
        # One port, used: a server asking another function finds no room
        # and the port keeps the running server's function.
        self.start_glance()
        flavor_a, flavor_b = self._profile(F_A), self._profile(F_B)
        self.start_accel_compute('compute1', num_vfs=1)
        (vf,) = self.handle_bdfs('compute1')
        first = self.boot(flavor_a)
        second = self.boot(flavor_b, expected_state='ERROR')
        self.assertEqual(F_A, self.loaded('compute1', vf))
        self.assertEqual([(vf, F_A)], self.programmed('compute1'))
        self.assertEqual('ACTIVE', self.api.get_server(first['id'])['status'])
        self.assertEqual([], self.cyborg.list_arqs(second['id']))
        self.assertEqual({}, self.allocations(second['id']))


class VgpuTest(SidecarTestBase):

    def test_boot_with_a_vgpu(self):
        self.start_accel_compute('compute1', num_mdevcap=1,
                                 drivers=('gpu', 'fpga'),
                                 mdev_types=('nvidia-11',))
        (gpu,) = [f.address for f in self.hosts['compute1'].functions
                  .values() if f.mdev_types]
        _name, flavor = self.create_profile_flavor([{'resources:VGPU': '1'}])
        server = self.boot(flavor)
        (arq,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual(('Bound', 'MDEV'),
                         (arq['state'], arq['attach_handle_type']))
        self.assertEqual(gpu, self.arq_bdf(arq))
        self.assertEqual('nvidia-11', arq['attach_handle_info']['asked_type'])
        # The sidecar created the mdev the ARQ names, on the right GPU.
        create = os.path.join(
            self.sidecars['compute1'].sysfs_root, 'class', 'mdev_bus', gpu,
            'mdev_supported_types', 'nvidia-11', 'create')
        with open(create) as f:
            self.assertEqual(arq['attach_handle_uuid'], f.read().strip())
        # And the domain has it.
        root = ElementTree.fromstring(self.domain_xml(server))
        uuids = [a.get('uuid') for a in root.findall(
            './devices/hostdev[@type="mdev"]/source/address')]
        self.assertEqual([arq['attach_handle_uuid']], uuids)
        self.assertEqual({'VGPU': 1}, {
            rc: n for alloc in self.allocations(server['id']).values()
            for rc, n in alloc['resources'].items() if rc == 'VGPU'})
        self._delete_server(server)
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        self.assertEqual({}, self.allocations(server['id']))


class SpawnGate(fixtures.Fixture):
    """Holds nova-compute's spawn of servers named ``name``: their ARQs
    are bound and their allocations made, and no domain exists yet, until
    :meth:`release`."""

    def __init__(self, name):
        super().__init__()
        self.name = name
        self.entered = threading.Event()
        self.gate = threading.Event()

    def _setUp(self):
        real = libvirt_driver.LibvirtDriver.spawn
        gate = self

        def spawn(driver, context, instance, *args, **kwargs):
            if instance.display_name == gate.name:
                gate.entered.set()
                gate.gate.wait(waits.DEADLINE)
            return real(driver, context, instance, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.spawn', spawn))
        self.addCleanup(self.release)

    def wait_entered(self):
        waits.wait_until(self.entered.is_set,
                         'the spawn of %s to be reached' % self.name)

    def release(self):
        self.gate.set()


class PromiseTest(SidecarTestBase):
    """Seed 004: the allocation is the promise."""

    def _profile(self, function_id):
        image = self.create_bitstream(function_id)
        return self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:bitstream_id': image}])[1]

    def test_bound_server_not_programmed_for_keeps_its_function(self):
        # A server bound to a card that already holds its bitstream is
        # not programmed for: cyborg-conductor skips the sidecar ("already
        # has the needed bitstream"). Until it has spawned, only its
        # Placement allocation says the port is promised to it; no other
        # server may be given, or program, that port meanwhile.
        self.start_glance()
        flavor_a, flavor_b = self._profile(F_A), self._profile(F_B)
        self.start_accel_compute('compute1', num_vfs=1)
        (pf,) = self.handle_bdfs('compute1')
        sidecar = self.sidecars['compute1']
        first = self.boot(flavor_b)
        self.assertEqual([(pf, F_B)], self.programmed('compute1'))
        # Cycles: before seed 004's fix they ended the timed promise of
        # the first server's programming once its domain was gone.
        sidecar.cycle()
        self._delete_server(first)
        sidecar.cycle()
        gate = self.useFixture(SpawnGate('held'))
        held = self.api.post_server({'server': self._build_server(
            flavor_id=flavor_b, image_uuid=base.IMAGE, networks='none',
            name='held')})
        gate.wait_entered()
        (arq,) = self.cyborg.list_arqs(held['id'])
        self.assertEqual('Bound', arq['state'])
        # Not programmed for: still the one programming of the first.
        self.assertEqual([(pf, F_B)], self.programmed('compute1'))
        self.assertEqual({'FPGA': 1}, {
            rc: n for alloc in self.allocations(held['id']).values()
            for rc, n in alloc['resources'].items() if rc == 'FPGA'})
        # A server asking F_A finds the port promised: it has nowhere to
        # go, and the port is not programmed.
        other = self.boot(flavor_a, expected_state='ERROR')
        self.assertEqual(F_B, self.loaded('compute1', pf))
        self.assertEqual([(pf, F_B)], self.programmed('compute1'))
        self.assertEqual([], self.cyborg.list_arqs(other['id']))
        self.assertEqual({}, self.allocations(other['id']))
        self.assertIn(function_trait(F_B), self.traits('compute1_' + pf))
        gate.release()
        held = self._wait_for_state_change(held, 'ACTIVE')
        self.assert_accelerated(held, 1)
        self.assertEqual(F_B, self.loaded('compute1', pf))
        self.assertEqual(
            0, self.inventory('compute1_' + pf)['FPGA']['reserved'])
