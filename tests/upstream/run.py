# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Run Nova's own unit tests, as installed with the nova wheel.

The tests run from the installed package (``<site-packages>/nova/tests/
unit``), so they test the tree ``nova-cyborg-patch`` changed: patched, or
reverted for the baseline. stestr keeps its repository in ``--work-dir``.

Which tests (``tests/upstream/``):

* ``ci-subset.txt`` (the default) or ``full-scope.txt`` (``--full``):
  regexes, one a line, ``#`` comments;
* regexes given as arguments replace that scope;
* ``expected-differences.txt``: upstream tests whose expectation the
  series changes on purpose, excluded. A line is a test id, or a module
  or class prefix, then ``  # `` and the reason (required).
  ``--expected FILE`` (repeatable) reads the given lists instead, e.g.
  that one and ``expected-differences-nova33.txt`` for Nova 33.

The run ends with stestr's own output and exit status.
"""

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CI_SUBSET = os.path.join(HERE, 'ci-subset.txt')
FULL_SCOPE = os.path.join(HERE, 'full-scope.txt')
EXPECTED = os.path.join(HERE, 'expected-differences.txt')


def nova_site_packages():
    """The directory the installed ``nova`` package is in."""
    import nova
    return os.path.dirname(os.path.dirname(os.path.abspath(nova.__file__)))


def read_differences(path):
    """[(test id or prefix, reason)] of the expected differences.

    :raises: ValueError for a line without a ``  # reason``.
    """
    result = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip('\n')
            if not line.strip() or line.lstrip().startswith('#'):
                continue
            test_id, sep, reason = line.partition('  # ')
            test_id = test_id.strip()
            if not sep or not reason.strip() or ' ' in test_id:
                raise ValueError(
                    '%s:%d: expected "<test id>  # <reason>", got %r'
                    % (path, number, line))
            result.append((test_id, reason.strip()))
    return result


def exclusion_regex(test_id):
    """A regex matching ``test_id`` and the tests under it (a module or
    class prefix), and its scenarios (``test_x(scenario)``)."""
    return '^%s(?:[.(\\[]|$)' % re.escape(test_id)


def write_exclude_list(differences, path):
    with open(path, 'w') as f:
        for test_id, reason in differences:
            # stestr reads "<regex> # <comment>"; the reason has no '#'.
            f.write('%s # %s\n' % (exclusion_regex(test_id),
                                   reason.replace('#', '')))


def argument_parser(description, full_scope, expected):
    """The arguments both runners take (run_functional.py adds its own);
    ``expected``: the default expected differences list."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--work-dir', required=True,
                        help="Where stestr keeps its repository.")
    parser.add_argument('--concurrency', type=int, default=2)
    parser.add_argument('--full', action='store_true',
                        help='The whole scope (%s), not the CI subset.'
                             % os.path.basename(full_scope))
    parser.add_argument('--no-exclude', action='store_true',
                        help='Run the expected differences too.')
    parser.add_argument('--expected', action='append', metavar='FILE',
                        help='An expected differences list (repeatable); '
                             'default: %s.' % os.path.basename(expected))
    parser.set_defaults(default_expected=expected)
    parser.add_argument('regexes', nargs='*',
                        help='Test regexes: replace the scope.')
    return parser


def expected_lists(args):
    """The expected differences lists ``args`` names (or the default)."""
    return args.expected or [args.default_expected]


def read_all_differences(paths):
    """:func:`read_differences` of every list in ``paths``, together."""
    differences = []
    for path in paths:
        differences += read_differences(path)
    return differences


def stestr_command(args, site, test_path, differences, ci_subset,
                   full_scope):
    """The work directory (made, with stestr's repository and the
    exclude list of ``differences`` in it) and stestr's run command."""
    work_dir = os.path.abspath(args.work_dir)
    os.makedirs(work_dir, exist_ok=True)
    exclude_list = os.path.join(work_dir, 'exclude-list.txt')
    write_exclude_list(differences, exclude_list)
    stestr = [sys.executable, '-m', 'stestr']
    if not os.path.isdir(os.path.join(work_dir, '.stestr')):
        subprocess.check_call(
            stestr + ['--test-path', test_path, '--top-dir', site, 'init'],
            cwd=work_dir, stdout=subprocess.DEVNULL)
    cmd = stestr + ['--test-path', test_path, '--top-dir', site,
                    'run', '--concurrency', str(args.concurrency),
                    '--exclude-list', exclude_list]
    if args.regexes:
        cmd += args.regexes
    else:
        cmd += ['--include-list', full_scope if args.full else ci_subset]
    return work_dir, cmd


def main(argv=None):
    parser = argument_parser(__doc__.splitlines()[0], FULL_SCOPE, EXPECTED)
    args = parser.parse_args(argv)
    expected = expected_lists(args)
    differences = [] if args.no_exclude else read_all_differences(expected)
    site = nova_site_packages()
    work_dir, cmd = stestr_command(
        args, site, os.path.join(site, 'nova', 'tests', 'unit'),
        differences, CI_SUBSET, FULL_SCOPE)
    print('Nova from %s; %d expected differences excluded (%s)'
          % (site, len(differences),
             ', '.join(os.path.relpath(path) for path in expected)),
          flush=True)
    print(' '.join(cmd), flush=True)
    return subprocess.call(cmd, cwd=work_dir)


if __name__ == '__main__':
    sys.exit(main())
