"""DFL health that lifts: which error files fence and whom, the hwmon
thresholds and a port's power state, and errors cleared through the
kernel's ABI (the simulator answers each write as dfl-fme-error.c and
dfl-afu-error.c do)."""

import os
from unittest import mock

import fixtures

from sidecar import exception
from sidecar import privileged
from sidecar.daemon import control
from sidecar.discovery import health
from sidecar.drivers import dfl_health
from sidecar.drivers import fpga
from sidecar.report import reconcile
from sidecar.state import holds as holds_mod
from sidecar_simulator import dfl_health as sim_health
from sidecar_simulator import dfl_sriov
from sidecar_simulator import faults
from tests.unit.sidecar import simhost
from tests.unit.sidecar import test_privileged

PF = '0000:82:00.0'
VF1, VF2 = '0000:82:00.1', '0000:82:00.2'


class KernelWrites(fixtures.Fixture):
    """The privileged daemon in this process; its writes of DFL error
    files answered as the kernel's store functions answer them
    (sidecar_simulator.dfl_health.errors_store), and with ``dfl_host``
    (a sidecar_simulator.dfl.DflHost) of a DFL PF's ``sriov_numvfs`` as
    iov.c and dfl-pci do (sidecar_simulator.dfl_sriov)."""

    def __init__(self, dfl_host=None):
        super().__init__()
        self.dfl_host = dfl_host

    def _setUp(self):
        self.useFixture(test_privileged.InProcess())
        self.writes = []
        real = privileged._write_sysfs

        def write(root, relpath, value):
            self.writes.append((relpath, value))
            if '/errors/' in relpath:
                return sim_health.errors_store(
                    os.path.join(os.path.realpath(root), relpath), value,
                    self.dfl_host)
            parts = relpath.split('/')
            if self.dfl_host is not None and parts[-1] == 'sriov_numvfs':
                return dfl_sriov.sriov_numvfs_store(self.dfl_host,
                                                    parts[-2], value)
            return real(root, relpath, value)
        self.useFixture(fixtures.MockPatch(
            'sidecar.privileged._write_sysfs', side_effect=write))


class DflHealthBase(simhost.SimHostTestCase):
    """A card with two ports, each released to its own VF."""

    def setUp(self):
        super().setUp()
        self.sim = self.host(fpgas=[{'num_vfs': 2, 'address': PF,
                                     'function_id': simhost.FUNCTION_ID}])
        self.source = self.write(self.sim)
        self.card = self.sim.fpga_card(PF)
        self.driver = fpga.FpgaDriver(self.conf, self.source)
        self.holds = holds_mod.Holds()
        self.monitor = health.Monitor('host1', self.root, holds=self.holds)
        self.kernel = self.useFixture(KernelWrites(self.sim.dfl))
        dfl_health._warned.clear()

    def device(self):
        device, = self.driver.discover()
        return device

    def cycle(self):
        device, = self.monitor.apply([(self.driver, self.device())])
        return device

    def observe(self):
        return self.driver.health(self.device())

    def error(self, address, relpath, value):
        faults.set_fpga_error(self.sim, address, relpath, value)

    def read(self, address, relpath):
        kind, name = relpath.split('/')
        if kind == 'fme':
            base = self.sim.dfl.fme_dir(self.card)
        else:
            base = self.sim.dfl.port_dir(*self.sim.dfl.find_port(address))
        with open(os.path.join(base, 'errors', name)) as f:
            return f.read().strip()


