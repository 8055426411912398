#!/usr/bin/env python3
"""Print CI's closing line from a tox log: ``N passed, N failed, N skipped``.

stestr prints a ``Totals`` block (`` - Passed: N``, `` - Failed: N``,
`` - Skipped: N``, `` - Unexpected Success: N``) per run but no single
closing line; CI reads the last line, which starts with ``N passed, N
failed``. Unexpected successes count as failed, as stestr counts them.

A tox env can fail where no Totals block says so: before its tests (the
tempest env's cloud did not come up, a dependency did not install), between
or after them (a second command, ``commands_post``), or in an env that runs
no tests (pep8). tox says so in its report at the end (``  tempest: FAIL
code 1 (12.3 seconds)``, ``  py3: OK (...)``; each env also ends with
``tempest: FAIL ✖ in 12.3 seconds``). Each env that failed without a failed
test in its Totals counts as one failed, and is named after the counts::

    759 passed, 1 failed, 0 skipped (tempest: FAIL before any test ran)

An env that started but has no result (the run was cut short) counts as
failed too. A log in which no test ran is a failure. Exit status: 1 if
anything failed or no test ran, else 0.

CI keeps only the log's tail, so the tests that failed are named just
before the closing line, each with the end of its traceback (where the
exception is), wherever in the log they failed.
"""

import collections
import re
import sys

#: tox's lines that start a step of an env: ``py3: commands[0]> stestr
#: ...``, ``tempest: commands_pre[2]> python -m localcloud up``,
#: ``pep8: install_deps> python -I -m pip install ...``.
STEP = re.compile(r'^(?P<env>[A-Za-z0-9_.-]+): (?P<step>[a-z_]+)'
                  r'(?:\[\d+\])?> ')
#: tox's result of an env: in its report (indented, ``FAIL code 1``) or
#: after the env (``FAIL ✖ in 3 seconds``). Only FAIL is a failure: tox
#: itself passes a run with an env skipped, not available (a missing
#: interpreter) or whose failure is ignored (``ignore_outcome``).
RESULT = re.compile(r'^\s*(?P<env>[A-Za-z0-9_.-]+): (?P<status>OK|FAIL|SKIP|'
                    r'NOT AVAILABLE|IGNORED FAIL)(?: code (?P<code>-?\d+))?'
                    r'(?:\s|$)')
#: A line of a stestr Totals block.
TOTAL = re.compile(r'^ - (?P<kind>Passed|Failed|Skipped|Unexpected Success)'
                   r': (?P<count>\d+)\s*$')
#: stestr's (subunit-trace's) line of a failed test:
#: ``{1} tests.unit.test_x.XTest.test_y [0.4s] ... FAILED``.
FAILED = re.compile(r'^\{\d+\} (?P<test>\S+)(?: \[[^\]]*\])? \.\.\. FAILED')
#: What ends a failed test's details: the next test's line, a Totals block.
DETAILS_END = re.compile(r'^(\{\d+\} \S|={3,}$)')
#: Lines of a traceback's end printed per failed test; failed tests named.
TRACEBACK_LINES = 12
MAX_NAMED = 10
#: Colours, if tox or stestr was made to print them into the log.
ANSI = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')


class Env(object):
    """What the log says about one tox env (or the lines before any)."""

    def __init__(self, name):
        self.name = name
        self.counts = collections.Counter()
        self.runs = 0
        self.status = None
        self.code = None
        self.steps = []

    def add_total(self, kind, count):
        if kind == 'Unexpected Success':
            kind = 'Failed'
        self.counts[kind] += count
        # Each Totals block has one Passed line.
        if kind == 'Passed':
            self.runs += 1

    def problem(self, finished):
        """Why this env counts as one more failure, or None."""
        if self.status == 'FAIL':
            if self.counts['Failed']:
                return None
            what = 'FAIL code %s' % self.code if self.code else 'FAIL'
            if not self.runs:
                return '%s: %s before any test ran' % (self.name, what)
            return '%s: %s with no failed test' % (self.name, what)
        if self.status is None and self.steps and not finished:
            return '%s: no result, the run was cut short' % self.name
        return None


def summarize(lines):
    """Return (closing line, exit status) for the lines of a tox log."""
    envs = collections.OrderedDict()
    # Totals before any tox step: a log of stestr alone.
    preamble = current = Env(None)
    finished = False
    for raw in lines:
        line = ANSI.sub('', raw.rstrip('\n'))
        step = STEP.match(line)
        # tox's packaging envs (.pkg) have no result of their own: the
        # envs they build for fail if they fail.
        if step and not step.group('env').startswith('.'):
            name = step.group('env')
            current = envs.setdefault(name, Env(name))
            current.steps.append(step.group('step'))
            continue
        total = TOTAL.match(line)
        if total:
            current.add_total(total.group('kind'), int(total.group('count')))
            continue
        result = RESULT.match(line)
        if result and result.group('env') in envs:
            env = envs[result.group('env')]
            env.status = result.group('status')
            env.code = result.group('code') or env.code
            continue
        if re.match(r'^\s*(congratulations :\)|evaluation failed :\()',
                    line):
            finished = True

    counts = collections.Counter()
    runs = 0
    for env in [preamble] + list(envs.values()):
        counts.update(env.counts)
        runs += env.runs
    problems = [p for p in (env.problem(finished) for env in envs.values())
                if p]
    failed = counts['Failed'] + len(problems)
    if not runs or not (counts['Passed'] or counts['Failed']):
        problems.append('no test ran')
        failed = max(failed, 1)
    line = '%d passed, %d failed, %d skipped' % (
        counts['Passed'], failed, counts['Skipped'])
    if problems:
        line += ' (%s)' % '; '.join(problems)
    return line, 1 if failed else 0


class Failure(object):
    """A failed test and the lines of its captured traceback."""

    def __init__(self, env, test):
        self.env = env
        self.test = test
        self.traceback = []
        self._section = None

    def add(self, line):
        if line.startswith('Captured '):
            self._section = line.rstrip(':')
        elif self._section == 'Captured traceback' and line.strip(
                ) and not line.startswith('~~~'):
            self.traceback.append(line)


def failures(lines):
    """The failed tests of a tox log, in the order they failed."""
    found = []
    env = None
    current = None
    for raw in lines:
        line = ANSI.sub('', raw.rstrip('\n'))
        step = STEP.match(line)
        if step:
            env = step.group('env')
            current = None
            continue
        failed = FAILED.match(line)
        if failed:
            current = Failure(env, failed.group('test'))
            found.append(current)
        elif current is not None and DETAILS_END.match(line):
            current = None
        elif current is not None:
            current.add(line)
    return found


def describe(found):
    """Lines naming the failed tests, each with its traceback's end."""
    if not found:
        return []
    out = ['Failed tests (%d):' % len(found)]
    for failure in found[:MAX_NAMED]:
        out.append('- %s (%s)' % (failure.test, failure.env or 'stestr'))
        out.extend('    ' + line.strip()
                   for line in failure.traceback[-TRACEBACK_LINES:])
    if len(found) > MAX_NAMED:
        out.append('... and %d more' % (len(found) - MAX_NAMED))
    return out


def main(path):
    try:
        with open(path, errors='replace') as log:
            lines = log.readlines()
        for described in describe(failures(lines)):
            print(described)
        line, status = summarize(lines)
    except Exception as e:
        # Still a closing line, and a failed one.
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        line, status = ('0 passed, 1 failed, 0 skipped (the log could not '
                        'be summed up: %s)' % e), 1
    print(line)
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
