"""Where a boot's time goes: the phases of each boot, measured in-process.

:class:`Phases` wraps a few methods of Nova (both sides: patched and
unpatched) and of the Cyborg clients with a stopwatch; each call is kept as
``(start, end, name)``, wall clock. :meth:`Phases.between` gives the
phases of one boot (the calls that began within it) as ``{name: ms}``,
summed when a phase ran more than once. The wrapped methods still do what
they did; the only cost is two clock reads and an append per call.

Phases (``conductor.*`` in nova-conductor, ``compute.*`` in nova-compute,
``cyborg.*`` the client calls of any service):

* ``conductor.schedule``: ``_schedule_instances`` (the scheduler);
* ``conductor.arqs``: ``_create_and_bind_arq_for_instance`` (what the
  conductor waits on Cyborg for after scheduling);
* ``conductor.build``: the whole ``schedule_and_build_instances``;
* ``compute.arq_wait``: ``_get_bound_arq_resources`` (the compute's wait
  for the bind and its read of the ARQs);
* ``compute.build``: ``_build_and_run_instance``;
* ``compute.spawn``: the libvirt driver's ``spawn``;
* ``api.events``: nova-api's ``os-server-external-events`` (Cyborg's bind
  notification, sent while Cyborg answers the bind);
* ``cyborg.profile``, ``cyborg.create``, ``cyborg.bind``, ``cyborg.get``:
  the client's device profile read, ARQ create, bind and read.

Beside the phases, :func:`cpu_sample` reads the CPU time a boot costs
(``cpu.nova``: this process, where every Nova service and Placement run as
threads under one interpreter lock; ``cpu.other``: the rest of the
machine, mostly Cyborg's API and conductor processes and the message
broker), from ``/proc/stat`` and :func:`time.process_time`: on a machine
whose CPUs the boot keeps busy, what an accelerator adds to a boot is
bounded by the CPU it adds, not by which call waits on which.
"""

import os

import functools
import threading
import time

import fixtures

_NOVA = [
    ('nova.conductor.manager.ComputeTaskManager._schedule_instances',
     'conductor.schedule'),
    ('nova.conductor.manager.ComputeTaskManager.'
     '_create_and_bind_arq_for_instance', 'conductor.arqs'),
    ('nova.conductor.manager.ComputeTaskManager.'
     'schedule_and_build_instances', 'conductor.build'),
    ('nova.compute.manager.ComputeManager._get_bound_arq_resources',
     'compute.arq_wait'),
    ('nova.compute.manager.ComputeManager._build_and_run_instance',
     'compute.build'),
    ('nova.virt.libvirt.driver.LibvirtDriver.spawn', 'compute.spawn'),
    ('nova.api.openstack.compute.server_external_events.'
     'ServerExternalEventsController.create', 'api.events'),
]
_OURS = [
    ('nova_cyborg.clients.cyborg.CyborgClient.get_device_profile_groups',
     'cyborg.profile'),
    ('nova_cyborg.clients.cyborg.CyborgClient.create_arqs', 'cyborg.create'),
    ('nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', 'cyborg.bind'),
    ('nova_cyborg.clients.cyborg.CyborgClient.get_arqs_for_instance',
     'cyborg.get'),
]
_UPSTREAM = [
    ('nova.accelerator.cyborg._CyborgClient.get_device_profile_groups',
     'cyborg.profile'),
    ('nova.accelerator.cyborg._CyborgClient._create_arqs', 'cyborg.create'),
    ('nova.accelerator.cyborg._CyborgClient.bind_arqs', 'cyborg.bind'),
    ('nova.accelerator.cyborg._CyborgClient.get_arqs_for_instance',
     'cyborg.get'),
]


def cpu_sample():
    """``(this process's CPU seconds, the machine's busy CPU seconds)``.

    The machine's: every CPU's user, nice, system, irq, softirq and steal
    time since boot (``/proc/stat``, proc(5)); None where there is no
    ``/proc/stat``.
    """
    try:
        with open('/proc/stat') as f:
            values = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return time.process_time(), None
    # user nice system idle iowait irq softirq steal
    busy = sum(values) - values[3] - values[4]
    return time.process_time(), busy / os.sysconf('SC_CLK_TCK')


def cpu_between(before, after):
    """``{'cpu.nova': ms, 'cpu.other': ms}`` of two :func:`cpu_sample`."""
    nova = (after[0] - before[0]) * 1000
    result = {'cpu.nova': round(nova, 1)}
    if before[1] is not None and after[1] is not None:
        result['cpu.other'] = round(
            max((after[1] - before[1]) * 1000 - nova, 0.0), 1)
    return result


def _resolve(path):
    module, cls, attr = path.rsplit('.', 2)
    mod = __import__(module, fromlist=[cls])
    return getattr(getattr(mod, cls), attr)


class Phases(fixtures.Fixture):
    """Stopwatches on the methods above."""

    def __init__(self, patched):
        super().__init__()
        self.patched = patched

    def _setUp(self):
        self._lock = threading.Lock()
        self.calls = []
        for path, name in _NOVA + (_OURS if self.patched else _UPSTREAM):
            self.useFixture(fixtures.MonkeyPatch(
                path, self._timed(_resolve(path), name)))

    def _timed(self, func, name):
        phases = self

        @functools.wraps(func)
        def timed(*args, **kwargs):
            start = time.time()
            try:
                return func(*args, **kwargs)
            finally:
                with phases._lock:
                    phases.calls.append((start, time.time(), name))
        return timed

    def between(self, start, end):
        """``{phase: ms}`` of the calls begun in ``[start, end]``."""
        result = {}
        with self._lock:
            calls = list(self.calls)
        for begun, ended, name in calls:
            if start <= begun <= end:
                result[name] = result.get(name, 0) + (ended - begun) * 1000
        return {name: round(ms, 1) for name, ms in result.items()}
