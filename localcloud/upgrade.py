"""Upgrade the running cloud to another release, as an operator does.

``python -m localcloud upgrade --to-env ENV`` (ENV: a virtualenv with the
newer release installed and patched by nova-cyborg, e.g. ``.tox/cloud``
for Nova 34 with Cyborg 17; the cloud started from ``.tox/cloud-nova33``)
moves the cloud's processes to ENV's Python:

1. The control plane. Nova's API, conductor and scheduler, Placement
   (with the Neutron stand-in it serves) and Cyborg's API and conductor
   stop; the new release's own tools migrate the schemas
   (``placement-manage db sync``, ``nova-manage api_db sync``,
   ``nova-manage db sync``, ``cyborg-dbsync upgrade``); the services start
   again from ENV and are waited for. Keystone and Glance stay as they
   are. The computes keep running the old release meanwhile: a mixed
   cloud (Nova's computes one release behind its control plane, their
   sidecars still pinned to the old conductor's ``[upgrade_levels]``).
2. One compute at a time (``--computes``: how many; the rest stay on the
   old release, for a longer mixed period): its process (nova-compute and
   sidecar) stops, its nova-compute forced down as for maintenance, and
   starts from ENV, its sidecar's configuration written again (the
   ``[upgrade_levels]`` pin gone once the conductor is the sidecar's
   release, :mod:`localcloud.release`); it is waited for as ``host
   start`` does. The devices its sidecar reports for the first time (the
   types the old conductor could not read: on Cyborg 16 the ``pci``
   driver's) are enabled, as ``up`` does on a new host.
3. Once every compute runs the new release: ``nova-manage db
   online_data_migrations``.

Each step prints its time. The layout (``layout.json``) records which
Python runs each process, so ``host start``, ``service start`` and
``down`` keep treating the mixed cloud right.
"""

import os
import subprocess
import time

from localcloud import admission
from localcloud import cloud
from localcloud import hosts
from localcloud import procs
from localcloud import release
from localcloud import services

#: The control plane services upgraded, in the order they stop (their
#: clients first).
CONTROL = ('nova', 'nova-conductor', 'cyborg-conductor', 'cyborg',
           'placement')
#: The order they start: each after what it needs to answer (Nova's RPC
#: services are waited for through Nova's API).
START = ('placement', 'nova', 'nova-conductor', 'cyborg',
         'cyborg-conductor')
#: Control plane services left on their release (not upgraded here).
KEPT = ('keystone', 'glance')


class UpgradeError(Exception):
    pass


def target_python(env):
    """ENV's Python, checked: a Nova release the cloud runs, patched."""
    python = os.path.join(os.path.abspath(env), 'bin', 'python')
    if not os.path.exists(python):
        raise UpgradeError('%s: no bin/python (give a virtualenv)' % env)
    status = subprocess.run([os.path.join(os.path.dirname(python),
                                          'nova-cyborg-patch'), 'status'],
                            capture_output=True, text=True)
    if 'Series state: applied' not in status.stdout:
        raise UpgradeError('%s: its Nova is not patched by nova-cyborg (run '
                           '"%s/bin/nova-cyborg-patch apply")\n%s' % (
                               env, env, status.stdout + status.stderr))
    return python


def _migrations(layout, files):
    nova = [layout.bin('nova-manage'), '--config-file', files['nova']]
    return [
        ('placement-db', [layout.bin('placement-manage'), '--config-file',
                          files['placement'], 'db', 'sync']),
        ('nova-db', nova + ['api_db', 'sync']),
        ('nova-db', nova + ['db', 'sync']),
        ('cyborg-db', [layout.bin('cyborg-dbsync'), '--config-file',
                       files['cyborg'], 'upgrade']),
    ]


def control_plane(layout, python, out=print):
    """Step 1: returns its seconds."""
    began = time.monotonic()
    old = release.of(layout.python)
    for name in KEPT:
        layout.pythons.setdefault(name, layout.python)
    for name in CONTROL:
        services.stop(layout, name, graceful=True, out=lambda line: None)
    layout.pythons['control'] = python
    for name in CONTROL:
        layout.pythons[name] = python
    layout.save()
    files = cloud.write_configs(layout)
    for name, argv in _migrations(layout, files):
        procs.run(layout, name, argv)
        out('  $ %s' % ' '.join([os.path.basename(argv[0])] + [
            a for a in argv[1:] if a not in (
                '--config-file', files['nova'], files['placement'],
                files['cyborg'])]))
    for name in START:
        services.start(layout, name, out=lambda line: None)
    seconds = time.monotonic() - began
    out('control plane: %s -> %s (%.1f s); computes still on %s' % (
        old.name, release.of(python).name, seconds, old.name))
    return seconds


def compute(layout, host, python, out=print):
    """Step 2 for one host: returns its seconds."""
    began = time.monotonic()
    old = release.of(layout.python_for(host))
    hosts.stop(layout, host, out=lambda line: None)
    layout.pythons[host] = python
    layout.save()
    hosts.start(layout, host, out=lambda line: None)
    # A device the old conductor's report version lacked, with no older
    # type to go as, is reported now, as a new device: admitted as on a
    # new host. This cloud's drivers report none such (the pci driver's
    # went to Cyborg 16 as GPU and become PCI in place): 0 expected.
    enabled = admission.enable_new(layout, {host: None},
                                   out=lambda line: None)
    seconds = time.monotonic() - began
    out('%s: %s -> %s, nova-compute up, sidecar unpinned, FPGAs in '
        'Placement, %d newly reported device(s) enabled (%.1f s)' % (
            host, old.name, release.of(python).name, enabled, seconds))
    return seconds


def finish(layout, out=print):
    """Step 3."""
    procs.run(layout, 'nova-db', [
        layout.bin('nova-manage'), '--config-file',
        cloud.write_configs(layout)['nova'], 'db',
        'online_data_migrations'])
    out('  $ nova-manage db online_data_migrations')


def pending(layout, python):
    """The hosts that do not run ``python`` yet."""
    return [h for h in layout.hosts if layout.python_for(h) != python]


def run(layout, env, computes=None, out=print):
    """Upgrade the cloud to ENV (see the module's docstring); with
    ``computes``, only that many more hosts. Returns the seconds."""
    python = target_python(env)
    new = release.of(python)
    began = time.monotonic()
    if layout.python != python:
        out('Upgrading the control plane to %s' % new)
        control_plane(layout, python, out=out)
    todo = pending(layout, python)
    for host in todo[:computes] if computes is not None else todo:
        compute(layout, host, python, out=out)
    left = pending(layout, python)
    if left:
        out('mixed: %s still on %s' % (', '.join(left), ', '.join(sorted(
            {release.of(layout.python_for(h)).name for h in left}))))
    else:
        finish(layout, out=out)
        out('every service but %s runs %s' % (' and '.join(KEPT), new))
    return time.monotonic() - began
