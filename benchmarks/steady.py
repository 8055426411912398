"""P5: what an agent costs when nothing changed, ours against upstream's.

Both report to the same real cyborg-conductor (the harness's Cyborg child,
which counts the ``report_data`` RPCs it serves, by host) and write to the
same Placement (the harness's loopback Placement, which counts requests):

* ours: the sidecar of ``compute1`` (the ``fpga`` driver over a generated
  sysfs tree of one FPGA with 2 VFs) reports at start; then ``CYCLES``
  discovery cycles run with nothing changed;
* upstream: cyborg-agent 17 with its fake driver, in its own process
  (:mod:`benchmarks.agent_process`) for ``compute2``, runs ``CYCLES + 1``
  cycles of its periodic task; the first reports the device.

Per cycle after the first: ``report_data`` RPCs and Placement writes
(PUT, POST, PATCH, DELETE), from any client, during that cycle.
"""

import os
import subprocess
import sys

from benchmarks import harness  # noqa: I100 (Nova's monkey_patch first)

from benchmarks import counting
from tests.functional.harness import child

CYCLES = 5

# cyborg-agent's configuration (never import benchmarks.agent_process
# here: it imports Cyborg).
AGENT_CONFIG = """\
[DEFAULT]
host = {host}
transport_url = {transport_url}
log_file = {log_path}
use_stderr = false

[agent]
enabled_drivers = fake_driver
resource_provider_name = {host}

[placement]
auth_type = admin_token
endpoint = {placement_url}
token = admin
"""


class SteadyBench(harness.BenchBase):

    def snapshot(self):
        return (self.cyborg.counts()['report_data'],
                self.placement_calls.snapshot())

    def measure(self, host, cycle, count):
        """``cycle()`` ``count`` times; per cycle RPCs, Placement calls
        and seconds."""
        result = []
        for _i in range(count):
            reports, calls = self.snapshot()
            seconds = cycle()
            reports_after, calls_after = self.snapshot()
            placement = counting.difference(calls_after, calls)
            result.append({
                'report_data': reports_after.get(host, 0) - reports.get(
                    host, 0),
                'placement_writes': counting.writes(placement),
                'placement_calls': placement,
                'seconds': seconds})
        return result

    def ours(self):
        self.start_accel_compute('compute1')
        sidecar = self.sidecars['compute1']

        def cycle():
            return harness.elapsed(sidecar.cycle)
        return self.measure('compute1', cycle, CYCLES)

    def upstream(self):
        self.start_compute(hostname='compute2')
        base_dir = self.cyborg.base_dir
        config = os.path.join(base_dir, 'agent.conf')
        with open(config, 'w') as f:
            f.write(AGENT_CONFIG.format(
                host='compute2', transport_url=self.broker.transport_url,
                log_path=os.path.join(base_dir, 'agent.log'),
                placement_url=self.placement_url))
        proc = subprocess.Popen(
            [sys.executable, '-m', 'benchmarks.agent_process',
             '--config-file', config], cwd=child.REPO_ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.stdin.close)

        def cycle():
            proc.stdin.write('go\n')
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line.startswith('cycle '):
                raise AssertionError('cyborg-agent ended: %r (see %s)' % (
                    line, os.path.join(base_dir, 'agent.log')))
            return float(line.split()[2])
        return self.measure('compute2', cycle, CYCLES + 1)

    def test_steady(self):
        ours = self.ours()
        # cyborg-agent's first cycle reports the device: not steady.
        upstream = self.upstream()
        self.write_result({'ours': ours, 'upstream_first': upstream[0],
                           'upstream': upstream[1:]})
