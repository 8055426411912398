"""A stand-in for NVIDIA's NVML C library (``libnvidia-ml.so.1``) under
nvidia-ml-py's real ``pynvml`` module.

pynvml loads the library into its ``nvmlLib`` and looks each C function
up by name (``_nvmlGetFunctionPointer``). :class:`NvmlLibrary` puts
:class:`FakeLibNvml` there instead: its entry points take the arguments
pynvml passes (ctypes values and ``byref`` pointers) and fill them as
NVIDIA's ``nvml.h`` declares, returning an ``nvmlReturn_t``. Every call a
test makes therefore goes through NVIDIA's Python code (argument packing,
``nvmlPciInfo_t``, ``c_nvmlEventData_t``, ``_nvmlCheckReturn`` and its
``NVMLError_*`` classes); only the hardware is simulated.
"""

import ctypes

import fixtures
import pynvml


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

    def _state(self, device, key):
        """A GPU's ``key`` (``recovery``, ``remapped``): its value, or the
        nvmlReturn_t error; NOT_SUPPORTED when the GPU has none."""
        value = self.gpus[self._gpu(device)].get(
            key, (pynvml.NVML_ERROR_NOT_SUPPORTED,))
        if isinstance(value, tuple) and len(value) == 1:
            return value[0], None
        return pynvml.NVML_SUCCESS, value

    # nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device,
    #     int valuesCount, nvmlFieldValue_t *values)
    def nvmlDeviceGetFieldValues(self, device, count, values):
        for index in range(count.value):
            field = values._obj[index]
            assert field.fieldId == \
                pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, field.fieldId
            ret, action = self._state(device, 'recovery')
            if ret == pynvml.NVML_ERROR_GPU_IS_LOST:
                return ret
            field.nvmlReturn = ret
            if action is not None:
                field.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                field.value.uiVal = action
        return pynvml.NVML_SUCCESS

    # nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device,
    #     unsigned int *corrRows, unsigned int *uncRows,
    #     unsigned int *isPending, unsigned int *failureOccurred)
    def nvmlDeviceGetRemappedRows(self, device, corr, unc, pending,
                                  failure):
        ret, rows = self._state(device, 'remapped')
        if rows is not None:
            for ref, value in zip((corr, unc, pending, failure), rows):
                ref._obj.value = value
        return ret


class NvmlLibrary(fixtures.Fixture):
    """pynvml with :class:`FakeLibNvml` (``gpus``) as its C library;
    ``lib`` after setUp."""

    def __init__(self, gpus):
        super().__init__()
        self.gpus = gpus

    def _setUp(self):
        self.lib = FakeLibNvml(self.gpus)
        self.useFixture(fixtures.MonkeyPatch('pynvml.nvmlLib', self.lib))
        self.useFixture(fixtures.MonkeyPatch(
            'pynvml._nvmlGetFunctionPointer_cache', {}))
        self.useFixture(fixtures.MonkeyPatch('pynvml._nvmlLib_refcount', 0))
