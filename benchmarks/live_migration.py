"""P12: live migration of a server with a device, against a plain one.

The two hosts of the functional live migration tests
(``tests/functional/test_live_migration.py``), on Nova's fakelibvirt with
its ``migrateToURI3`` replaced as there (``tests/functional/
live_base.py``): :class:`VFMigrationBench`, VFs of the generic PCI driver
marked live-migratable; :class:`VGPUMigrationBench`, a vGPU whose type is
live-migratable. The owner's server with the device and a plain server
(same hosts, same process) are live-migrated in turn by the cloud admin,
each to the other host, ``NOVA_CYBORG_BENCH_ROUNDS`` times each (default
15) after ``WARMUP`` migrations of each that are not counted.

Kept for each migration (wall clock, in-process, no polling):

* ``total``: from the POST of ``os-migrateLive`` to the later end of the
  source's ``ComputeManager._post_live_migration`` and the destination's
  ``post_live_migration_at_destination``;
* ``switch``: from the return of ``migrateToURI3`` on the source to the
  end of ``post_live_migration_at_destination`` (Nova's view of the
  switch-over; not guest downtime: no guest runs here);
* ``downtime``: libvirt's ``downtime`` field in the completed job's
  statistics that Nova's driver read (``Domain.jobStats``), or None when
  absent (fakelibvirt reports none: see :func:`benchmarks.action_figures.
  job_downtime`);
* ``pre``: the destination's ``pre_live_migration`` (where the
  destination's devices are bound).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import test_live_migration as tlm  # noqa: I100

import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from benchmarks import action_figures  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks import stopwatch  # noqa: E402

WARMUP = 1
MANAGER = 'nova.compute.manager.ComputeManager.'
WATCHED = [
    (MANAGER + 'pre_live_migration', 'pre'),
    (MANAGER + '_post_live_migration', 'post.source'),
    (MANAGER + 'post_live_migration_at_destination', 'post.dest'),
]


class MigrationBench(object):
    """Mixed into the hosts of a functional live migration test."""

    KIND = None

    def _migrate_stub(self, domain, destination, params=None, flags=0):
        start = time.time()
        try:
            return super()._migrate_stub(domain, destination, params, flags)
        finally:
            self.libvirt_calls.append((start, time.time()))

    def _watch(self):
        self.libvirt_calls = []
        self.job_stats = []
        lock = threading.Lock()
        real = fakelibvirt.Domain.jobStats

        def job_stats(domain, flags=0):
            stats = real(domain, flags)
            with lock:
                self.job_stats.append((time.time(), dict(stats)))
            return stats
        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Domain, 'jobStats', new=job_stats))
        self.watch = self.useFixture(stopwatch.Stopwatch(WATCHED))

    def timed_migration(self, server):
        """One live migration to the other host, measured."""
        begun = time.time()
        self.admin_starts_live_migration(server)
        source = self.watch.wait('post.source', begun, uuid=server['id'])
        dest = self.watch.wait('post.dest', begun, uuid=server['id'])
        self.assertTrue(source.ok and dest.ok, 'live migration failed')
        with self.acting(self.cloud_admin_api):
            self._wait_for_migration_status(server, ['completed'])
        (call,) = [c for c in self.libvirt_calls if c[0] >= begun]
        pre = [c for c in self.watch.between(begun, dest.end)
               if c.name == 'pre']
        stats = [s for t, s in self.job_stats if begun <= t <= dest.end]
        return {'total': max(source.end, dest.end) - begun,
                'switch': dest.end - call[1],
                'pre': sum(c.end - c.start for c in pre),
                'downtime': action_figures.job_downtime(stats),
                'job_keys': sorted({k for s in stats for k in s})}

    def test_live_migrations(self):
        rounds = int(os.environ.get('NOVA_CYBORG_BENCH_ROUNDS', '15'))
        self._watch()
        with self.acting(self.owner_api):
            plain = self.boot(self._create_flavor(name='plain'))
        servers = [('device', self.server), ('plain', plain)]
        result = {'kind': self.KIND, 'rounds': rounds, 'warmup': WARMUP,
                  'job_keys': []}
        for name, _server in servers:
            result[name] = {'total': [], 'switch': [], 'pre': [],
                            'downtime': []}
        for i in range(WARMUP + rounds):
            for name, server in servers if i % 2 else servers[::-1]:
                one = self.timed_migration(server)
                if i < WARMUP:
                    continue
                for key in ('total', 'switch', 'pre', 'downtime'):
                    result[name][key].append(one[key])
                result['job_keys'] = sorted(set(result['job_keys']) |
                                            set(one['job_keys']))
        self.write_result(result)


class VFMigrationBench(MigrationBench, tlm.VFHosts, harness.BenchBase):
    KIND = 'VF'


class VGPUMigrationBench(MigrationBench, tlm.VGPUHosts, harness.BenchBase):
    KIND = 'vGPU'
