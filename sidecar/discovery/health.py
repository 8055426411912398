"""Device health, from what the host shows in sysfs.

Drivers report what they see (:meth:`sidecar.drivers.base.DiscoveryDriver.
health`) with the pure functions below; :class:`Monitor` turns that into a
verdict per device each discovery cycle:

- the device is gone: its control path left ``bus/pci/devices`` (it is
  kept in the report as last seen, so that cyborg-conductor does not drop
  it from under the servers using it, until it comes back), or one of
  its attach handles' functions did (a VF removed from the bus: kept in
  the report too, see :mod:`sidecar.discovery.vanished`);
- a fatal PCIe AER count (``aer_dev_fatal``, ``TOTAL_ERR_FATAL``) of one
  of its functions, or of the upstream port above it (its fatal total,
  its Surprise Down count, a root port's ``aer_rootport_total_err_fatal``:
  :mod:`sidecar.discovery.pci_health`), rose above the count first seen
  (the baseline, kept in ``<state_path>/health.json`` so a restart does
  not forgive it); it is healthy again when the count falls back to the
  baseline or below (the kernel zeroes it when the device is reset and
  enumerated again; a device that comes back after it was gone takes its
  port's counts then as the new baseline); non-fatal counts
  (``aer_dev_nonfatal``) are logged, not held;
- its PCIe link runs below what the device and its port can do, or its
  config space reads ``0xffff`` (:mod:`sidecar.discovery.pci_health`);
- an FPGA region's or manager's ``state`` is an error (``... error``,
  ``power off``, ``unknown``); a manager loading a bitstream (``write``,
  ``write init`` ...) keeps the previous verdict;
- a VGPU's parent function lost ``mdev_supported_types``.

A device whose health files cannot be read (an ``EIO``, a driver's check
that raises) keeps its verdict; after ``[health] unknown_after`` seconds
without a good reading it is *Unknown* (as Kubernetes' KEP-4680 marks a
device): held like an unhealthy one, with :data:`UNKNOWN_TRAIT` and a
reason naming the age of the last good reading.

An unhealthy device is held (:mod:`sidecar.state.holds`, reason ``unhealthy``):
its providers are reserved in Placement, nothing new lands on it; its
deployables carry the trait :data:`UNHEALTHY_TRAIT`, which Cyborg's API
shows in the deployable's ``attributes_list`` and Placement on the
provider. The servers holding allocations on it are named in a WARNING.

A problem of one deployable only (a DFL port's AFU error, a port shut
down for power: :mod:`sidecar.drivers.dfl_health`) holds that
deployable's provider alone, under the key :func:`deployable_key`, and
puts the trait on that deployable: another tenant's port of the same card
stays offered. It lifts as the device's do, when the deployable reads
healthy again.
"""

import dataclasses
import os
import threading
import time

from oslo_log import log as logging

from sidecar.discovery import health_baselines
from sidecar.discovery import pci_health
from sidecar.discovery import vanished as vanished_mod

LOG = logging.getLogger(__name__)

UNHEALTHY_TRAIT = 'CUSTOM_HEALTH_UNHEALTHY'
UNKNOWN_TRAIT = 'CUSTOM_HEALTH_UNKNOWN'
#: The reason of a device whose health was not read for too long.
#: The reason of a device whose health was not read for too long: it
#: stays the same from cycle to cycle (the time of the last good reading
#: gives its age), so the hold is not rewritten every cycle.
UNKNOWN = 'health unknown: no good reading for more than %d s (%s; now: %s)'
_LAST_GOOD = 'last good reading at %s'
_NEVER_GOOD = 'none since it was first seen at %s'
#: Display controllers lower their link speed when idle (not a fault).
LINK_SPEED_EXEMPT = ('03',)
GONE = 'device gone from the host (no %s in sysfs)'
#: A function of the device (a VF, its attach handle) left sysfs.
FUNCTION_GONE = 'device gone: its function %s left the host (not in sysfs)'
#: FPGA manager states while a bitstream is loaded: no verdict.
BUSY_STATES = frozenset(('power up', 'reset', 'firmware request',
                         'write init', 'write', 'write complete'))
FILE = 'health.json'


