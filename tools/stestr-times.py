#!/usr/bin/env python3
"""Recorded test durations for stestr's first run on a fresh clone.

stestr partitions a parallel run by the durations in its repository
(``.stestr``); a fresh clone has none, so the tests are dealt round-robin
and one worker can end minutes after the others (CI's functional stage:
20, 22.5 and 24 minutes for its three workers). Seeding the repository
with durations recorded in an earlier run lets stestr balance the workers
(longest first, each to the least loaded); tests not recorded are still
dealt round-robin after them.

``record LOG``: print the durations of the tests a tox or stestr log shows
(``{0} tests.functional.x.XTest.test_y [12.3s] ... ok``) as JSON, for
``tests/functional/durations.json``.

``seed JSON``: load those durations into the stestr repository of the
current directory (created if there is none), as one run whose tests all
passed. stestr's own output is dropped: it would print a Totals block that
CI's closing line counts.

Run ``seed`` with the interpreter of the env that runs stestr.
"""

import datetime
import json
import re
import subprocess
import sys
import tempfile

#: A test's result line in subunit-trace's output, with its duration.
RESULT = re.compile(r'^\{\d+\} (?P<test>\S+) \[(?P<seconds>[0-9.]+)s\] '
                    r'\.\.\. (?:ok|FAILED)\s*$')


def record(log_path):
    durations = {}
    with open(log_path, errors='replace') as log:
        for line in log:
            match = RESULT.match(line)
            if match:
                durations[match.group('test')] = round(
                    float(match.group('seconds')), 1)
    json.dump(durations, sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write('\n')
    return 0


def stream(durations, out):
    """Write a subunit v2 stream: each test passed in its duration."""
    from subunit import v2

    result = v2.StreamResultToBytes(out)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    for test_id, seconds in sorted(durations.items()):
        result.status(test_id=test_id, test_status='inprogress',
                      timestamp=start)
        result.status(test_id=test_id, test_status='success',
                      timestamp=start + datetime.timedelta(seconds=seconds))


def seed(json_path, repo_dir=None):
    """Load the durations into the stestr repository of ``repo_dir`` (the
    current directory by default)."""
    with open(json_path) as f:
        durations = json.load(f)
    with tempfile.NamedTemporaryFile(suffix='.subunit') as out:
        stream(durations, out)
        out.flush()
        subprocess.run([sys.executable, '-m', 'stestr', 'load',
                        '--force-init', out.name], check=True, cwd=repo_dir,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print('stestr: durations of %d tests recorded from %s' % (
        len(durations), json_path))
    return 0


def main(argv):
    if len(argv) != 3 or argv[1] not in ('record', 'seed'):
        sys.stderr.write('usage: %s record LOG | seed JSON\n' % argv[0])
        return 2
    return record(argv[2]) if argv[1] == 'record' else seed(argv[2])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
