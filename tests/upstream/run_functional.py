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

"""Run Nova's own functional tests, as installed with the nova wheel.

The tests run from the installed package (``<site-packages>/nova/tests/
functional``), so they test the tree ``nova-cyborg-patch`` changed. They
use Nova's in-process fixtures (fake virt drivers, fakelibvirt, Placement
in process, CyborgFixture); no service of this project runs.

Which tests (``tests/upstream/``):

* ``functional-ci-subset.txt`` (the default) or
  ``functional-full-scope.txt`` (``--full``): regexes, one a line;
* regexes given as arguments replace that scope;
* ``expected-differences-functional.txt``: upstream tests whose
  expectation the series changes on purpose, excluded (same format as
  ``expected-differences.txt``: ``<test id or prefix>  # <reason>``).
  ``--expected FILE`` (repeatable) reads the given lists instead, e.g.
  that one and ``expected-differences-functional-nova33.txt`` for
  Nova 33.

Nova's notification sample tests read their samples from
``doc/notification_samples`` next to the ``nova`` package, which the wheel
does not ship: the runner installs there the copy in
``tests/upstream/notification_samples`` (upstream's, see its README),
each payload's ``nova_object.version`` set to the version of that payload
class in the installed Nova. The versions themselves are checked by Nova's
unit test ``TestNotificationObjectVersions`` (``tox -e nova-unit``); here
the samples check which notifications are sent, in which order, with
which content.

``--unpatched`` reverts the series for the run (the baseline) and applies
it again afterwards; nothing is excluded then.
"""

import json
import os
import pkgutil
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run as unit_run  # noqa: E402

CI_SUBSET = os.path.join(HERE, 'functional-ci-subset.txt')
FULL_SCOPE = os.path.join(HERE, 'functional-full-scope.txt')
EXPECTED = os.path.join(HERE, 'expected-differences-functional.txt')
SAMPLES = os.path.join(HERE, 'notification_samples')


def _payload_versions():
    """{payload class name: VERSION} of the installed Nova's
    notification objects."""
    import nova.notifications.objects as pkg
    from nova.objects import base
    for mod in pkgutil.iter_modules(pkg.__path__):
        __import__('%s.%s' % (pkg.__name__, mod.name))
    return {cls.obj_name(): cls.VERSION
            for cls in base.NovaObjectRegistry.notification_classes}


def _set_versions(node, versions):
    if isinstance(node, dict):
        if node.get('nova_object.name') in versions and \
                'nova_object.version' in node:
            node['nova_object.version'] = versions[node['nova_object.name']]
        for value in node.values():
            _set_versions(value, versions)
    elif isinstance(node, list):
        for value in node:
            _set_versions(value, versions)


def install_notification_samples(site):
    """Copy the samples to <site>/doc/notification_samples, where Nova's
    notification sample tests look, with the installed payload versions."""
    target = os.path.join(site, 'doc', 'notification_samples')
    if os.path.islink(target):
        os.unlink(target)
    shutil.rmtree(target, ignore_errors=True)
    versions = _payload_versions()
    for root, _dirs, files in os.walk(SAMPLES):
        for name in files:
            if not name.endswith('.json'):
                continue
            src = os.path.join(root, name)
            dst = os.path.join(target, os.path.relpath(src, SAMPLES))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(src) as f:
                sample = json.load(f)
            _set_versions(sample, versions)
            with open(dst, 'w') as f:
                json.dump(sample, f, indent=4, sort_keys=True)


def _patch_tool(command):
    # The same interpreter, so the series goes to this environment's Nova.
    subprocess.check_call(
        [sys.executable, '-m', 'nova_cyborg_patch.cli', command])


def main(argv=None):
    parser = unit_run.argument_parser(__doc__.splitlines()[0], FULL_SCOPE,
                                      EXPECTED)
    parser.add_argument('--unpatched', action='store_true',
                        help='Revert the series for the run (baseline), '
                             'apply it again afterwards.')
    args = parser.parse_args(argv)

    expected = unit_run.expected_lists(args)
    differences = ([] if args.no_exclude or args.unpatched
                   else unit_run.read_all_differences(expected))
    site = unit_run.nova_site_packages()
    work_dir, cmd = unit_run.stestr_command(
        args, site, os.path.join(site, 'nova', 'tests', 'functional'),
        differences, CI_SUBSET, FULL_SCOPE)
    print('Nova from %s (%s); %d expected differences excluded (%s)'
          % (site, 'unpatched' if args.unpatched else 'as installed',
             len(differences),
             ', '.join(os.path.relpath(path) for path in expected)),
          flush=True)
    print(' '.join(cmd), flush=True)
    env = dict(os.environ)
    # Nova's tests find api-paste.ini under $state_path (the site-packages
    # holding nova, as in a source checkout); the wheel installs it under
    # <prefix>/etc/nova.
    paste = os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')
    if os.path.exists(paste):
        env.setdefault('OS_WSGI__API_PASTE_CONFIG', paste)
    if args.unpatched:
        _patch_tool('revert')
    try:
        # After the revert: the samples take the versions of the tree the
        # tests run on. A separate process, so this one imports no Nova.
        subprocess.check_call(
            [sys.executable, '-c',
             'import sys; sys.path.insert(0, %r); import run_functional; '
             'run_functional.install_notification_samples(%r)'
             % (HERE, site)], env=env)
        return subprocess.call(cmd, cwd=work_dir, env=env)
    finally:
        if args.unpatched:
            _patch_tool('apply')


if __name__ == '__main__':
    sys.exit(main())
