"""NVIDIA vGPU 17 types set at bind on real hosts, against the real
cyborg-conductor, Placement and Nova: a host reboot (every VF reads type
0 after it: sidecar_simulator.kernel.reboot) and a full card (NVIDIA's
driver lists no type on any VF) keep the server's VF and its handle, and
the sidecar writes the type back."""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import fixtures  # noqa: E402

from sidecar import privileged  # noqa: E402
from sidecar_simulator import kernel  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402
from tests.functional import test_sidecar_vgpu  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

H100_40C, ID_40C = 'NVIDIA H100-40C', '1060'  # 2 fit an H100
TRAIT_40C = 'CUSTOM_NVIDIA_2331_H100_40C'


class VgpuRebootTest(test_sidecar.SidecarTestBase):

    _start = test_sidecar_vgpu.VfioVgpuTest._start
    _current_type = test_sidecar_vgpu.VfioVgpuTest._current_type

    def setUp(self):
        super().setUp()
        self.sim = []
        # The simulated driver takes the privileged write to
        # current_vgpu_type as NVIDIA's does.
        self.useFixture(fixtures.MockPatch(
            'sidecar.privileged._write_sysfs',
            side_effect=lambda root, relpath, value: self.sim[0].kernel_write(
                privileged._resolve_under(root, relpath), value)))
        self.card = self._start('compute1', {}, extra=(
            '[gpu]\nvfio_vgpu_types = 2331:%s\n' % H100_40C))
        self.sim.append(self.sidecars['compute1'].simulated)
        self.rp_name = 'compute1_%s_H100_40C' % self.card.pf
        _name, self.flavor = self.create_profile_flavor([{
            'resources:VGPU': '1', 'trait:' + TRAIT_40C: 'required'}])

    def _typed(self):
        return {v: t for v in self.card.vfs
                for t in [self._current_type('compute1', v)] if t != '0'}

    def test_full_card_then_reboot(self):
        self.assertEqual(2, self.inventory(self.rp_name)['VGPU']['total'])
        servers = [self.boot(self.flavor) for _ in range(2)]
        arqs = [self.cyborg.list_arqs(s['id'])[0] for s in servers]
        vfs = sorted(self.arq_bdf(arq) for arq in arqs)
        self.assertEqual({vf: ID_40C for vf in vfs}, self._typed())
        # Full: no VF lists a type, the typed ones included.
        for vf in self.card.vfs:
            self.assertEqual([], self.sim[0].creatable(self.card, vf))
        self.sidecars['compute1'].cycle()
        self.assertEqual(2, self.inventory(self.rp_name)['VGPU']['total'])
        for server, arq in zip(servers, arqs):
            (again,) = self.cyborg.list_arqs(server['id'])
            self.assertEqual((arq['attach_handle_uuid'], 'Bound'),
                             (again['attach_handle_uuid'], again['state']))

        # The host reboots: its guests are off, and every VF reads 0; the
        # sidecar's next cycle writes the types back before it reports,
        # and before the guests start again.
        servers = [self._stop_server(server) for server in servers]
        kernel.reboot(self.sim[0].host, reenable=[self.card.pf])
        self.assertEqual({}, self._typed())
        self.sidecars['compute1'].cycle()
        waits.wait_until(lambda: self._typed() == {vf: ID_40C for vf in vfs},
                         'the vGPU types written back on %s' % vfs)
        self.assertEqual(2, self.inventory(self.rp_name)['VGPU']['total'])
        for server, arq in zip(servers, arqs):
            (again,) = self.cyborg.list_arqs(server['id'])
            self.assertEqual((arq['attach_handle_uuid'], 'Bound'),
                             (again['attach_handle_uuid'], again['state']))
        servers = [self._start_server(server) for server in servers]
        self.assertEqual(vfs, sorted(vf for server in servers
                                     for vf in self.hostdev_bdfs(server)))
        # Healthy again: the card is offered again.
        self.sidecars['compute1'].cycle()
        waits.wait_until(
            lambda: self.inventory(self.rp_name)['VGPU']['reserved'] == 0,
            'the card in scheduling again')
        for server in servers:
            self._delete_server(server)
            self.assert_nothing_left(server['id'])
        waits.wait_until(lambda: self._typed() == {},
                         'the vGPU types written back to 0')
