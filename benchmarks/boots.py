"""P1, P2 and P3: boots to ACTIVE, and the Cyborg calls each one makes.

One host with one FPGA of 4 VFs; a flavor with a one-FPGA device profile
and the same flavor without it. Boots alternate (accel then plain, plain
then accel, ...) and each server is deleted before the next boot, so both
kinds meet the same state; the first ``WARMUP`` boots of each kind are not
counted. Run by benchmarks.run once against patched Nova and once against
unpatched Nova (``NOVA_CYBORG_BENCH_PATCHED=0``); ``NOVA_CYBORG_BENCH_BOOTS``
boots of each kind are measured (default 20).
"""

import os

from benchmarks import harness

WARMUP = 2
GROUPS = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


class BootBench(harness.BenchBase):

    def test_boots(self):
        runs = int(os.environ.get('NOVA_CYBORG_BENCH_BOOTS', '20'))
        self.start_accel_compute('compute1', num_vfs=4)
        _name, accel = self.create_profile_flavor(GROUPS)
        plain = self._create_flavor(name='plain')
        flavors = [('accel', accel), ('plain', plain)]
        result = {'accel': [], 'plain': [], 'accel_calls': [],
                  'plain_calls': [], 'delete_calls': []}
        for i in range(WARMUP + runs):
            for kind, flavor in flavors if i % 2 == 0 else flavors[::-1]:
                server, seconds, calls = self.timed_boot(flavor)
                if kind == 'accel':
                    self.assert_accelerated(server, 1)
                deleted = self.timed_delete(server)
                if i < WARMUP:
                    continue
                result[kind].append(seconds)
                result[kind + '_calls'].append(calls)
                if kind == 'accel':
                    result['delete_calls'].append(deleted)
        self.write_result(result)
