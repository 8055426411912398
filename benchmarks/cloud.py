"""P4 and P7 on the local cloud of ``localcloud/``.

The local cloud (MariaDB, RabbitMQ, Keystone, Placement, Glance, Nova and
Cyborg as separate processes, simulated compute hosts with the sidecar)
is started with its own command in a fresh state directory::

    python -m localcloud --dir D up --keep --no-demo \\
        --computes 1 --pfs 1 --vfs 64

which prints ``Cloud ready: <s> s from start, <MiB> MiB total memory``:
that line is P7. P4 then runs against it (:mod:`benchmarks.cloud_storm`,
its own process), and ``python -m localcloud --dir D down`` stops it,
whatever happened. The cloud's services come from cloud-requirements.txt
(in the bench environment) and MariaDB from Debian; when something is
missing, or another local cloud already runs on this machine (its
RabbitMQ node name would clash), both figures are "not measured" and say
why.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

#: Console scripts the local cloud starts (localcloud/cloud.py).
NEEDED = ('gunicorn', 'keystone-manage', 'placement-manage',
          'glance-manage', 'nova-manage', 'cyborg-dbsync', 'openstack')
READY = re.compile(r'Cloud ready: ([0-9.]+) s from start, ([0-9.]+) MiB')
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUT = ('--computes', '1', '--pfs', '1', '--vfs', '64')
#: Ports of the benchmark's cloud (the default cloud uses 25000 up).
PORT_BASE = '26000'
TIMEOUT = 900


def _localcloud(*args, log=None, state_dir=None):
    env = dict(os.environ, NOVA_CYBORG_CLOUD_PORT_BASE=PORT_BASE)
    argv = [sys.executable, '-m', 'localcloud']
    if state_dir:
        argv += ['--dir', state_dir]
    return subprocess.run(
        argv + list(args), cwd=REPO_ROOT, env=env, text=True,
        stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=TIMEOUT)


def unavailable():
    """Why the local cloud cannot run here, or None."""
    if not os.path.isdir(os.path.join(REPO_ROOT, 'localcloud')):
        return 'no localcloud/ package in this tree'
    proc = _localcloud('--help')
    if proc.returncode:
        return '"python -m localcloud --help" failed: %s' % (
            proc.stdout.strip().splitlines() or ['?'])[-1]
    bindir = os.path.dirname(sys.executable)
    missing = [name for name in NEEDED
               if not os.path.exists(os.path.join(bindir, name))]
    if missing:
        return ('the local cloud\'s services are not installed in this '
                'environment (no %s)' % ', '.join(missing))
    if not shutil.which('mariadbd') and not shutil.which('mysqld'):
        return 'MariaDB is not installed'
    if _localcloud('status').returncode == 0:
        return ('another local cloud runs on this machine ("python -m '
                'localcloud status"); its RabbitMQ node would clash')
    return None


def run(log_dir, storm=True):
    """Start the cloud, storm it, stop it.

    :returns: ``((p7 data, why), (p4 data, why))``; data None when not
        measured, why None when measured.
    """
    why = unavailable()
    if why:
        return (None, why), (None, 'needs the local cloud: ' + why)
    state_dir = tempfile.mkdtemp(prefix='bench-cloud-')
    up_log = os.path.join(log_dir, 'localcloud-up.log')
    storm_log = os.path.join(log_dir, 'storm-cloud.log')
    try:
        with open(up_log, 'w') as log:
            proc = _localcloud('up', '--keep', '--no-demo', *LAYOUT,
                               log=log, state_dir=state_dir)
        with open(up_log) as f:
            match = READY.search(f.read())
        if proc.returncode or not match:
            why = '"localcloud up" failed, see %s' % os.path.relpath(
                up_log, REPO_ROOT)
            return (None, why), (None, why)
        cold = {'seconds': float(match.group(1)),
                'rss_mib': float(match.group(2)),
                'layout': ' '.join(LAYOUT)}
        if not storm:
            return (cold, None), (None, 'skipped (--skip)')
        with open(storm_log, 'w') as log:
            proc = subprocess.run(
                [sys.executable, '-m', 'benchmarks.cloud_storm', '--dir',
                 state_dir], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                stderr=log, text=True, timeout=TIMEOUT)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode or not lines:
            return (cold, None), (None, 'the storm failed, see %s' %
                                  os.path.relpath(storm_log, REPO_ROOT))
        return (cold, None), (json.loads(lines[-1]), None)
    finally:
        with open(os.path.join(log_dir, 'localcloud-down.log'), 'w') as log:
            _localcloud('down', log=log, state_dir=state_dir)
        # The services' logs, for a failure's post-mortem.
        kept = os.path.join(log_dir, 'localcloud')
        shutil.rmtree(kept, ignore_errors=True)
        if os.path.isdir(os.path.join(state_dir, 'logs')):
            shutil.copytree(os.path.join(state_dir, 'logs'), kept)
        shutil.rmtree(state_dir, ignore_errors=True)
