"""P8 and P9: N hosts with the same new card type starting together.

The herd of ``tests/functional/test_herd.py``, measured, with the shared
code of :mod:`tests.functional.harness.herd`: one real nova-compute per
host in this process (Nova over fakelibvirt), then one
``nova-cyborg-sidecar`` process per host, all spawned in one loop, with
two Intel FPGAs of one card type per host (three ``CUSTOM_`` traits new
to Placement), against the harness's real cyborg-conductor (over
RabbitMQ) and Placement. ``NOVA_CYBORG_BENCH_HOSTS`` hosts (default 8).

P8, start to schedulable: from the spawn of the first sidecar until every
device of every host is schedulable (a provider under the host's compute
node with its inventory and traits, found by ``GET
/allocation_candidates`` the way Nova asks for a device profile group),
polled every 0.25 s. Baseline, in the same process and before the herd:
one host alone, with a card type of its own (other vendor, so the herd's
traits are still new). After the idle window, the devices Cyborg cannot
bind: no deployable, or one without that provider (``rp_uuid``), which
a boot scheduled there would fail on.

P9, conductor RPCs per host per idle hour: after the herd converged and
then no host reported for a whole cycle (a sidecar that wrote a provider
itself reports once more the next cycle, so that a conductor which lost
the device relearns it; those RPCs are shown apart; at most
``SETTLE_CYCLES`` cycles), ``report_data`` RPCs
served by the conductor (counted in the Cyborg
child, by host) over ``IDLE_CYCLES`` discovery cycles of the herd
(``[sidecar] report_interval = CYCLE`` here), scaled to an hour at the
daemon's default intervals: per idle cycle x 3600 / default
``report_interval``, plus 3600 / default ``resync_interval`` (the
periodic full re-report) when that is not 0. The sidecars run with the
default ``resync_interval``.
"""

import os
import statistics
import time

from benchmarks import harness  # noqa: I100 (Nova's monkey_patch first)

from benchmarks import counting
from sidecar import conf as sidecar_conf
from tests.functional.harness import herd

#: ``[sidecar] report_interval`` of the measured sidecars (seconds).
CYCLE = 5
#: At most this many cycles after convergence for the sidecars' last
#: repairs (P9).
SETTLE_CYCLES = 12
#: Idle cycles watched after those (P9).
IDLE_CYCLES = 6
#: Give up on convergence after this many seconds.
DEADLINE = 600
F_HERD = '5eed5eed5eed5eed0123456789abcdef'
F_SOLO = '0b0e0b0e0b0e0b0e0123456789abcdef'


def option_default(name):
    return next(o.default for o in sidecar_conf.SIDECAR_OPTS
                if o.name == name)


class HerdBench(harness.BenchBase):

    NUM_PFS = 2
    NUM_VFS = 4

    def setUp(self):
        super().setUp()
        self.view = herd.PlacementView(self.placement_url)
        self.addCleanup(self.view.close)

    def deployables(self):
        return {d['name']: d['rp_uuid']
                for d in self.cyborg.list_deployables()}

    def start(self, names, function_id, vendor):
        """Computes for ``names``, then their sidecars at once.
        Returns ``(fixture, expected, started_at)``."""
        hosts = herd.start_hosts(self, names, function_id,
                                 num_pfs=self.NUM_PFS, num_vfs=self.NUM_VFS,
                                 vendor=vendor)
        expected = {name: herd.expected_devices(name, host)
                    for name, host in hosts.items()}
        fixture = self.useFixture(herd.HerdFixture(
            hosts, self.broker.transport_url, self.placement_url,
            report_interval=CYCLE, resync_interval=None,
            cyborg_url=self.cyborg.endpoint))
        return fixture, expected, fixture.start()

    def converge(self, fixture, expected, started):
        at = herd.wait_converged(
            self.view, expected, started + DEADLINE, herd=fixture,
            conductor_log=self.cyborg.log_path)
        return sorted(t - started for t in at.values())

    def settle(self, names, deadline):
        """Wait until no host of ``names`` reported for a whole cycle (or
        ``deadline``); return the conductor's report counts then."""
        counts = self.cyborg.counts()['report_data']
        last = {n: counts.get(n, 0) for n in names}
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < CYCLE:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
            counts = self.cyborg.counts()['report_data']
            now = {n: counts.get(n, 0) for n in names}
            if now != last:
                last, quiet_since = now, time.monotonic()
        return counts

    def test_herd(self):
        count = int(os.environ.get('NOVA_CYBORG_BENCH_HOSTS', '8'))
        solo, solo_expected, started = self.start(['solo'], F_SOLO, '10ee')
        (solo_s,) = self.converge(solo, solo_expected, started)
        failures_before = len(herd.conductor_failures(self.cyborg.log_path))

        start = time.monotonic()
        names = ['herd%d' % n for n in range(1, count + 1)]
        fixture, expected, started = self.start(names, F_HERD, '8086')
        computes_s = started - start
        seconds = self.converge(fixture, expected, started)
        converged_at = time.monotonic()
        reports = self.cyborg.counts()['report_data']
        to_converge = [reports.get(name, 0) for name in names]

        # The sidecars' last repairs (a provider written directly is
        # reported once more the next cycle): until no host reported for
        # a whole cycle. Then the idle window, IDLE_CYCLES cycles long.
        settle_start = time.monotonic()
        settled = self.settle(names, settle_start + SETTLE_CYCLES * CYCLE)
        settle_s = time.monotonic() - settle_start
        settle_rpcs = sum(settled.get(n, 0) - reports.get(n, 0)
                          for n in names)
        reports, converged_at = settled, time.monotonic()
        placement_before = self.placement_calls.snapshot()
        time.sleep(IDLE_CYCLES * CYCLE)
        idle_s = time.monotonic() - converged_at
        after = self.cyborg.counts()['report_data']
        placement = counting.difference(self.placement_calls.snapshot(),
                                        placement_before)
        idle_rpcs = sum(after.get(n, 0) - reports.get(n, 0) for n in names)
        self.assertEqual({}, fixture.exited())
        idle_reporters = {n: fixture.hosts[n].tail(25) for n in names
                          if after.get(n, 0) != reports.get(n, 0)}
        known = self.deployables()
        unbindable = [p for name in names
                      for p in herd.cyborg_problems(expected[name], known)]
        self.write_result({
            'hosts': count,
            'devices': sum(len(e) for e in expected.values()),
            'solo_s': solo_s,
            'all_s': seconds[-1],
            'first_s': seconds[0],
            'median_s': statistics.median(seconds),
            'computes_s': computes_s,
            'reports_to_converge': to_converge,
            'cyborg_unbindable': unbindable,
            'conductor_failures': herd.failure_reasons(herd.conductor_failures(
                self.cyborg.log_path)[failures_before:]),
            'settle_rpcs': settle_rpcs,
            'settle_s': settle_s,
            'idle_reporters': idle_reporters,
            'idle_placement_writes_by_call': {
                call: n for call, n in placement.items()
                if call.split(' ', 1)[0] in counting.WRITES},
            'idle_rpcs': idle_rpcs,
            'idle_cycles': IDLE_CYCLES,
            'idle_window_s': idle_s,
            'cycle_s': CYCLE,
            'sidecars': count + 1,
            'idle_placement_calls': sum(placement.values()),
            'idle_placement_writes': counting.writes(placement),
            'default_report_interval': option_default('report_interval'),
            'default_resync_interval': option_default('resync_interval'),
        })
