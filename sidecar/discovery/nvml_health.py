"""NVIDIA GPU health from NVML: critical XID and ECC events.

Where the host has NVML (the ``nvidia`` driver holds the GPU: a vGPU host,
mdev or vGPU 17 VFs) and the optional ``nvidia-ml-py`` binding (module
``pynvml``) is installed, the sidecar watches each GPU as NVIDIA's own
Kubernetes device plugin does (NVIDIA/k8s-device-plugin
``internal/rm/health.go``):

- one event set (``nvmlEventSetCreate``) on which every GPU registers
  ``nvmlEventTypeXidCriticalError``, ``nvmlEventTypeDoubleBitEccError``
  and ``nvmlEventTypeSingleBitEccError``, masked by what it supports
  (``nvmlDeviceGetSupportedEventTypes``, ``nvmlDeviceRegisterEvents``);
- each discovery cycle drains the set without waiting
  (``nvmlEventSetWait_v2`` with a timeout of 0 until
  ``NVML_ERROR_TIMEOUT``); a wait that fails otherwise leaves every GPU's
  health unread (the plugin marks every device unhealthy then), which the
  monitor turns into *Unknown* after ``[health] unknown_after``;
- every critical XID but the application errors 13, 31, 43, 45, 68
  and 109 is a fault of that GPU, as health.go treats them (it skips
  only those: "application errors: the GPU should still be healthy");
  ``[health] nvml_fault_xids``, when set, lists the only XIDs that are
  faults instead. Others are logged. A double-bit ECC event is a fault;
- NVIDIA's state-based signals, read every cycle where the driver and
  the binding provide them (NVIDIA's "A100 GPU memory error management",
  Error Recovery and Response Flags; nvml.h): the GPU's recovery action
  (``nvmlDeviceGetFieldValues`` of
  ``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``, R555 and later) other than
  ``NVML_GPU_RECOVERY_ACTION_NONE``, and a row remapping pending or
  failed (``nvmlDeviceGetRemappedRows``) are faults while they last; a
  GPU NVML reports lost (``NVML_ERROR_GPU_IS_LOST``) is a fault at once;
- the volatile uncorrected ECC count (``nvmlDeviceGetTotalEccErrors``,
  ``NVML_MEMORY_ERROR_TYPE_UNCORRECTED``, ``NVML_VOLATILE_ECC``) rising
  above the count first seen is a fault; it is healthy again when the
  count falls back (the driver zeroes volatile counts when it reloads or
  the GPU is reset). A GPU without ECC answers ``NVML_ERROR_NOT_SUPPORTED``:
  not read.

An XID or double-bit ECC fault lasts until the GPU is reset: NVML has no
event for a GPU that was reset, so the faults are kept in
``<state_path>/nvml.json`` with the host's boot id
(``/proc/sys/kernel/random/boot_id``) and survive a restart of the
sidecar; a reboot (another boot id) forgets them, and after a GPU reset
(``nvidia-smi -r``) an operator clears them with
``nova-cyborg-sidecar-manage device clear-errors <GPU>``.

GPUs are matched to the sidecar's devices by PCI address (NVML's
``nvmlPciInfo_t.busId``, ``"00000000:81:00.0"``). A host without the
binding, or whose NVML does not initialise (no ``libnvidia-ml.so.1``, no
``nvidia`` driver: GPUs passed through whole on ``vfio-pci``), is told so
in one INFO line, once; its GPUs are watched through PCIe only (AER, the
link, config space, presence).

Sources: NVIDIA's ``nvml.h`` (the functions and constants above, and
``nvmlPciInfo_t``), nvidia-ml-py's ``pynvml.py`` (the binding called
here), NVIDIA/k8s-device-plugin ``internal/rm/health.go``.
"""

import dataclasses
import importlib
import os
import time

from oslo_log import log as logging

from sidecar.state import cache as state_cache

LOG = logging.getLogger(__name__)