@dataclasses.dataclass(frozen=True)
class Observation:
    """What a driver sees of one device now.

    ``problems``: phrases for what is wrong regardless of history;
    ``fatal``/``nonfatal``: ``{function address: AER count}`` of the
    functions that show counters (and the upstream port's counters, keyed
    ``'<port> <kind>'``, :data:`sidecar.discovery.pci_health.PHRASES`);
    ``busy``: a state that gives no verdict; ``unreadable``: what could
    not be read (no good reading).
    """
    gone: bool = False
    problems: tuple = ()
    fatal: tuple = ()      # sorted (address, count) pairs
    nonfatal: tuple = ()
    busy: bool = False
    unreadable: tuple = ()
    #: ``((deployable name, problem), ...)``: what is wrong with one
    #: deployable only (its provider alone is held).
    scoped: tuple = ()


def deployable_key(address, name):
    """The hold key of deployable ``name`` of device ``address``: the
    device's own when the deployable is the whole device (its name is the
    device's address), else ``<address>/<name>``."""
    return address if name == address else '%s/%s' % (address, name)


def device_dir(sysfs_root, address):
    return os.path.join(sysfs_root, 'bus', 'pci', 'devices', address)


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def aer_count(text, total):
    """The ``total`` line of an AER counter file (``TOTAL_ERR_FATAL 2``),
    or the sum of its counters when it has none; None when unreadable."""
    if text is None:
        return None
    counts = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[1].isdigit():
            counts[words[0]] = int(words[1])
    if total in counts:
        return counts[total]
    return sum(counts.values()) if counts else None


def aer_counts(sysfs_root, addresses, name, total):
    """``((address, count), ...)`` of the functions showing ``name``."""
    result = []
    for address in sorted(addresses):
        count = aer_count(_read(os.path.join(
            device_dir(sysfs_root, address), name)), total)
        if count is not None:
            result.append((address, count))
    return tuple(result)


def pci_observation(sysfs_root, device, conf=None):
    """Presence, AER counters (the functions' and the upstream port's),
    link and config space of ``device`` (a :class:`model.Device`);
    ``conf`` gives ``[health] link_speed_exempt_classes``."""
    path = device_dir(sysfs_root, device.address)
    if not os.path.isdir(path):
        return Observation(gone=True, problems=(GONE % device.address,))
    functions = device.functions()
    fatal = list(aer_counts(sysfs_root, functions, 'aer_dev_fatal',
                            'TOTAL_ERR_FATAL'))
    problems, unreadable = [], []
    exempt = (conf.health.link_speed_exempt_classes if conf is not None
              else LINK_SPEED_EXEMPT)
    port = pci_health.upstream_port(sysfs_root, device.address)

    def check(what, *args):
        try:
            return what(*args)
        except pci_health.Unreadable as exc:
            unreadable.append(str(exc))
    if port is not None:
        fatal.extend(check(pci_health.port_counters, *port) or ())
    problems.append(check(pci_health.config_problem, path))
    if not pci_health.is_vf(path):
        cls = check(pci_health.class_id, path) or ''
        speed = not any(e and cls.startswith(e.strip().lower())
                        for e in exempt)
        problems.append(check(pci_health.link_problem, path,
                              port and port[1], speed))
    return Observation(
        problems=tuple(p for p in problems if p),
        fatal=tuple(sorted(fatal)),
        nonfatal=aer_counts(sysfs_root, functions, 'aer_dev_nonfatal',
                            'TOTAL_ERR_NONFATAL'),
        unreadable=tuple(unreadable))


def mdev_problems(sysfs_root, device):
    """Problems of the parent functions of ``device``'s MDEV handles (a
    vGPU 17 VF's vendor-VFIO handle has no mdev parent: gpu_vfio checks
    it)."""
    problems = []
    parents = sorted({handle.address for dep in device.deployables
                      for handle in dep.attach_handles
                      if handle.attach_type == 'MDEV' and
                      not handle.vendor_vfio})
    for address in parents:
        path = device_dir(sysfs_root, address)
        if not os.path.isdir(path):
            problems.append('mdev parent %s is gone' % address)
        elif not os.path.isdir(os.path.join(path, 'mdev_supported_types')):
            problems.append('mdev parent %s no longer offers '
                            'mdev_supported_types' % address)
    return tuple(problems)


