"""NVML health (XID and ECC events) through NVIDIA's own Python binding.

The real ``pynvml`` module of nvidia-ml-py runs: only the C library it
loads (``libnvidia-ml.so.1``, its ``nvmlLib``) is replaced by
:class:`FakeLibNvml`, whose entry points take the arguments pynvml passes
(ctypes values and ``byref`` pointers) and fill them as ``nvml.h``
declares, returning an ``nvmlReturn_t``. pynvml's ``_nvmlGetFunctionPointer``
looks each of them up by name, so every call goes through NVIDIA's
Python code: argument packing, ``nvmlPciInfo_t`` and ``c_nvmlEventData_t``,
``_nvmlCheckReturn`` and its ``NVMLError_*`` classes.
"""

import ctypes
import time

import fixtures
import pynvml
import testtools

from sidecar import conf
from sidecar import model
from sidecar.discovery import health
from sidecar.discovery import health_wiring
from sidecar.discovery import nvml_health
from tests.unit.sidecar import test_health

GPU_A, GPU_B = '0000:81:00.0', '0000:82:00.0'
NOW = 1795000000.0  # 2026-11-18T...
XID = pynvml.nvmlEventTypeXidCriticalError
DBE = pynvml.nvmlEventTypeDoubleBitEccError
SBE = pynvml.nvmlEventTypeSingleBitEccError


def _set_pointer(ref, value):
    """Write the pointer ``value`` where the C function's ``T **`` (a
    ``byref`` of a ctypes pointer) points."""
    ctypes.c_void_p.from_buffer(ref._obj).value = value


def _pointer(handle):
    return ctypes.cast(handle, ctypes.c_void_p).value


class FakeLibNvml:
    """The C entry points of ``libnvidia-ml.so.1`` that the sidecar's
    calls reach, with nvml.h's signatures, over a few GPUs.

    ``gpus``: ``{bus id: {'supported': event mask, 'ecc': count or an
    nvmlReturn_t error}}``; ``events``: queued ``(bus id, type, data)``;
    ``init``/``wait``: the return of ``nvmlInitWithFlags`` and of a wait
    with events pending or none (``NVML_ERROR_TIMEOUT``).
    """

    HANDLE, EVENT_SET = 0x1000, 0xe000

    def __init__(self, gpus):
        self.gpus = dict(gpus)
        self.order = list(gpus)
        self.events = []
        self.init = pynvml.NVML_SUCCESS
        self.wait = None
        self.registered = {}  # bus id: event mask
        self.calls = []

    def _gpu(self, handle):
        return self.order[_pointer(handle) - self.HANDLE]

    # nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
    def nvmlInitWithFlags(self, flags):
        self.calls.append('nvmlInitWithFlags')
        return self.init

    # nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
    def nvmlDeviceGetCount_v2(self, count):
        count._obj.value = len(self.order)
        return pynvml.NVML_SUCCESS

    # nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
    #                                            nvmlDevice_t *device)
    def nvmlDeviceGetHandleByIndex_v2(self, index, device):
        _set_pointer(device, self.HANDLE + index.value)
        return pynvml.NVML_SUCCESS

    # nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device,
    #                                      nvmlPciInfo_t *pci)
    def nvmlDeviceGetPciInfo_v3(self, device, pci):
        domain, bus, rest = self._gpu(device).split(':')
        pci._obj.busId = ('%08X:%s:%s' % (int(domain, 16), bus.upper(),
                                          rest.upper())).encode()
        return pynvml.NVML_SUCCESS

    # nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
    def nvmlEventSetCreate(self, event_set):
        _set_pointer(event_set, self.EVENT_SET)
        return pynvml.NVML_SUCCESS

    # nvmlReturn_t nvmlDeviceGetSupportedEventTypes(
    #     nvmlDevice_t device, unsigned long long *eventTypes)
    def nvmlDeviceGetSupportedEventTypes(self, device, types):
        types._obj.value = self.gpus[self._gpu(device)]['supported']
        return pynvml.NVML_SUCCESS

    # nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
    #     unsigned long long eventTypes, nvmlEventSet_t set)
    def nvmlDeviceRegisterEvents(self, device, types, event_set):
        assert _pointer(event_set) == self.EVENT_SET
        self.registered[self._gpu(device)] = types.value
        return pynvml.NVML_SUCCESS

    # nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set,
    #     nvmlEventData_t *data, unsigned int timeoutms)
    def nvmlEventSetWait_v2(self, event_set, data, timeout):
        assert timeout.value == 0, 'the cycle must never wait'
        if self.wait is not None:
            return self.wait
        if not self.events:
            return pynvml.NVML_ERROR_TIMEOUT
        bus_id, kind, value = self.events.pop(0)
        data._obj.device = ctypes.cast(
            ctypes.c_void_p(self.HANDLE + self.order.index(bus_id)),
            pynvml.c_nvmlDevice_t)
        data._obj.eventType = kind
        data._obj.eventData = value
        return pynvml.NVML_SUCCESS

    # nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
    #     nvmlMemoryErrorType_t errorType, nvmlEccCounterType_t counterType,
    #     unsigned long long *eccCounts)
    def nvmlDeviceGetTotalEccErrors(self, device, error_type, counter,
                                    count):
        assert (error_type.value, counter.value) == (
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC)
        ecc = self.gpus[self._gpu(device)]['ecc']
        if isinstance(ecc, tuple):  # an error
            return ecc[0]
        count._obj.value = ecc
        return pynvml.NVML_SUCCESS


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
        self.lib = FakeLibNvml({
            GPU_A: {'supported': self.SUPPORTED, 'ecc': 0},
            GPU_B: {'supported': XID, 'ecc': (
                pynvml.NVML_ERROR_NOT_SUPPORTED,)}})
        # Only the C library is replaced: pynvml's own code runs.
        self.useFixture(fixtures.MonkeyPatch('pynvml.nvmlLib', self.lib))
        self.useFixture(fixtures.MonkeyPatch(
            'pynvml._nvmlGetFunctionPointer_cache', {}))
        self.useFixture(fixtures.MonkeyPatch('pynvml._nvmlLib_refcount', 0))
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
        self.assertIn('GPU %s: XID 43, not one of [health] '
                      'nvml_fault_xids: logged, the GPU stays offered'
                      % GPU_B, self.log.output)

    def test_configured_xids(self):
        self.nvml = nvml_health.NvmlHealth(fault_xids=[13],
                                           clock=lambda: NOW)
        self.lib.events.extend([(GPU_B, XID, 13), (GPU_B, XID, 79)])
        self.nvml.poll()
        (reason,), _ = self.problems(GPU_B)
        self.assertTrue(reason.startswith(
            'NVIDIA XID 13 (needs a GPU reset) at '), reason)

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
        self.lib.gpus[GPU_A]['ecc'] = (pynvml.NVML_ERROR_GPU_IS_LOST,)
        self.nvml.poll()
        self.assertEqual(((), ('NVML ECC count unreadable: GPU is lost',)),
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

    def test_default_xids_are_the_documented_ones(self):
        (opt,) = [o for o in conf.HEALTH_OPTS if o.name == 'nvml_fault_xids']
        self.assertEqual(list(nvml_health.FAULT_XIDS), opt.default)

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
        lib = FakeLibNvml({test_health.GPU: {'supported': XID, 'ecc': 0}})
        self.useFixture(fixtures.MonkeyPatch('pynvml.nvmlLib', lib))
        self.useFixture(fixtures.MonkeyPatch(
            'pynvml._nvmlGetFunctionPointer_cache', {}))
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
