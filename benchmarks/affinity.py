"""Reschedules per boot, with and without the function affinity weigher.

Seed 004: two servers asking two different functions of single-program
FPGAs, booted at once, race for one card when Nova's weighers send both to
the same host; the loser's programming is refused and it is rescheduled.

Two hosts of the functional harness, one FPGA each; ``compute1`` has more
RAM and, as in :mod:`tests.functional.test_weigher`, Nova's RAM weigher is
the only one of Nova's enabled, so it prefers ``compute1``.
``nova_cyborg.weigher.FunctionAffinityWeigher`` is in ``[filter_scheduler]
weight_classes`` too; a
round is "without" when ``[nova_cyborg] function_affinity_weight_multiplier``
is 0 (the weigher then weighs nothing) and "with" at its default. Rounds
alternate (without, with, ...), ``NOVA_CYBORG_BENCH_ROUNDS`` of each
(default 10). A round POSTs a server asking function A and one asking B at
once (which goes first alternates), waits until the compute saved both
ACTIVE or ERROR, counts the reschedules (calls of the conductor's
``build_instances``, which only a compute giving a build up makes) and the
FPGA programmings, then deletes both. The cards keep their functions from
round to round, as in a cloud: only the first round meets blank cards
(``NOVA_CYBORG_BENCH_AFFINITY_FIRST=with`` makes it a "with" round).

Run it alone (CI never does), against a patched Nova::

    tools/rabbitmq start
    python -m testtools.run benchmarks.affinity

It prints the figures (JSON to ``$NOVA_CYBORG_BENCH_OUT`` if set);
``benchmarks/results/affinity.md`` holds a run.
"""

import os
import time

from benchmarks import harness  # noqa: I100 (Nova's monkey_patch first)

from nova_cyborg.conf import nova_cyborg as nc_opts
from tests.functional import test_weigher


def _multiplier():
    return next(o.default for o in nc_opts.OPTS
                if o.name == 'function_affinity_weight_multiplier')


class AffinityBench(harness.BenchBase, test_weigher.AffinityTestBase):

    WEIGHER = True

    def _programmings(self):
        return sum(len(self.programmed(h)) for h in ('compute1', 'compute2'))

    def _state(self, server_id):
        try:
            return self.clock.wait(server_id)[1]
        except AssertionError:
            return 'stuck'

    def _round(self, flavors):
        reschedules = self.reschedules.count
        programmed = self._programmings()
        start = time.monotonic()
        servers = [self.post_server(f, name='bench-%d' % i)
                   for i, f in enumerate(flavors)]
        states = [self._state(s['id']) for s in servers]
        seconds = time.monotonic() - start
        servers = [self.api.get_server(s['id']) for s in servers]
        hosts = [s.get('OS-EXT-SRV-ATTR:host') for s in servers]
        for server in servers:
            self._delete_server(server)
        return {'reschedules': self.reschedules.count - reschedules,
                'programmings': self._programmings() - programmed,
                'errors': states.count('error'),
                'stuck': states.count('stuck'), 'seconds': seconds,
                'apart': len(set(hosts)) == 2 and None not in hosts}

    def test_affinity(self):
        rounds = int(os.environ.get('NOVA_CYBORG_BENCH_ROUNDS', '10'))
        self._two_hosts()
        flavor_a = self._function_profile(test_weigher.F_A)
        flavor_b = self._function_profile(test_weigher.F_B)
        runs = {'without': [], 'with': []}
        for number in range(rounds):
            order = ((flavor_a, flavor_b) if number % 2 == 0
                     else (flavor_b, flavor_a))
            sides = (('without', 0.0), ('with', _multiplier()))
            if os.environ.get('NOVA_CYBORG_BENCH_AFFINITY_FIRST') == 'with':
                sides = sides[::-1]
            for side, multiplier in sides:
                self.flags(function_affinity_weight_multiplier=multiplier,
                           group='nova_cyborg')
                runs[side].append(self._round(order))
        figures = {}
        for side, results in runs.items():
            boots = 2 * len(results)
            figures[side] = {
                'boots': boots,
                'reschedules_per_boot': sum(
                    r['reschedules'] for r in results) / boots,
                'programmings_per_boot': sum(
                    r['programmings'] for r in results) / boots,
                'errors': sum(r['errors'] for r in results),
                'stuck': sum(r['stuck'] for r in results),
                'rounds_apart': sum(1 for r in results if r['apart']),
                'median_round_s': sorted(
                    r['seconds'] for r in results)[len(results) // 2],
            }
        for side in ('without', 'with'):
            f = figures[side]
            print('%-7s weigher: %d boots, %.2f reschedules per boot, '
                  '%.2f programmings per boot, %d ERROR, %d stuck in BUILD, '
                  '%d of %d rounds on two hosts, median round %.1f s' % (
                      side, f['boots'], f['reschedules_per_boot'],
                      f['programmings_per_boot'], f['errors'], f['stuck'],
                      f['rounds_apart'], len(runs[side]),
                      f['median_round_s']))
        self.write_result({'affinity': figures, 'rounds': runs})
