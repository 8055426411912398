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
``NOVA_CYBORG_BENCH_CAST_FIRST=0`` turns off, on the patched side, the
cast of the build before Cyborg answers its bind (capability 1.2): the
conductor joins the bind as for a compute that does not report it
(benchmarks.cast_first compares the two).
"""

import os
import time

import fixtures

from benchmarks import boot_phases
from benchmarks import harness

WARMUP = 2
GROUPS = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


def joined(test):
    """Every bind joined before the build is cast, as for a compute without
    capability 1.2."""
    test.useFixture(fixtures.MockPatch(
        'nova_cyborg.model.capability.serves', return_value=False))


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
        cast = os.environ.get('NOVA_CYBORG_BENCH_CAST_FIRST', '1') == '1'
        if self.PATCHED and not cast:
            joined(self)
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