class JudgementTest(DflHealthBase):

    def test_read_only_detail_never_fences(self):
        # afu_port_err_clear never writes PORT_MALFORMED_REQ0/1, and
        # fme_errors_store never writes FME_FIRST/NEXT_ERROR.
        self.error(VF1, 'port/first_malformed_req', '0xdead')
        self.error(VF1, 'port/first_error', '0x1')
        self.error(PF, 'fme/first_error', '0x2')
        self.error(PF, 'fme/next_error', '0x2')
        observation = self.observe()
        self.assertEqual(((), ()), (observation.problems,
                                    observation.scoped))

    def test_judged_files_name_their_detail(self):
        self.error(VF2, 'port/errors', '0x10')
        self.error(VF2, 'port/first_malformed_req', '0xbeef')
        self.error(PF, 'fme/pcie0_errors', '0x1')
        observation = self.observe()
        self.assertEqual(('dfl-fme.0/errors/pcie0_errors is 0x1',),
                         observation.problems)
        (name, problem), = observation.scoped
        self.assertEqual(VF2, name)
        self.assertIn('errors/errors is 0x10', problem)
        self.assertIn('first_malformed_req 0xbeef', problem)

    def test_hwmon_thresholds(self):
        thermal, power = sim_health.write_hwmon(self.sim.dfl, self.card)
        self.assertEqual((), self.observe().problems)
        # At temp1_max (50% or 90% throttling): a warning, no fence.
        sim_health.set_hwmon(thermal, temp1_input=90000)
        self.assertEqual((), self.observe().problems)
        self.assertIn('dfl_fme_thermal temp1_input 90000 at or above '
                      'temp1_max', self.log.output)
        # At temp1_crit (100% throttling): the card is faulty.
        sim_health.set_hwmon(thermal, temp1_input=100000)
        self.assertEqual(('dfl_fme_thermal temp1_input 100000 at or above '
                          'temp1_crit (100000)',), self.observe().problems)
        sim_health.set_hwmon(thermal, temp1_input=40000)
        # An alarm without a reading is enough.
        sim_health.set_hwmon(power, power1_crit_alarm=1)
        problems = self.observe().problems
        self.assertEqual(1, len(problems))
        self.assertIn('dfl_fme_power power1_input 60000000 at or above '
                      'power1_crit (alarm)', problems[0])
        sim_health.set_hwmon(power, power1_crit_alarm=0)
        self.assertEqual((), self.observe().problems)

    def test_port_power_state(self):
        path = os.path.join(self.sim.dfl.port_dir(self.card, 1),
                            'power_state')
        with open(path, 'w') as f:
            f.write('0x2\n')
        self.assertEqual((), self.observe().scoped)
        self.assertIn('power_state is AP2 (90% throttling)',
                      self.log.output)
        with open(path, 'w') as f:
            f.write('0x6\n')
        (name, problem), = self.observe().scoped
        self.assertEqual(VF2, name)
        self.assertIn('AP6', problem)


class ScopeTest(DflHealthBase):

    def test_port_error_holds_that_port_only(self):
        self.error(VF2, 'port/errors', '0x1')
        device = self.cycle()
        self.assertEqual({}, self.holds.reasons(PF))
        self.assertEqual({}, self.holds.reasons(
            health.deployable_key(PF, VF1)))
        self.assertEqual(['unhealthy'], list(self.holds.reasons(
            health.deployable_key(PF, VF2))))
        traits = {d.name: d.traits for d in device.deployables}
        self.assertNotIn(health.UNHEALTHY_TRAIT, traits[VF1])
        self.assertIn(health.UNHEALTHY_TRAIT, traits[VF2])
        # Placement: only the second port's provider is fully reserved.
        wanted = {w.name: w.reserved for w in reconcile.wanted(
            'host1', [device], self.holds.held)}
        self.assertEqual({'host1_%s' % VF1: 0, 'host1_%s' % VF2: 1},
                         wanted)

    def test_card_error_holds_the_card(self):
        self.error(PF, 'fme/fme_errors', '0x20')
        device = self.cycle()
        self.assertIn('fme_errors is 0x20',
                      self.holds.reasons(PF)['unhealthy'])
        self.assertTrue(all(health.UNHEALTHY_TRAIT in d.traits
                            for d in device.deployables))


