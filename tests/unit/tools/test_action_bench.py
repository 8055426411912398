"""benchmarks/action_figures.py (P11, P12): percentiles, libvirt's
downtime as Nova read it, and rows that are ratios to a baseline of the
same run; a downtime libvirt did not report is never a number."""

import testtools

from benchmarks import action_figures
from benchmarks import run


class SummaryTest(testtools.TestCase):

    def test_median_and_nearest_rank_p95(self):
        values = [i / 100.0 for i in range(1, 21)]   # 0.01 .. 0.20
        n, median, p95 = action_figures.summary(values[::-1])
        self.assertEqual(20, n)
        self.assertAlmostEqual(0.105, median)
        # ceil(0.95 * 20) = 19th of 20.
        self.assertAlmostEqual(0.19, p95)

    def test_small_and_empty(self):
        self.assertEqual((1, 0.5, 0.5), action_figures.summary([0.5]))
        self.assertEqual((0, None, None), action_figures.summary([]))

    def test_differences(self):
        self.assertAlmostEqual(0.2, action_figures.differences(
            [0.9, 1.0, 1.1], [0.7, 0.8, 0.9]))
        self.assertIsNone(action_figures.differences([], [1.0]))


class JobDowntimeTest(testtools.TestCase):

    def test_the_completed_job_downtime_in_seconds(self):
        stats = [{'type': 2, 'downtime': 999},   # still running
                 {'type': 3, 'downtime': 42, 'time_elapsed': 3000}]
        self.assertAlmostEqual(0.042, action_figures.job_downtime(stats))

    def test_the_last_completed_job_counts(self):
        stats = [{'type': 3, 'downtime': 10}, {'type': 1},
                 {'type': 3, 'downtime': 30}]
        self.assertAlmostEqual(0.03, action_figures.job_downtime(stats))

    def test_a_missing_field_is_none_not_zero(self):
        # fakelibvirt's jobStats(): the job type only.
        self.assertIsNone(action_figures.job_downtime(
            [{'type': 2}, {'type': 3}]))
        self.assertIsNone(action_figures.job_downtime([]))
        self.assertEqual(0, action_figures.job_downtime(
            [{'type': 3, 'downtime': 0}]))

    def test_no_completed_job(self):
        self.assertIsNone(action_figures.job_downtime(
            [{'type': 2, 'downtime': 5}]))


def _attach_data():
    return {'boot': {'fpga': [0.9, 1.0, 1.1], 'vgpu': [1.2, 1.3, 1.4],
                     'plain': [0.7, 0.8, 0.9]},
            'boot_bind': {'fpga': [0.1, 0.12], 'vgpu': [0.15]},
            'actions': {'add fpga running': [0.3, 0.4, 0.5],
                        'remove fpga running': [0.2, 0.2, 0.2],
                        'add vgpu stopped': [0.5, 0.5, 0.6],
                        'remove vgpu stopped': [0.1, 0.1, 0.1]},
            'action_bind': {'add fpga running': [0.05, 0.06],
                            'add vgpu stopped': [0.075]}}


class AttachRowsTest(testtools.TestCase):

    def test_ratios_to_what_the_device_adds_to_a_boot(self):
        rows = action_figures.attach_rows(_attach_data())
        by_name = {r.figure: r for r in rows}
        median = by_name[
            'P11 addAccelerator FPGA VF, running server, median (n=3)']
        self.assertEqual(('400 ms', 'fpga boot - plain 200 ms'),
                         (median.measured, median.baseline))
        self.assertAlmostEqual(2.0, median.ratio)
        p95 = by_name['P11 addAccelerator FPGA VF, running server, p95']
        self.assertAlmostEqual(2.5, p95.ratio)
        vgpu = by_name[
            'P11 addAccelerator vGPU (mdev), stopped server, median (n=3)']
        self.assertAlmostEqual(1.0, vgpu.ratio)
        self.assertIn('running guest', vgpu.note)
        bind = by_name['P11 (info) Cyborg bind (PATCH) in addAccelerator '
                       'FPGA VF, running server, median']
        self.assertEqual(('55 ms', 'in a boot 110 ms'),
                         (bind.measured, bind.baseline))
        self.assertAlmostEqual(0.5, bind.ratio)
        self.assertEqual(10, len(rows))
        self.assertEqual({None}, {r.met for r in rows})

    def test_not_measured(self):
        (row,) = action_figures.attach_rows(None, 'failed, see log')
        self.assertEqual(('not measured', 'failed, see log'),
                         (row.measured, row.note))


class MigrationRowsTest(testtools.TestCase):

    def data(self, downtime):
        return {'kind': 'VF',
                'device': {'total': [4.0, 5.0, 6.0],
                           'switch': [1.0, 1.0, 1.2],
                           'downtime': downtime},
                'plain': {'total': [2.0, 2.5, 3.0], 'switch': [0.5, 0.6],
                          'downtime': [None, None]}}

    def test_downtime_libvirt_did_not_report(self):
        rows = action_figures.migration_rows(self.data([None] * 3))
        by_name = {r.figure: r for r in rows}
        total = by_name['P12 live migration, VF server, total, median (n=3)']
        self.assertEqual(('5000 ms', 'plain server 2500 ms'),
                         (total.measured, total.baseline))
        self.assertAlmostEqual(2.0, total.ratio)
        down = by_name['P12 guest downtime (libvirt), VF server']
        self.assertEqual('not measured', down.measured)
        self.assertIsNone(down.ratio)
        self.assertIn('no "downtime" field in any of the 3', down.note)
        switch = by_name[
            "P12 switch-over (Nova's view), VF server, median (n=3)"]
        self.assertAlmostEqual(1.0 / 0.55, switch.ratio)
        self.assertIn('Not guest downtime', switch.note)

    def test_downtime_libvirt_reported(self):
        data = self.data([0.04, 0.05, 0.06])
        data['plain']['downtime'] = [0.02, 0.02]
        rows = action_figures.migration_rows(data)
        by_name = {r.figure: r for r in rows}
        down = by_name[
            'P12 guest downtime (libvirt), VF server, median (n=3)']
        self.assertEqual('50 ms', down.measured)
        self.assertAlmostEqual(2.5, down.ratio)


class SelectionTest(testtools.TestCase):

    def test_attach_and_migration_run_alone(self):
        args = run.parse_args(['attach', 'migration',
                               '--migration-rounds', '5'])
        self.assertEqual(run.FIGURES - {'P11', 'P12'},
                         run.selected_skip(args))
        self.assertEqual(5, args.migration_rounds)
        self.assertEqual(20, args.attach_rounds)


class PhaseMediansTest(testtools.TestCase):

    def test_longest_first_absent_counts_zero(self):
        phases = [{'handler': 900.0, 'libvirt': 100.0},
                  {'handler': 1100.0, 'libvirt': 300.0, 'cyborg.get': 50.0},
                  {'handler': 1000.0, 'libvirt': 200.0}]
        self.assertEqual(
            [('handler', 1000.0, 3), ('libvirt', 200.0, 3),
             ('cyborg.get', 0, 1)],
            action_figures.phase_medians(phases))

    def test_a_row_whose_note_lists_them(self):
        data = _attach_data()
        data['action_phases'] = {'add fpga running': [
            {'handler': 900.0, 'api and cast': 40.0}]}
        (row,) = [r for r in action_figures.attach_rows(data)
                  if r.figure.startswith('P11 (info) where')]
        self.assertIn('(n=1): handler 900, api and cast 40.', row.note)
