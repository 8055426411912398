#!/usr/bin/env python3
"""Sum the stestr totals in a test log and print CI's closing line.

stestr prints ``Totals`` blocks (`` - Passed: N``, `` - Failed: N``,
`` - Skipped: N``) per run but no single closing line; CI reads the last
line ``N passed, N failed[, N skipped]``. A log without any test run is a
failure: exit 1.
"""

import re
import sys


def main(path):
    totals = {'Passed': 0, 'Failed': 0, 'Skipped': 0}
    runs = 0
    with open(path, errors='replace') as log:
        for line in log:
            match = re.match(r'^ - (Passed|Failed|Skipped): (\d+)\s*$', line)
            if match:
                totals[match.group(1)] += int(match.group(2))
                runs += match.group(1) == 'Passed'
    if not runs or not (totals['Passed'] or totals['Failed']):
        print('0 passed, 1 failed (no test ran)')
        return 1
    print('%d passed, %d failed, %d skipped' % (
        totals['Passed'], totals['Failed'], totals['Skipped']))
    return 1 if totals['Failed'] else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
