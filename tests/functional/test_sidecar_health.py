"""Device health and Nova's own devices, against the real cyborg-conductor
and Placement.

A fault the host shows (a DFL card's FPGA manager in error, a DFL port
error, a fatal PCIe AER error, the card falling off the bus, a VGPU's
vendor driver unloaded) makes the device unhealthy: its providers (a DFL
card's: one per port) are fully reserved, Placement and Cyborg's
deployable API show the ``CUSTOM_HEALTH_UNHEALTHY`` trait, and the
servers using it are named in a WARNING; once the fault is gone the
device is offered again. A device nova-compute's own ``[pci]
device_spec`` lists is never reported.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import os  # noqa: E402

import fixtures  # noqa: E402

from sidecar import privileged  # noqa: E402
from sidecar.discovery import health  # noqa: E402
from sidecar_simulator import dfl_health as sim_dfl_health  # noqa: E402
from sidecar_simulator import faults  # noqa: E402
from sidecar_simulator import host as simulator  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_faults_processes as processes  # noqa
from tests.functional import test_sidecar  # noqa: E402

NUM_VFS = 2


class HealthTestBase(test_sidecar.SidecarTestBase):

    #: the provider watched, its resource class and total (each)
    name = rc = total = None
    #: the providers watched when the device has several (a DFL card's
    #: ports); empty: ``name`` alone
    names = ()

    def watched(self):
        return list(self.names) or [self.name]

    def deployable_traits(self, name):
        (dep,) = [d for d in self.cyborg.list_deployables()
                  if d['name'] == name]
        return {value for attr in json.loads(dep['attributes_list'])
                for value in attr.values()}

    def state(self):
        """``[((total, reserved), trait in Placement, in Cyborg)]`` of
        each provider watched."""
        seen = []
        for name in self.watched():
            inv = self.inventory(name)[self.rc]
            seen.append(((inv['total'], inv['reserved']),
                         health.UNHEALTHY_TRAIT in self.traits(name),
                         health.UNHEALTHY_TRAIT in
                         self.deployable_traits(name)))
        return seen

    def expect(self, unhealthy, what):
        """One cycle, then wait until Placement and Cyborg agree, for
        every provider watched (``unhealthy``: one flag for all, or a
        list with one per provider)."""
        self.sidecar.cycle()
        flags = (unhealthy if isinstance(unhealthy, list)
                 else [unhealthy] * len(self.watched()))
        want = [((self.total, self.total if flag else 0), flag, flag)
                for flag in flags]
        seen = []

        def agree():
            seen[:] = [self.state()]
            return seen[0] == want
        try:
            waits.wait_until(agree, what)
        except AssertionError:
            self.fail('%s: (total, reserved), trait in Placement, in '
                      'Cyborg are %s, not %s' % (what, seen, want))


class HealthTest(HealthTestBase):

    # An Intel DFL card with two ports, each released to a VF: two
    # providers of FPGA total 1; the card's health holds both.
    rc, total = 'FPGA', 1

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1', num_pfs=1, num_vfs=NUM_VFS)
        (self.pf,) = self.pf_bdfs('compute1')
        self.names = self.fpga_providers('compute1', self.pf)
        self.assertEqual(NUM_VFS, len(self.names))
        self.host = self.hosts['compute1']
        self.sidecar = self.sidecars['compute1']

    def test_each_fault_holds_and_releases_the_device(self):
        _name, flavor = self.create_profile_flavor(processes.PROFILE)
        server = self.boot(flavor)
        self.expect(False, 'healthy at start')

        # The DFL manager's 'unknown' (what dfl-fme-mgr.c reports) is
        # healthy, as is 'operating'; a write error is a fault.
        faults.set_fpga_state(self.host, self.pf, 'unknown')
        self.expect(False, "the FPGA manager's state unknown")
        faults.set_fpga_state(self.host, self.pf, 'write error')
        self.expect(True, 'the FPGA manager in error')
        log = self.stdlog.logger.output
        manager = 'fpga%d' % self.host.fpga_card(self.pf).manager
        self.assertIn('Device %s is unhealthy: FPGA manager %s state is '
                      "'write error'" % (self.pf, manager), log)
        self.assertIn(server['id'], log.split(
            'Device %s is unhealthy' % self.pf)[1].splitlines()[0])
        faults.set_fpga_state(self.host, self.pf, 'operating')
        self.expect(False, 'the FPGA manager operating again')
        self.assertIn('Device %s is healthy again' % self.pf,
                      self.stdlog.logger.output)

        # A DFL port's error file (dfl-port.M/errors/errors) holds that
        # port's provider alone: the card's other port stays offered.
        card = self.host.fpga_card(self.pf)
        # The port no guest holds (a guest's VF is on vfio-pci: dfl-pci
        # let its port go).
        index, port = next((i, h) for i, h in enumerate(card.handles())
                           if self.host.dfl.bound(h))
        faults.set_fpga_error(self.host, port, 'port/errors', '0x1')
        self.expect([name.endswith(port) for name in self.watched()],
                    'an error of the second port')
        line = self.stdlog.logger.output.split(
            'Device %s is unhealthy: ' % health.deployable_key(
                self.pf, port))[-1].splitlines()[0]
        self.assertIn('dfl-port.%d/errors/errors is 0x1'
                      % card.ports[index].port_id, line)
        # The operator clears it (nova-cyborg-sidecar-manage device
        # clear-errors): the value read is written back through privsep,
        # which the simulated kernel answers as dfl-afu-error.c
        # errors_store does (cleared when the value matches).
        real = privileged._write_sysfs

        def kernel_write(root, relpath, value):
            if '/errors/' not in relpath:
                return real(root, relpath, value)
            return sim_dfl_health.errors_store(
                os.path.join(os.path.realpath(root), relpath), value,
                self.host.dfl)
        with fixtures.MockPatch('sidecar.privileged._write_sysfs',
                                side_effect=kernel_write):
            answer = self.sidecar.sidecar.control._control.handle(
                {'op': 'clear-errors', 'device': port})
        self.assertTrue(answer['ok'], answer)
        self.assertEqual(1, len(answer['result']['cleared']))
        self.expect(False, "the port's error cleared by the operator")

        vf = self.host.functions[self.pf].virtfns[0]
        faults.set_aer(self.host, vf, fatal=0)
        self.expect(False, 'no fatal AER error')
        faults.set_aer(self.host, vf, fatal=1)
        self.expect(True, 'a fatal AER error on a VF')
        faults.set_aer(self.host, vf, fatal=0)
        self.expect(False, 'the AER counters reset')

        saved = faults.unplug(self.host, self.pf)
        self.expect(True, 'the card gone from the bus')
        # Still known to Cyborg as it was: the server keeps its record.
        self.assertEqual('ACTIVE',
                         self.api.get_server(server['id'])['status'])
        faults.replug(self.host, saved)
        self.expect(False, 'the card back')
        # And it serves new servers again.
        self.boot(flavor)


class MdevParentTest(HealthTestBase):

    rc, total = 'VGPU', 16  # fakelibvirt's nvidia-11 instances

    def test_vgpu_whose_driver_unloads_is_held_and_released(self):
        self.host = self.start_accel_compute(
            'compute1', num_mdevcap=1, drivers=('gpu',),
            mdev_types=('nvidia-11',))
        (gpu,) = [a for a, f in self.host.functions.items()
                  if f.mdev_types]
        self.name = 'compute1_' + gpu
        self.sidecar = self.sidecars['compute1']
        self.expect(False, 'healthy at start')

        faults.unload_mdev_driver(self.host, gpu)
        self.expect(True, 'the vendor driver unloaded')
        self.assertIn('Device %s is unhealthy: mdev parent %s no longer '
                      'offers mdev_supported_types' % (gpu, gpu),
                      self.stdlog.logger.output)
        faults.reload_mdev_driver(self.host, gpu)
        self.expect(False, 'the vendor driver loaded again')
        self.assertIn('Device %s is healthy again' % gpu,
                      self.stdlog.logger.output)


class NovaDeviceSpecTest(test_sidecar.SidecarTestBase):

    def test_device_in_nova_device_spec_is_not_reported(self):
        layout = simulator.from_fakelibvirt(num_pfs=2, num_vfs=4)
        pfs = sorted(f.address for f in layout.functions.values()
                     if f.physfn is None)
        vf = layout.functions[pfs[1]].virtfns[1]
        nova_conf = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'nova.conf')
        with open(nova_conf, 'w') as f:
            f.write('[pci]\ndevice_spec = %s\n' % json.dumps(
                {'address': vf, 'physical_network': 'physnet1'}))
        self.start_accel_compute(
            'compute1', num_pfs=2, num_vfs=4,
            extra_config='[sidecar]\nnova_config_file = %s\n' % nova_conf)
        self.assertEqual(pfs, self.pf_bdfs('compute1'))
        # The card is the device: Nova managing one of its ports' VFs
        # keeps the whole card (both its ports) out.
        kept, managed = (self.fpga_providers('compute1', pf) for pf in pfs)
        self.assertEqual(2, len(managed))
        names = {d['name'] for d in self.cyborg.list_deployables()}
        self.assertEqual(set(kept), names)
        for name in managed:
            self.assertEqual([], self.placement.get(
                '/resource_providers?name=%s' % name,
                version='1.14').body['resource_providers'])
        self.assertIn('Not reporting FPGA device %s (driver fpga): Nova '
                      'manages %s through [pci] device_spec' % (pfs[1], vf),
                      self.stdlog.logger.output)
        # Once nova.conf no longer lists it, it is reported.
        with open(nova_conf, 'w') as f:
            f.write('[pci]\n')
        self.sidecars['compute1'].cycle()
        waits.wait_until(lambda: set(managed) <= {
            d['name'] for d in self.cyborg.list_deployables()},
            'the device reported once Nova no longer manages it')
        waits.wait_until(lambda: all(self.placement.get(
            '/resource_providers?name=%s' % name,
            version='1.14').body['resource_providers'] for name in managed),
            "the card's providers in Placement")
        self.assertEqual([1, 1], [self.inventory(name)['FPGA']['total']
                                  for name in managed])
