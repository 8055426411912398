"""NVML health (XID and ECC events) through NVIDIA's own Python binding.

The real ``pynvml`` module of nvidia-ml-py runs; only the C library it
loads is replaced (:mod:`tests.nvml_library`).
"""

import time

import fixtures
import pynvml
import testtools

from sidecar import conf
from sidecar import model
from sidecar.discovery import health
from sidecar.discovery import health_wiring
from sidecar.discovery import nvml_health
from tests import nvml_library
from tests.unit.sidecar import test_health

GPU_A, GPU_B = '0000:81:00.0', '0000:82:00.0'
NOW = 1795000000.0  # 2026-11-18T...
XID = pynvml.nvmlEventTypeXidCriticalError
DBE = pynvml.nvmlEventTypeDoubleBitEccError
SBE = pynvml.nvmlEventTypeSingleBitEccError


def gpu_device(address, vfs=0):
    """A GPU Device at ``address`` (with ``vfs`` VF handles)."""
    prefix = address[:-1]
    handles = tuple(model.AttachHandle('PCI', prefix + str(i + 1))
                    for i in range(vfs)) or (
        model.AttachHandle('PCI', address),)
    return model.Device('GPU', '10de', '2331', address, (
        model.Deployable(address, 'VGPU', len(handles),
                         attach_handles=handles),))


class NvmlTestCase(testtools.TestCase):

    SUPPORTED = XID | DBE | SBE | pynvml.nvmlEventTypePState

    def setUp(self):
        super().setUp()
        # Only the C library is replaced: pynvml's own code runs.
        self.lib = self.useFixture(nvml_library.NvmlLibrary({
            GPU_A: {'supported': self.SUPPORTED, 'ecc': 0},
            GPU_B: {'supported': XID, 'ecc': (
                pynvml.NVML_ERROR_NOT_SUPPORTED,)}})).lib
        self.log = self.useFixture(fixtures.FakeLogger(
            name=nvml_health.__name__, level='DEBUG'))
        self.nvml = nvml_health.NvmlHealth(clock=lambda: NOW)

    def problems(self, address, vfs=0):
        return self.nvml.problems(gpu_device(address, vfs))


class EventsTest(NvmlTestCase):

    def test_registers_what_each_gpu_supports(self):
        self.nvml.poll()
        self.assertEqual({GPU_A: XID | DBE | SBE, GPU_B: XID},
                         self.lib.registered)

    def test_critical_xid_is_a_fault_of_its_gpu_with_its_time(self):
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_A, vfs=2))
        self.lib.events.append((GPU_A, XID, 79))
        self.nvml.poll()
        when = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(NOW))
        reason = 'NVIDIA XID 79 (GPU has fallen off the bus) at ' + when
        self.assertEqual(((reason,), ()), self.problems(GPU_A, vfs=2))
        self.assertEqual(((), ()), self.problems(GPU_B))
        # It stays, word for word, on the next cycles.
        self.nvml.poll()
        self.lib.events.append((GPU_A, XID, 79))
        self.nvml.poll()
        self.assertEqual(((reason,), ()), self.problems(GPU_A, vfs=2))
        self.assertIn('GPU %s: %s' % (GPU_A, reason), self.log.output)

    def test_application_xid_is_logged_only(self):
        self.lib.events.extend([(GPU_B, XID, xid) for xid in
                                nvml_health.APPLICATION_XIDS])
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_B))
        self.assertIn('GPU %s: XID 43, an application error or not one '
                      'of [health] nvml_fault_xids: logged, the GPU stays '
                      'offered' % GPU_B, self.log.output)

    def test_every_other_xid_is_a_fault(self):
        # health.go: every XID but the application ones; NVIDIA's
        # catalogue's 46, 62, 140, 154 and one it does not name.
        for xid in (46, 62, 140, 154, 999):
            self.lib.events.append((GPU_B, XID, xid))
        self.nvml.poll()
        problems, _ = self.problems(GPU_B)
        self.assertEqual(5, len(problems))
        self.assertIn('NVIDIA XID 154 (GPU recovery action changed)',
                      problems[3])
        self.assertIn("NVIDIA XID 999 (see NVIDIA's XID catalogue)",
                      problems[4])

    def test_configured_xids(self):
        self.nvml = nvml_health.NvmlHealth(fault_xids=[13],
                                           clock=lambda: NOW)
        self.lib.events.extend([(GPU_B, XID, 13), (GPU_B, XID, 79)])
        self.nvml.poll()
        (reason,), _ = self.problems(GPU_B)
        self.assertTrue(reason.startswith(
            "NVIDIA XID 13 (see NVIDIA's XID catalogue) at "), reason)

    def test_double_bit_ecc_event(self):
        self.lib.events.append((GPU_A, DBE, 0))
        self.lib.events.append((GPU_A, SBE, 0))
        self.nvml.poll()
        (reason,), _ = self.problems(GPU_A)
        self.assertTrue(reason.startswith('NVML double-bit ECC error at '))

    def test_failed_wait_leaves_every_gpu_unread(self):
        self.nvml.poll()
        self.lib.wait = pynvml.NVML_ERROR_UNKNOWN
        self.nvml.poll()
        for gpu in (GPU_A, GPU_B):
            self.assertEqual(((), ('NVML event wait failed: Unknown Error',)),
                             self.problems(gpu))
        self.lib.wait = None
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_A))

    def test_a_storm_is_read_over_several_cycles(self):
        self.lib.events.extend([(GPU_A, pynvml.nvmlEventTypePState, 0)] *
                               (nvml_health.MAX_EVENTS + 5))
        self.nvml.poll()
        self.assertEqual(5, len(self.lib.events))


