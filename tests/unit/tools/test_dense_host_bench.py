"""benchmarks/dense_host.py (P10): the hosts it measures hold what it
says, and its rows are ratios to the small host of the same run."""

import testtools

from benchmarks import dense_host


class DenseHostBenchTest(testtools.TestCase):

    def test_small_host_is_read_whole(self):
        small = dense_host.measure('small')
        # An H100 (2 typed VFs: 2 providers), a D5005, an E810 with 4 VFs.
        self.assertEqual((11, 3, 4, 7), (
            small['functions'], small['devices'], small['providers'],
            small['attach_handles']))
        self.assertGreater(small['peak_kib'], 0)

    def test_rows_are_ratios_to_the_small_host(self):
        data = {'small': {'functions': 11, 'providers': 4, 'cycle_s': 0.01,
                          'peak_kib': 100},
                'dense': {'functions': 438, 'providers': 170,
                          'cycle_s': 0.3, 'peak_kib': 3000}}
        cycle, memory = dense_host.rows(data)
        self.assertEqual(
            ('P10 dense host discovery cycle (438 functions, 170 '
             'providers)', '300 ms', 'small host (11 functions) 10 ms'),
            (cycle.figure, cycle.measured, cycle.baseline))
        self.assertAlmostEqual(30.0, cycle.ratio)
        self.assertAlmostEqual(30.0, memory.ratio)
        self.assertIsNone(cycle.met)

    def test_not_measured(self):
        (row,) = dense_host.rows(None, 'failed, see log')
        self.assertEqual(('not measured', 'failed, see log'),
                         (row.measured, row.note))