#: XIDs NVIDIA's XID catalogue resolves with a GPU reset or a reboot.
XID_NAMES = {
    48: 'double-bit ECC error',
    63: 'ECC page retirement or row remapping recording event',
    64: 'ECC page retirement or row remapper recording failure',
    74: 'NVLink error',
    79: 'GPU has fallen off the bus',
    92: 'high single-bit ECC error rate',
    94: 'contained ECC error',
    95: 'uncontained ECC error',
    119: 'GSP RPC timeout',
    120: 'GSP error',
    46: 'GPU stopped processing',
    62: 'internal micro-controller halt',
    140: 'ECC unrecovered error',
    154: 'GPU recovery action changed',
}
#: Application XIDs (k8s-device-plugin health.go): the GPU stays healthy.
APPLICATION_XIDS = (13, 31, 43, 45, 68, 109)
#: Events a cycle drains at most (a storm is read on the next cycle).
MAX_EVENTS = 1000
OFF = 'NVML health checks are off: %s; GPUs are watched through PCIe only'
FILE = 'nvml.json'
LOST = 'NVML reports GPU %s lost (NVML_ERROR_GPU_IS_LOST)'
BOOT_ID = '/proc/sys/kernel/random/boot_id'
#: nvml.h nvmlGpuRecoveryAction_t values, named.
RECOVERY_ACTIONS = {1: 'GPU reset', 2: 'node reboot', 3: 'drain P2P',
                    4: 'drain and reset', 5: 'recover the IMEX domain',
                    6: 'bus reset', 7: 'system reboot'}


def _boot_id():
    try:
        with open(BOOT_ID) as f:
            return f.read().strip()
    except OSError:
        return None


def _import_pynvml():
    return importlib.import_module('pynvml')


def bus_address(bus_id):
    """``'0000:81:00.0'`` of NVML's ``busId`` (``b'00000000:81:00.0'``);
    ValueError when it is not one."""
    text = bus_id.decode('ascii') if isinstance(bus_id, bytes) else bus_id
    domain, bus, rest = text.strip().lower().split(':')
    slot, function = rest.split('.')
    return '%04x:%02x:%02x.%x' % (int(domain, 16), int(bus, 16),
                                  int(slot, 16), int(function, 16))


def _now(clock):
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(clock()))