class EccCountTest(NvmlTestCase):

    def test_rise_above_the_first_count_then_reset(self):
        self.lib.gpus[GPU_A]['ecc'] = 3
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_A))
        self.assertIn('GPU %s shows 3 uncorrected ECC errors from before'
                      % GPU_A, self.log.output)
        self.lib.gpus[GPU_A]['ecc'] = 5
        self.nvml.poll()
        self.assertEqual((('2 uncorrected ECC error(s) on GPU %s (NVML '
                           'volatile count)' % GPU_A,), ()),
                         self.problems(GPU_A))
        # The driver reloaded: volatile counts start again from 0.
        self.lib.gpus[GPU_A]['ecc'] = 0
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_A))

    def test_unreadable_count(self):
        self.nvml.poll()
        self.lib.gpus[GPU_A]['ecc'] = (pynvml.NVML_ERROR_UNKNOWN,)
        self.nvml.poll()
        self.assertEqual(((), ('NVML ECC count unreadable: Unknown Error',)),
                         self.problems(GPU_A))

    def test_lost_gpu_is_a_fault(self):
        self.nvml.poll()
        self.lib.gpus[GPU_A]['ecc'] = (pynvml.NVML_ERROR_GPU_IS_LOST,)
        self.nvml.poll()
        self.assertEqual((('NVML reports GPU %s lost '
                           '(NVML_ERROR_GPU_IS_LOST)' % GPU_A,), ()),
                         self.problems(GPU_A))


class NoNvmlTest(NvmlTestCase):

    def test_host_without_a_driver_is_told_once(self):
        self.lib.init = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
        observation = health.Observation()
        for _ in range(3):
            self.nvml.poll()
            self.assertIs(observation, self.nvml.observe(
                gpu_device(GPU_A), observation))
        self.assertEqual(['nvmlInitWithFlags'], self.lib.calls)
        lines = [line for line in self.log.output.splitlines()
                 if 'NVML' in line]
        self.assertEqual(['NVML health checks are off: this host has no '
                          'usable NVML (Driver Not Loaded); GPUs are '
                          'watched through PCIe only'], lines)

    def test_without_the_binding(self):
        def load():
            raise ImportError('No module named pynvml')
        self.nvml = nvml_health.NvmlHealth(load=load)
        self.nvml.poll()
        self.nvml.poll()
        self.assertEqual('NVML health checks are off: nvidia-ml-py (module '
                         'pynvml) is not installed; GPUs are watched '
                         'through PCIe only\n', self.log.output)


class BusIdTest(testtools.TestCase):

    def test_default_is_every_xid_but_the_application_ones(self):
        (opt,) = [o for o in conf.devices.HEALTH_OPTS
                  if o.name == 'nvml_fault_xids']
        self.assertEqual([], opt.default)
        nvml = nvml_health.NvmlHealth(load=lambda: None)
        self.assertEqual((13, 31, 43, 45, 68, 109),
                         nvml_health.APPLICATION_XIDS)
        self.assertEqual([79, 154], [x for x in (13, 79, 109, 154)
                                     if nvml.is_fault(x)])

    def test_bus_address(self):
        self.assertEqual('0000:81:00.0',
                         nvml_health.bus_address(b'00000000:81:00.0'))
        self.assertEqual('0001:3b:1f.7',
                         nvml_health.bus_address('00000001:3B:1F.7'))
        for bad in (b'', b'81:00.0', b'0000:zz:00.0'):
            self.assertRaises(ValueError, nvml_health.bus_address, bad)


class MonitoredTest(test_health.HealthTestCase):
    """The sidecar's inventory with NVML: an XID fences the GPU."""

    def test_xid_fences_the_gpu_with_its_reason(self):
        lib = self.useFixture(nvml_library.NvmlLibrary(
            {test_health.GPU: {'supported': XID, 'ecc': 0}})).lib
        inventory = health_wiring.MonitoredInventory(self.drivers)
        inventory.monitor = self.monitor
        inventory.nvml = nvml_health.NvmlHealth(clock=lambda: NOW)
        self.assertEqual([], [d.address for d in inventory.discover()
                              if health.UNHEALTHY_TRAIT in
                              d.deployables[0].traits])
        lib.events.append((test_health.GPU, XID, 48))
        devices = {d.address: d for d in inventory.discover()}
        self.assertIn(health.UNHEALTHY_TRAIT,
                      devices[test_health.GPU].deployables[0].traits)
        for other in (test_health.FPGA, test_health.NIC):
            self.assertNotIn(health.UNHEALTHY_TRAIT,
                             devices[other].deployables[0].traits)
        (reason,) = self.holds.reasons(test_health.GPU).values()
        self.assertTrue(reason.startswith(
            'NVIDIA XID 48 (double-bit ECC error) at '), reason)


