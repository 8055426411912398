"""NVIDIA vGPU 17 (vendor-specific VFIO) against the real cyborg-conductor,
Placement and Nova.

An H100 PCIe whose VFs stay bound to ``nvidia`` (sidecar_simulator.nvidia):
the VFs the operator gave a vGPU type are VGPU providers with the type's
trait, the others are not offered, and a server asking for that type gets
one such VF as a ``<hostdev managed='no'>``, which libvirt leaves on
``nvidia`` (``managed='yes'`` would detach it and lose the vGPU). With
``[gpu] vfio_vgpu_types`` the idle VFs are offered too (one provider of
the card per type, of the type's capacity), and the sidecar
writes the type when cyborg-conductor binds one (``create_vgpu_mdev``),
and 0 back when the server is deleted (``remove_vgpu_mdev``).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import os  # noqa: E402
from xml.etree import ElementTree  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from sidecar import privileged  # noqa: E402
from sidecar_simulator import nvidia  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

H100_4C = 'NVIDIA H100-4C'
TRAIT_4C = 'CUSTOM_NVIDIA_2331_H100_4C'


class VfioVgpuTest(test_sidecar.SidecarTestBase):

    def _start(self, hostname, types, extra=''):
        # fakelibvirt shows Nova the same addresses: a PF at 81:00.0 and
        # its VFs from 81:00.1.
        self.start_compute(
            hostname=hostname,
            pci_info=fakelibvirt.HostPCIDevicesInfo(num_pci=0, num_pfs=1,
                                                    num_vfs=4),
            host_info=fakelibvirt.HostInfo(cpu_nodes=2, cpu_sockets=1,
                                           cpu_cores=2, cpu_threads=2,
                                           kB_mem=16 * 1024 * 1024))
        sim = nvidia.NvidiaHost()
        card = sim.add_vfio_vgpu_card(num_vfs=4, types=types)
        self.hosts[hostname] = sim.host
        conn = self.computes[hostname].driver._host.get_connection()
        self.sidecars[hostname] = self.useFixture(
            sidecar_fixture.SidecarFixture(
                hostname, sim, self.broker.transport_url,
                self.placement_url, lambda: conn, drivers=('gpu',),
                cyborg_url=self.cyborg.endpoint, extra=extra))
        return card

    def _providers(self):
        rps = self.placement.get('/resource_providers',
                                 version='1.14').body['resource_providers']
        return {rp['name'] for rp in rps}

    def test_typed_vfs_offered_and_passed_unmanaged(self):
        card = self._start('compute1', {0: H100_4C, 2: H100_4C})
        typed = [card.vfs[0], card.vfs[2]]
        names = ['compute1_' + vf for vf in typed]
        for name in names:
            self.assertEqual(1, self.inventory(name)['VGPU']['total'])
            self.assertIn(TRAIT_4C, self.traits(name))
        providers = self._providers()
        for vf in (card.vfs[1], card.vfs[3], card.pf):
            self.assertNotIn('compute1_' + vf, providers)

        _name, flavor = self.create_profile_flavor([{
            'resources:VGPU': '1', 'trait:' + TRAIT_4C: 'required'}])
        server = self.boot(flavor)
        (arq,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual(('Bound', 'PCI', 'no'), (
            arq['state'], arq['attach_handle_type'],
            arq['attach_handle_info']['managed']))
        vf = self.arq_bdf(arq)
        self.assertIn(vf, typed)
        root = ElementTree.fromstring(self.domain_xml(server))
        (hostdev,) = root.findall('./devices/hostdev[@type="pci"]')
        self.assertEqual(('subsystem', 'no'), (hostdev.get('mode'),
                                               hostdev.get('managed')))
        self.assertEqual([vf], self.hostdev_bdfs(server))
        self.assertEqual({'VGPU': 1}, {
            rc: n for alloc in self.allocations(server['id']).values()
            for rc, n in alloc['resources'].items() if rc == 'VGPU'})
        self._delete_server(server)
        self.assert_nothing_left(server['id'])

    def _current_type(self, hostname, vf):
        """``nvidia/current_vgpu_type`` of ``vf`` in the host's sysfs."""
        root = self.sidecars[hostname].sysfs_root
        with open(os.path.join(root, 'bus', 'pci', 'devices', vf, 'nvidia',
                               'current_vgpu_type')) as f:
            return f.read().strip()

    def test_type_set_at_bind_and_removed_at_delete(self):
        sim = []
        # The simulated driver takes the privileged write to
        # current_vgpu_type as NVIDIA's does: every VF's
        # creatable_vgpu_types follows.
        self.useFixture(fixtures.MockPatch(
            'sidecar.privileged._write_sysfs',
            side_effect=lambda root, relpath, value: sim[0].kernel_write(
                privileged._resolve_under(root, relpath), value)))
        card = self._start('compute1', {}, extra=(
            '[gpu]\nvfio_vgpu_types = 2331:%s\n' % H100_4C))
        sim.append(self.sidecars['compute1'].simulated)
        # Every VF is idle and offered for the type, through one provider
        # of the card for the type: 20 fit an H100, one per VF.
        offered = 'compute1_%s_H100_4C' % card.pf
        self.assertEqual(4, self.inventory(offered)['VGPU']['total'])
        self.assertIn(TRAIT_4C, self.traits(offered))
        for vf in card.vfs:
            self.assertNotIn('compute1_' + vf, self._providers())
        _name, flavor = self.create_profile_flavor([{
            'resources:VGPU': '1', 'trait:' + TRAIT_4C: 'required'}])
        server = self.boot(flavor)
        (arq,) = self.cyborg.list_arqs(server['id'])
        info = arq['attach_handle_info']
        self.assertEqual(('Bound', 'MDEV', 'vendor-vfio', 'no', H100_4C), (
            arq['state'], arq['attach_handle_type'], info['vgpu_framework'],
            info['managed'], info['asked_type']))
        vf = self.arq_bdf(arq)
        self.assertIn(vf, card.vfs)
        # The sidecar set the type at bind, on that VF alone.
        self.assertEqual({vf: '1054'}, {
            v: t for v in card.vfs
            for t in [self._current_type('compute1', v)] if t != '0'})
        root = ElementTree.fromstring(self.domain_xml(server))
        (hostdev,) = root.findall('./devices/hostdev')
        self.assertEqual(('subsystem', 'pci', 'no'), (
            hostdev.get('mode'), hostdev.get('type'),
            hostdev.get('managed')))
        self.assertEqual([vf], self.hostdev_bdfs(server))
        # Reported again, the VF keeps the handle its ARQ holds.
        self.sidecars['compute1'].cycle()
        (again,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual((arq['attach_handle_uuid'], 'Bound'),
                         (again['attach_handle_uuid'], again['state']))

        self._delete_server(server)
        self.assert_nothing_left(server['id'])
        waits.wait_until(
            lambda: self._current_type('compute1', vf) == '0',
            'the vGPU type of %s written back to 0' % vf)
        self.sidecars['compute1'].cycle()
        self.assertEqual(4, self.inventory(offered)['VGPU']['total'])
        self.assertIn(TRAIT_4C, self.traits(offered))

        # An operator gives a VF another type behind the sidecar's back:
        # Placement still offers the VFs for 4C (no report since), which
        # the card can no longer host. The bind is refused cleanly with
        # the sidecar's reason (no other host to try here), and no VF's
        # type changes.
        sim[0].set_vgpu_type(card, card.vfs[3], '1057')
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('Failed to bind accelerator requests',
                      server['fault']['message'])
        self.assertRegex(server['fault']['message'],
                         "cannot host 'NVIDIA H100-4C'|"
                         "it holds vGPU type 1057")
        self.assert_nothing_left(server['id'])
        self.assertEqual(['0', '0', '0', '1057'], [
            self._current_type('compute1', v) for v in card.vfs])