class NvmlHealth:
    """What NVML says of the host's GPUs, read once per discovery cycle.

    :param fault_xids: the only XIDs that make a GPU unhealthy
        (``[health] nvml_fault_xids``); empty: every XID but
        :data:`APPLICATION_XIDS`.
    :param load: returns the ``pynvml`` module (ImportError: not installed).
    :param clock: returns the time in seconds.
    :param state_path: directory of ``nvml.json`` (faults kept across
        restarts), or None.
    """

    def __init__(self, fault_xids=(), load=_import_pynvml,
                 clock=time.time, state_path=None):
        self.fault_xids = frozenset(fault_xids or ())
        self._load = load
        self._clock = clock
        self.nvml = None
        self.off = None       # why NVML is not watched, once known
        self._events = None
        self._handles = {}    # PCI address: NVML device handle
        self._faults = {}     # PCI address: {what: reason}, in order
        self._ecc = {}        # PCI address: volatile uncorrected baseline
        self._ecc_now = {}    # PCI address: its count this cycle
        self._unread = {}     # PCI address: why it was not read this cycle
        self._state = {}      # PCI address: [state problems this cycle]
        self._store = (state_cache.StateFile(os.path.join(state_path, FILE))
                       if state_path else None)
        self._boot = _boot_id()
        self._load_faults()

    @classmethod
    def from_conf(cls, conf):
        return cls(conf.health.nvml_fault_xids,
                   state_path=conf.sidecar.state_path)

    def is_fault(self, xid):
        """Whether XID ``xid`` makes a GPU unhealthy."""
        if self.fault_xids:
            return xid in self.fault_xids
        return xid not in APPLICATION_XIDS

    # -- faults kept across restarts --------------------------------------

    def _load_faults(self):
        data = self._store.load() if self._store else None
        if not isinstance(data, dict) or not isinstance(
                data.get('faults'), dict):
            return
        if data.get('boot_id') != self._boot or self._boot is None:
            LOG.info('NVML faults recorded before the last reboot are '
                     'forgotten: the GPUs were reset with the host')
            self._save()
            return
        for address, faults in data['faults'].items():
            if isinstance(faults, dict) and faults:
                self._faults[address] = {str(k): str(v)
                                         for k, v in faults.items()}
                LOG.warning('GPU %s keeps its NVML faults from before the '
                            'sidecar restarted: %s', address,
                            '; '.join(self._faults[address].values()))

    def _save(self):
        if self._store is not None:
            self._store.save({'version': 1, 'boot_id': self._boot,
                              'faults': self._faults})

    def clear(self, addresses):
        """Forget the XID and ECC faults of the GPUs ``addresses`` (after
        they were reset); returns the faults cleared."""
        cleared = []
        for address in sorted(set(addresses) & set(self._faults)):
            cleared.extend('%s: %s' % (address, reason) for reason in
                           self._faults.pop(address).values())
        if cleared:
            self._save()
            LOG.warning('NVML faults cleared by an operator: %s',
                        '; '.join(cleared))
        return cleared

    def _start(self):
        try:
            nvml = self._load()
        except ImportError:
            self.off = 'nvidia-ml-py (module pynvml) is not installed'
        else:
            try:
                nvml.nvmlInit()
            except nvml.NVMLError as exc:
                self.off = 'this host has no usable NVML (%s)' % exc
            else:
                self.nvml = nvml
        if self.off:
            LOG.info(OFF, self.off)
            return
        self._events = self.nvml.nvmlEventSetCreate()
        for index in range(self.nvml.nvmlDeviceGetCount()):
            handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
            address = self._address(handle)
            if address is None:
                continue
            self._handles[address] = handle
            self._register(address, handle)
        LOG.info('NVML health checks watch the GPUs %s',
                 ', '.join(sorted(self._handles)) or '(none)')

    def _address(self, handle):
        try:
            return bus_address(self.nvml.nvmlDeviceGetPciInfo(handle).busId)
        except (self.nvml.NVMLError, ValueError) as exc:
            LOG.warning('NVML: a GPU without a readable PCI address is not '
                        'watched: %s', exc)
            return None

    def _register(self, address, handle):
        nvml = self.nvml
        wanted = (nvml.nvmlEventTypeXidCriticalError |
                  nvml.nvmlEventTypeDoubleBitEccError |
                  nvml.nvmlEventTypeSingleBitEccError)
        try:
            supported = nvml.nvmlDeviceGetSupportedEventTypes(handle)
            nvml.nvmlDeviceRegisterEvents(handle, wanted & supported,
                                          self._events)
        except nvml.NVMLError as exc:
            LOG.warning('NVML: no XID or ECC events of GPU %s (%s); its '
                        'ECC counts are still read', address, exc)

    def poll(self):
        """Read this cycle's events and ECC counts (starts NVML the first
        time; does nothing on a host without it)."""
        if self.nvml is None and self.off is None:
            self._start()
        if self.nvml is None:
            return
        self._unread = {}
        self._state = {}
        self._drain()
        for address, handle in sorted(self._handles.items()):
            self._read_ecc(address, handle)
            self._read_state(address, handle)

    def _drain(self):
        nvml = self.nvml
        for _ in range(MAX_EVENTS):
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
            except nvml.NVMLError_Timeout:
                return
            except nvml.NVMLError as exc:
                why = 'NVML event wait failed: %s' % exc
                self._unread = {a: why for a in self._handles}
                return
            address = self._address(event.device)
            if address is not None:
                self._event(address, event.eventType, event.eventData)

    def _event(self, address, kind, data):
        nvml = self.nvml
        if kind & nvml.nvmlEventTypeXidCriticalError:
            if self.is_fault(data):
                self._fault(address, 'XID %d' % data, 'NVIDIA XID %d (%s) '
                            'at %s' % (data, XID_NAMES.get(
                                data, 'see NVIDIA\'s XID catalogue'),
                                _now(self._clock)))
            else:
                LOG.info('GPU %s: XID %d, an application error or not one '
                         'of [health] nvml_fault_xids: logged, the GPU '
                         'stays offered', address, data)
        if kind & nvml.nvmlEventTypeDoubleBitEccError:
            self._fault(address, 'DBE', 'NVML double-bit ECC error at '
                        '%s' % _now(self._clock))
        if kind & nvml.nvmlEventTypeSingleBitEccError:
            LOG.debug('GPU %s: single-bit ECC error (corrected)', address)

    def _fault(self, address, what, reason):
        """Record the first ``what`` of ``address``: its reason (with
        the time it was seen) stays the same from cycle to cycle."""
        faults = self._faults.setdefault(address, {})
        if what not in faults:
            faults[what] = reason
            LOG.warning('GPU %s: %s', address, reason)
            self._save()

    def _read_state(self, address, handle):
        """The recovery action and the row remapper's state, where the
        driver and the binding provide them."""
        nvml, found = self.nvml, list(self._state.get(address, ()))

        def recovery_action():
            field = getattr(nvml, 'NVML_FI_DEV_GET_GPU_RECOVERY_ACTION',
                            None)
            if field is None:
                return []
            value = nvml.nvmlDeviceGetFieldValues(handle, [field])[0]
            action = (value.value.uiVal
                      if value.nvmlReturn == nvml.NVML_SUCCESS else 0)
            return ['NVML recovery action for GPU %s: %s' % (
                address, RECOVERY_ACTIONS.get(action, action))] if action \
                else []

        def remapped_rows():
            _corr, _unc, pending, failure = nvml.nvmlDeviceGetRemappedRows(
                handle)
            return (['GPU %s has a row remapping pending (NVML): it needs '
                     'a GPU reset' % address] if pending else []) + (
                ['GPU %s had a row remapping failure (NVML)' % address]
                if failure else [])

        for what, read in (('recovery action', recovery_action),
                           ('remapped rows', remapped_rows)):
            found += self._nvml_read(address, 'NVML %s' % what, read)
        self._state[address] = list(dict.fromkeys(found))

    def _nvml_read(self, address, what, read):
        """``read()``'s findings; none where the driver or the binding
        lacks it, the GPU's loss where it fell off the bus, and an
        unreadable note (``what``) on any other NVML error."""
        nvml = self.nvml
        try:
            return read()
        except (nvml.NVMLError_NotSupported,
                nvml.NVMLError_FunctionNotFound):
            return []
        except nvml.NVMLError_GpuIsLost:
            return [LOST % address]
        except nvml.NVMLError as exc:
            self._unread.setdefault(address, '%s unreadable: %s' % (
                what, exc))
            return []

    def _read_ecc(self, address, handle):
        nvml = self.nvml
        try:
            count = nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nvml.NVML_VOLATILE_ECC)
        except nvml.NVMLError_NotSupported:
            return
        except nvml.NVMLError_GpuIsLost:
            self._ecc_now.pop(address, None)
            self._state[address] = [LOST % address]
            return
        except nvml.NVMLError as exc:
            self._ecc_now.pop(address, None)
            self._unread.setdefault(address, 'NVML ECC count unreadable: '
                                             '%s' % exc)
            return
        self._ecc_now[address] = count
        seen = self._ecc.get(address)
        if seen is None or count < seen:
            self._ecc[address] = count
            if count and seen is None:
                LOG.info('GPU %s shows %d uncorrected ECC errors from '
                         'before; only new ones make it unhealthy',
                         address, count)

    def problems(self, device):
        """``(problems, unreadable)`` of the GPUs among ``device``'s
        functions."""
        problems, unreadable = [], []
        for address in sorted(set(device.functions()) & set(self._handles)):
            problems.extend(self._faults.get(address, {}).values())
            problems.extend(self._state.get(address, ()))
            count = (self._ecc_now.get(address, 0) -
                     self._ecc.get(address, 0))
            if count:
                problems.append('%d uncorrected ECC error(s) on GPU %s '
                                '(NVML volatile count)' % (count, address))
            if address in self._unread:
                unreadable.append(self._unread[address])
        return tuple(problems), tuple(unreadable)

    def observe(self, device, observation):
        """``observation`` (a :class:`sidecar.discovery.health.
        Observation`) with what NVML says of ``device``'s GPUs."""
        if self.nvml is None or observation.gone:
            return observation
        problems, unreadable = self.problems(device)
        if not problems and not unreadable:
            return observation
        return dataclasses.replace(
            observation, problems=observation.problems + problems,
            unreadable=observation.unreadable + unreadable)
