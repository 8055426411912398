"""P1, P2 and P3: boots to ACTIVE, and the Cyborg calls each one makes.

One host with one FPGA of 4 VFs; a flavor with a one-FPGA device profile
and the same flavor without it. Boots alternate (accel then plain, plain
then accel, ...) and each server is deleted before the next boot, so both
kinds meet the same state; the first ``WARMUP`` boots of each kind are not
counted. Run by benchmarks.run once against patched Nova and once against
unpatched Nova (``NOVA_CYBORG_BENCH_PATCHED=0``); ``NOVA_CYBORG_BENCH_BOOTS``
boots of each kind are measured (default 20). The phases of each boot
(benchmarks.boot_phases) are kept with it, to say where the time goes.
``NOVA_CYBORG_BENCH_OVERLAP=0`` turns off, on the patched side, the
creation of ARQs while the scheduler runs and the bind while the
conductor records the server (nova_cyborg.flows.boot.early_arqs): the boot path
as it was before them, for a before/after comparison.
``NOVA_CYBORG_BENCH_CAST_FIRST=1`` (patched side) is a what-if, never a
product mode: the conductor casts the build as soon as the ARQs exist,
without waiting for Cyborg to answer the bind (:func:`cast_first`); it
has no failure handling at all (a failed bind would leave the compute
waiting), and says what taking the bind off the critical path would win
at best (benchmarks.cast_first).
"""

import os
import time

import fixtures

from benchmarks import boot_phases
from benchmarks import harness

WARMUP = 2
GROUPS = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


def cast_first(test):
    """Install the what-if above: the bind goes on in its thread, and the
    build is cast with the ARQs created while the scheduler ran."""
    from nova_cyborg.flows.boot import early_arqs
    from nova_cyborg.hooks import conductor as hooks
    created = {}
    start_binding = early_arqs.start_binding
    join = hooks.create_and_bind_arqs

    def start(bind, context, instance, *args, **kwargs):
        with early_arqs._lock:
            created[instance.uuid] = early_arqs._pending.get(instance.uuid)
        return start_binding(bind, context, instance, *args, **kwargs)

    def create_and_bind_arqs(context, instance, *args, **kwargs):
        future = created.pop(instance.uuid, None)
        if future is None:
            return join(context, instance, *args, **kwargs)
        early_arqs.take_binding(instance.uuid)  # not joined, not discarded
        return [arq['uuid'] for arq in future.result()]

    test.useFixture(fixtures.MonkeyPatch(
        'nova_cyborg.flows.boot.early_arqs.start_binding', start))
    test.useFixture(fixtures.MonkeyPatch(
        'nova_cyborg.hooks.conductor.create_and_bind_arqs',
        create_and_bind_arqs))


class BootBench(harness.BenchBase):

    def test_boots(self):
        runs = int(os.environ.get('NOVA_CYBORG_BENCH_BOOTS', '20'))
        overlap = os.environ.get('NOVA_CYBORG_BENCH_OVERLAP', '1') == '1'
        if self.PATCHED and not overlap:
            from nova_cyborg.flows.boot import early_arqs
            self.useFixture(fixtures.MonkeyPatch(
                'nova_cyborg.flows.boot.early_arqs.start', lambda *args: []))
            self.useFixture(fixtures.MonkeyPatch(
                'nova_cyborg.flows.boot.early_arqs.start_binding',
                lambda *args, **kwargs: None))
            self.addCleanup(early_arqs._pending.clear)
        cast = os.environ.get('NOVA_CYBORG_BENCH_CAST_FIRST') == '1'
        if self.PATCHED and cast:
            cast_first(self)
        self.start_accel_compute('compute1', num_vfs=4)
        _name, accel = self.create_profile_flavor(GROUPS)
        plain = self._create_flavor(name='plain')
        flavors = [('accel', accel), ('plain', plain)]
        result = {'accel': [], 'plain': [], 'accel_calls': [],
                  'plain_calls': [], 'delete_calls': [],
                  'accel_phases': [], 'plain_phases': []}
        phases = self.useFixture(boot_phases.Phases(self.PATCHED))
        for i in range(WARMUP + runs):
            for kind, flavor in flavors if i % 2 == 0 else flavors[::-1]:
                begun = time.time()
                cpu = boot_phases.cpu_sample()
                server, seconds, calls = self.timed_boot(flavor)
                spent = phases.between(begun, begun + seconds)
                spent.update(boot_phases.cpu_between(
                    cpu, boot_phases.cpu_sample()))
                if kind == 'accel':
                    self.assert_accelerated(server, 1)
                deleted = self.timed_delete(server)
                if i < WARMUP:
                    continue
                result[kind].append(seconds)
                result[kind + '_calls'].append(calls)
                result[kind + '_phases'].append(spent)
                if kind == 'accel':
                    result['delete_calls'].append(deleted)
        result['overlap'] = overlap
        result['cast_first'] = self.PATCHED and cast
        self.write_result(result)