class ClearTest(DflHealthBase):

    def test_clear_lifts_the_holds(self):
        self.error(VF2, 'port/errors', '0x1')
        self.error(VF2, 'port/first_error', '0x1')
        self.error(VF2, 'port/first_malformed_req', '0xbeef')
        self.error(PF, 'fme/fme_errors', '0x20')
        self.error(PF, 'fme/catfatal_errors', '0x4')
        self.cycle()
        self.assertTrue(self.holds.held(PF))
        self.assertTrue(self.holds.held(health.deployable_key(PF, VF2)))
        cleared = dfl_health.clear_errors(self.root, self.device())
        # Each value read, written back through the privileged daemon.
        self.assertEqual(['0x20', '0x1'], [v for _, v in
                                           self.kernel.writes])
        self.assertEqual(2, len(cleared))
        self.assertEqual(('0x0', '0x0', '0xbeef'), (
            self.read(PF, 'fme/fme_errors'), self.read(VF2, 'port/errors'),
            self.read(VF2, 'port/first_malformed_req')))
        # The simulated card keeps it: a tree written again shows it.
        self.assertEqual(('0x0', '0x0', '0x0'), (
            self.card.errors['fme/fme_errors'],
            self.card.errors['port1/errors'],
            self.card.errors['port1/first_error']))
        self.cycle()
        # The port is offered again; catfatal_errors (read-only, a card
        # reset clears it) still holds the card.
        self.assertFalse(self.holds.held(health.deployable_key(PF, VF2)))
        self.assertIn('catfatal_errors is 0x4',
                      self.holds.reasons(PF)['unhealthy'])
        self.error(PF, 'fme/catfatal_errors', '0x0')
        self.cycle()
        self.assertFalse(self.holds.held(PF))

    def test_privileged_side_refuses_other_files(self):
        port = os.path.relpath(self.sim.dfl.port_dir(self.card, 0),
                               self.root)
        for relpath, value in (
                (port + '/errors/first_malformed_req', '0x1'),
                (port + '/afu_id', '0x1'),
                (port + '/errors/errors', '0'),
                (port + '/errors/errors', '1; reboot'),
                ('../etc/passwd', '0x1')):
            self.assertRaises(exception.InvalidArgument,
                              privileged.dfl_clear_errors, self.root,
                              relpath, value)
        self.assertEqual([], self.kernel.writes)

    def test_kernel_refuses_a_stale_value(self):
        # The register changed between the read and the write: EINVAL,
        # as fme_errors_store answers (val != v).
        self.error(PF, 'fme/fme_errors', '0x20')
        fme = os.path.relpath(self.sim.dfl.fme_dir(self.card), self.root)
        self.assertRaises(OSError, privileged.dfl_clear_errors, self.root,
                          fme + '/errors/fme_errors', '0x21')
        self.assertEqual('0x20', self.read(PF, 'fme/fme_errors'))

    def test_control_request(self):
        self.error(VF1, 'port/errors', '0x8')
        device = self.cycle()
        sidecar = mock.Mock(holds=self.holds, watch=None)
        sidecar.conf.host = 'host1'
        sidecar.conf.sidecar.sysfs_root = self.root
        sidecar.inventory.devices.return_value = [device]
        sidecar.run_cycle.side_effect = self.cycle
        sidecar.programs.busy_with.return_value = False
        sidecar.programs.domains_in_use.return_value = {}
        sidecar.placement.find_provider.return_value = None
        listed, = control.Control(sidecar).handle({'op': 'list'})['result']
        self.assertIn('errors/errors is 0x8',
                      listed['held']['%s unhealthy' % VF1])
        answer = control.Control(sidecar).handle(
            {'op': 'clear-errors', 'device': VF1})
        self.assertTrue(answer['ok'], answer)
        self.assertEqual(1, len(answer['result']['cleared']))
        self.assertFalse(self.holds.held(health.deployable_key(PF, VF1)))
