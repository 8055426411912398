"""Device health and Nova's own devices, against the real cyborg-conductor
and Placement.

A fault the host shows (an FPGA manager in error, a fatal PCIe AER error,
the card falling off the bus, a VGPU's vendor driver unloaded) makes the
device unhealthy: its provider is fully reserved, Placement and Cyborg's
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

from sidecar import health  # noqa: E402
from sidecar import simulator  # noqa: E402
from sidecar import simulator_faults as faults  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_faults_processes as processes  # noqa
from tests.functional import test_sidecar  # noqa: E402

NUM_VFS = 4


class HealthTestBase(test_sidecar.SidecarTestBase):

    #: the provider watched, its resource class and total
    name = rc = total = None

    def deployable_traits(self):
        (dep,) = [d for d in self.cyborg.list_deployables()
                  if d['name'] == self.name]
        return {value for attr in json.loads(dep['attributes_list'])
                for value in attr.values()}

    def state(self):
        inv = self.inventory(self.name)[self.rc]
        return ((inv['total'], inv['reserved']),
                health.UNHEALTHY_TRAIT in self.traits(self.name),
                health.UNHEALTHY_TRAIT in self.deployable_traits())

    def expect(self, unhealthy, what):
        """One cycle, then wait until Placement and Cyborg agree."""
        self.sidecar.cycle()
        want = ((self.total, self.total if unhealthy else 0), unhealthy,
                unhealthy)
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

    rc, total = 'FPGA', NUM_VFS

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1', num_pfs=1, num_vfs=NUM_VFS)
        (self.pf,) = self.pf_bdfs('compute1')
        self.name = 'compute1_' + self.pf
        self.host = self.hosts['compute1']
        self.sidecar = self.sidecars['compute1']

    def test_each_fault_holds_and_releases_the_device(self):
        _name, flavor = self.create_profile_flavor(processes.PROFILE)
        server = self.boot(flavor)
        self.expect(False, 'healthy at start')

        faults.set_fpga_state(self.host, self.pf, 'write error')
        self.expect(True, 'the FPGA manager in error')
        log = self.stdlog.logger.output
        self.assertIn('Device %s is unhealthy: FPGA manager fpga0 state is '
                      "'write error'" % self.pf, log)
        self.assertIn(server['id'], log.split(
            'Device %s is unhealthy' % self.pf)[1].splitlines()[0])
        faults.set_fpga_state(self.host, self.pf, 'operating')
        self.expect(False, 'the FPGA manager operating again')
        self.assertIn('Device %s is healthy again' % self.pf,
                      self.stdlog.logger.output)

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
        names = {d['name'] for d in self.cyborg.list_deployables()}
        self.assertEqual({'compute1_' + pfs[0]}, names)
        self.assertEqual([], self.placement.get(
            '/resource_providers?name=compute1_%s' % pfs[1],
            version='1.14').body['resource_providers'])
        self.assertIn('Not reporting FPGA device %s (driver fpga): Nova '
                      'manages %s through [pci] device_spec' % (pfs[1], vf),
                      self.stdlog.logger.output)
        # Once nova.conf no longer lists it, it is reported.
        with open(nova_conf, 'w') as f:
            f.write('[pci]\n')
        self.sidecars['compute1'].cycle()
        waits.wait_until(lambda: 'compute1_%s' % pfs[1] in {
            d['name'] for d in self.cyborg.list_deployables()},
            'the device reported once Nova no longer manages it')
        self.assertEqual(2, self.inventory('compute1_' + pfs[1])['FPGA']
                         ['total'])