def with_trait(device, trait=UNHEALTHY_TRAIT, names=None):
    """``device`` with ``trait`` on every deployable (those named in
    ``names`` only, when given)."""
    return dataclasses.replace(device, deployables=tuple(
        dataclasses.replace(dep, traits=tuple(sorted(
            set(dep.traits) | {trait})))
        if names is None or dep.name in names else dep
        for dep in device.deployables))


def is_unknown(problems):
    """Whether a hold reason is the Unknown state's."""
    return (problems or '').startswith(UNKNOWN.split(':')[0])


class Monitor:
    """Judge each device's health every cycle; hold the unhealthy ones.

    :param sysfs_root: where the host's devices are.
    :param holds: a :class:`sidecar.state.holds.Holds`, or None.
    :param state_path: directory of ``health.json`` (AER baselines), or
        None to keep them in memory.
    :param users: ``users(host, device)`` returns the servers using the
        device (for the log), or None.
    :param unknown_after: seconds without a good reading after which a
        device is Unknown (``[health] unknown_after``).
    :param clock: returns the time in seconds (``time.time``).
    """

    def __init__(self, host, sysfs_root, holds=None, state_path=None,
                 users=None, unknown_after=600, clock=time.time):
        self.host = host
        self.sysfs_root = sysfs_root
        self.holds = holds
        self._users = users
        self.unknown_after = unknown_after
        self._clock = clock
        self._good = {}       # address: time of the last good reading
        self._gone = set()    # addresses gone at the last cycle
        self._failing = set()  # addresses whose health was not read
        self._first = {}      # address: first failed reading, none good
        self._baselines = health_baselines.Baselines(state_path, FILE)
        self._vanished = vanished_mod.Vanished(sysfs_root, state_path)
        self._lock = threading.Lock()
        self._last = {}       # address: (driver, device) last discovered
        self._unhealthy = {}  # address (or deployable key): detail

    def unhealthy(self):
        """``{address: what is wrong}`` after the last cycle."""
        return dict(self._unhealthy)

    def apply(self, found):
        """``found``: ``[(driver, device)]`` of this cycle. Returns the
        devices to report: unhealthy ones with :data:`UNHEALTHY_TRAIT`,
        and gone ones as last seen."""
        with self._lock:
            return self._apply(found)

    def _apply(self, found):
        current, gone = {}, {}
        for driver, device in found:
            last = self._last.get(device.address)
            device, gone[device.address] = self._vanished.apply(
                device, last and last[1])
            current[device.address] = (driver, device)
        for address, (driver, device) in self._last.items():
            if address in current:
                continue
            if os.path.lexists(device_dir(self.sysfs_root, address)):
                self._vanished.forget(address)  # left out on purpose
            else:
                current[address] = (driver, device)
        self._last = current
        result = []
        for address, (driver, device) in sorted(current.items()):
            try:
                observation = driver.health(device)
            except Exception as exc:
                LOG.exception('Health check of %s failed; its verdict is '
                              'kept', address)
                observation = Observation(unreadable=(
                    'its health check failed: %s' % exc,))
            self._rebaseline(address, observation)
            problems = self._judge(address, observation)
            if not problems and observation.unreadable:
                problems = self._unknown(address, observation)
            elif not observation.unreadable:
                self._good[address] = self._clock()
                self._failing.discard(address)
            if problems is None:  # busy: keep the verdict
                problems = self._unhealthy.get(address)
            problems = '; '.join(
                [FUNCTION_GONE % f for f in gone.get(address, ())] +
                [p for p in (problems or '').split('; ')
                 if p and not p.startswith(FUNCTION_GONE.split('%')[0])])
            problems = self._whole(address, device, observation, problems)
            self._transition(address, device, problems)
            if problems:
                device = with_trait(device, UNKNOWN_TRAIT
                                    if is_unknown(problems)
                                    else UNHEALTHY_TRAIT)
            device = self._scoped(address, device, observation)
            result.append(device)
        keys = set(current) | {deployable_key(a, dep.name) for a, (_, d)
                               in current.items() for dep in d.deployables}
        for key in set(self._unhealthy) - keys:
            self._transition(key, None, None)
        return result

    @staticmethod
    def _whole(address, device, observation, problems):
        """``problems`` with the scoped problems of a deployable that is
        the whole device (its name is the device's address)."""
        extra = [p for name, p in observation.scoped if
                 deployable_key(address, name) == address and any(
                     d.name == name for d in device.deployables)]
        parts = [p for p in (problems or '').split('; ') if p]
        parts += [p for p in extra if p not in parts]
        return '; '.join(parts)

    def _scoped(self, address, device, observation):
        """Hold (or release) each deployable of ``device`` that is not the
        whole device on its own problems (:attr:`Observation.scoped`);
        ``device`` with the trait on the unhealthy ones. A busy or
        unreadable observation keeps the verdict of a deployable it names
        no problem for."""
        keep = observation.busy or bool(observation.unreadable)
        found = {}
        for name, problem in observation.scoped:
            found.setdefault(name, []).append(problem)
        names = set()
        for dep in device.deployables:
            key = deployable_key(address, dep.name)
            if key == address:
                continue
            if keep and dep.name not in found:
                problems = self._unhealthy.get(key)
            else:
                problems = '; '.join(found.get(dep.name, ()))
            self._transition(key, device, problems or None)
            if problems:
                names.add(dep.name)
        if not names:
            return device
        return with_trait(device, UNHEALTHY_TRAIT, names)

    def _rebaseline(self, address, observation):
        """A device back after it was gone (enumerated again) takes its
        upstream port's counts of now as their baseline."""
        if observation.gone:
            self._gone.add(address)
            return
        if address not in self._gone:
            return
        self._gone.discard(address)
        baseline = dict(self._baselines.get(address) or {})
        ports = [key for key in baseline if pci_health.phrase(key, 0)]
        if ports:
            for key in ports:
                del baseline[key]
            self._baselines.put(address, baseline)
            LOG.info('Device %s is back: the fatal AER counts of its '
                     'upstream port from now on make it unhealthy', address)

    def _unknown(self, address, observation):
        """The Unknown reason, or None (keep the verdict) while the last
        good reading is younger than ``unknown_after``."""
        now = self._clock()
        last = self._good.get(address)
        since = last or self._first.setdefault(address, now)
        why = '; '.join(observation.unreadable)
        if now - since < self.unknown_after:
            if address in self._failing:
                return None
            self._failing.add(address)
            LOG.warning('Health of %s could not be read (%s); its verdict '
                        'is kept until %d s without a good reading',
                        address, why, self.unknown_after)
            return None
        when = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(since))
        return UNKNOWN % (self.unknown_after, (
            _LAST_GOOD if last else _NEVER_GOOD) % when, why)

    def _judge(self, address, observation):
        """What is wrong (a phrase), '' when healthy, None: no verdict."""
        problems = list(observation.problems)
        baseline = dict(self._baselines.get(address) or {})
        changed = False
        for function, count in observation.fatal:
            seen = baseline.get(function)
            if seen is None or count < seen:
                baseline[function], changed = count, True
                if count and seen is None:
                    LOG.info('PCI function %s shows %d fatal AER errors '
                             'from before; only new ones make it '
                             'unhealthy', function, count)
            elif count > seen:
                problems.append(
                    pci_health.phrase(function, count - seen) or
                    '%d fatal PCIe AER error(s) on %s' % (count - seen,
                                                          function))
        if changed:
            self._baselines.put(address, baseline)
        for function, count in observation.nonfatal:
            if count:
                LOG.debug('PCI function %s: %d non-fatal AER errors',
                          function, count)
        if not problems and observation.busy:
            return None
        return '; '.join(problems)

    def _transition(self, address, device, problems):
        before = self._unhealthy.get(address)
        if problems:
            self._unhealthy[address] = problems
            if self.holds is not None:
                self.holds.hold(address, 'unhealthy', problems)
            if problems != before and not (is_unknown(problems) and
                                           is_unknown(before)):
                LOG.warning('Device %(addr)s is %(state)s: %(what)s. It is '
                            'held out of scheduling; servers using it: '
                            '%(users)s', {'addr': address, 'what': problems,
                                          'state': 'unknown' if is_unknown(
                                              problems) else 'unhealthy',
                                          'users': self._named(device)})
        else:
            self._unhealthy.pop(address, None)
            if self.holds is not None:
                self.holds.release(address, 'unhealthy')
            if before:
                LOG.warning('Device %s is healthy again (it was: %s)',
                            address, before)

    def _named(self, device):
        if self._users is None or device is None:
            return 'unknown'
        try:
            users = self._users(self.host, device)
        except Exception as exc:
            return 'unknown (%s)' % exc
        return ', '.join(sorted(users)) or 'none'