class StateTest(NvmlTestCase):
    """Recovery action and remapped rows, read every cycle."""

    def test_recovery_action(self):
        self.lib.gpus[GPU_A]['recovery'] = \
            pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET
        self.nvml.poll()
        self.assertEqual((('NVML recovery action for GPU %s: GPU reset'
                           % GPU_A,), ()), self.problems(GPU_A))
        self.lib.gpus[GPU_A]['recovery'] = \
            pynvml.NVML_GPU_RECOVERY_ACTION_NONE
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_A))

    def test_row_remapping(self):
        self.lib.gpus[GPU_A]['remapped'] = (2, 1, 1, 0)
        self.nvml.poll()
        self.assertEqual((('GPU %s has a row remapping pending (NVML): it '
                           'needs a GPU reset' % GPU_A,), ()),
                         self.problems(GPU_A))
        self.lib.gpus[GPU_A]['remapped'] = (2, 1, 0, 1)
        self.nvml.poll()
        self.assertEqual((('GPU %s had a row remapping failure (NVML)'
                           % GPU_A,), ()), self.problems(GPU_A))

    def test_lost_gpu_is_a_fault_at_once(self):
        self.lib.gpus[GPU_A]['recovery'] = (pynvml.NVML_ERROR_GPU_IS_LOST,)
        self.lib.gpus[GPU_A]['remapped'] = (pynvml.NVML_ERROR_GPU_IS_LOST,)
        self.lib.gpus[GPU_A]['ecc'] = (pynvml.NVML_ERROR_GPU_IS_LOST,)
        self.nvml.poll()
        self.assertEqual((('NVML reports GPU %s lost '
                           '(NVML_ERROR_GPU_IS_LOST)' % GPU_A,), ()),
                         self.problems(GPU_A))

    def test_not_provided_is_not_read(self):
        # GPU_B has neither (NOT_SUPPORTED), as older drivers.
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_B))


class PersistTest(NvmlTestCase):
    """XID faults survive a restart of the sidecar, not a reboot."""

    def setUp(self):
        super().setUp()
        self.state = self.useFixture(fixtures.TempDir()).path
        self.boot = self.useFixture(fixtures.MockPatch(
            'sidecar.discovery.nvml_health._boot_id',
            return_value='boot-1')).mock
        self.nvml = self._restart()

    def _restart(self):
        return nvml_health.NvmlHealth(clock=lambda: NOW,
                                      state_path=self.state)

    def test_kept_across_a_restart_then_cleared(self):
        self.lib.events.append((GPU_A, XID, 79))
        self.nvml.poll()
        (reason,), _ = self.problems(GPU_A)
        self.nvml = self._restart()
        self.nvml.poll()
        self.assertEqual(((reason,), ()), self.problems(GPU_A))
        self.assertEqual(['%s: %s' % (GPU_A, reason)],
                         self.nvml.clear([GPU_A, GPU_B]))
        self.assertEqual(((), ()), self.problems(GPU_A))
        self.nvml = self._restart()
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_A))

    def test_forgotten_after_a_reboot(self):
        self.lib.events.append((GPU_A, XID, 79))
        self.nvml.poll()
        self.boot.return_value = 'boot-2'
        self.nvml = self._restart()
        self.nvml.poll()
        self.assertEqual(((), ()), self.problems(GPU_A))


class ClearRequestTest(NvmlTestCase):
    """``device clear-errors <GPU>`` forgets its NVML faults."""

    def test_control_request(self):
        from unittest import mock

        from sidecar.daemon import control
        self.lib.events.append((GPU_A, XID, 79))
        self.nvml.poll()
        device = gpu_device(GPU_A)
        sidecar = mock.Mock(holds=None, watch=None)
        sidecar.inventory.nvml = self.nvml
        sidecar.inventory.devices.return_value = [device]
        sidecar.programs.busy_with.return_value = False
        sidecar.programs.domains_in_use.return_value = {}
        sidecar.placement.find_provider.return_value = None
        answer = control.Control(sidecar).handle(
            {'op': 'clear-errors', 'device': GPU_A})
        self.assertTrue(answer['ok'], answer)
        self.assertEqual(1, len(answer['result']['cleared']))
        self.assertEqual(((), ()), self.problems(GPU_A))
        sidecar.run_cycle.assert_called_once_with()
