"""Unpatched compute hosts: nova-compute from pristine Nova 34.0.0.

``python -m localcloud up --unpatched-computes N`` adds N hosts
(``compute-old``, ``compute-old2``, ...) that run the nova-compute of the
Nova release nova-cyborg patches, without the series: a mixed cloud, as
during a rolling upgrade or while a compute is being reverted
(``doc/source/upgrade.rst``).

:func:`prepare` copies the environment's (patched) ``nova`` package and
its ``dist-info`` into ``<root>/pristine`` and reverts the series there
with the project's own tool (``nova-cyborg-patch --target <copy> revert
--skip-alias-check``); the environment's Nova is never touched. The copy
is then checked twice: ``nova-cyborg-patch check`` on it must say
``Series state: not applied``, and every file of the ``nova`` package
must have the SHA-256 that the wheel's ``RECORD`` lists, i.e. be byte for
byte the released Nova. An unpatched host runs with the copy first on
``PYTHONPATH`` (:func:`environment`); its process checks at start that it
imported the copy and that no ``nova_cyborg`` module is loaded once
nova-compute's modules are (:func:`assert_imported`), and exits
otherwise. Its sidecar is the same as on every host: it reports the
host's devices to Cyborg, which needs no Nova patch.
"""

import base64
import csv
import glob
import hashlib
import os
import shutil
import subprocess
import sys

from localcloud import layout as layout_mod

#: What ``nova-cyborg-patch check`` says of a Nova without the series.
NOT_APPLIED = 'Series state: not applied'

#: Modules whose patched versions import ``nova_cyborg.hooks`` at module
#: level: a compute process that imported them and no ``nova_cyborg``
#: runs unpatched code.
COMPUTE_MODULES = ('nova.compute.manager', 'nova.compute.resource_tracker',
                   'nova.compute.utils', 'nova.virt.libvirt.driver',
                   'nova.accelerator.cyborg')


class NotPristine(Exception):
    """The copy is not an unpatched Nova; says what differs."""


def directory(layout):
    return layout.path('pristine')


def _installed():
    """The directory holding the environment's ``nova`` package and its
    ``nova-<version>.dist-info``."""
    import nova
    site = os.path.dirname(os.path.dirname(os.path.abspath(nova.__file__)))
    infos = glob.glob(os.path.join(site, 'nova-*.dist-info'))
    if len(infos) != 1:
        raise NotPristine('%s: expected one nova-*.dist-info, found %s' % (
            site, infos or 'none'))
    return site, os.path.basename(infos[0])


def record_mismatches(target, info):
    """Files of ``<target>/nova`` whose SHA-256 is not the one the wheel's
    RECORD lists (or that are missing); [] when it is the release."""
    wrong = []
    with open(os.path.join(target, info, 'RECORD'), newline='') as f:
        for row in csv.reader(f):
            path, digest = row[0], row[1] if len(row) > 1 else ''
            if not digest or not path.startswith('nova/'):
                continue
            algorithm, expected = digest.split('=', 1)
            try:
                with open(os.path.join(target, path), 'rb') as data:
                    got = hashlib.new(algorithm, data.read()).digest()
            except FileNotFoundError:
                wrong.append(path + ' (missing)')
                continue
            if base64.urlsafe_b64encode(got).rstrip(b'=').decode() != (
                    expected):
                wrong.append(path)
    return wrong


def _patch_tool(layout, target, *args):
    argv = [layout.bin('nova-cyborg-patch'), '--target', target] + list(
        args)
    proc = subprocess.run(argv, capture_output=True, text=True,
                          cwd=layout_mod.REPO_ROOT)
    return proc.returncode, proc.stdout + proc.stderr


def prepare(layout):
    """Make ``<root>/pristine`` (see the module's docstring); return it.

    :raises: NotPristine naming what failed.
    """
    target = directory(layout)
    site, info = _installed()
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    shutil.copytree(os.path.join(site, 'nova'), os.path.join(target, 'nova'),
                    symlinks=True)
    shutil.copytree(os.path.join(site, info), os.path.join(target, info))
    rc, out = _patch_tool(layout, target, 'revert', '--skip-alias-check')
    if rc:
        raise NotPristine('nova-cyborg-patch revert in %s failed (%d):\n%s'
                          % (target, rc, out))
    rc, out = _patch_tool(layout, target, 'check')
    if rc or NOT_APPLIED not in out:
        raise NotPristine('nova-cyborg-patch check in %s does not say "%s" '
                          '(%d):\n%s' % (target, NOT_APPLIED, rc, out))
    wrong = record_mismatches(target, info)
    if wrong:
        raise NotPristine('%d file(s) of %s/nova differ from the %s wheel\'s '
                          'RECORD: %s' % (len(wrong), target, info,
                                          ', '.join(wrong[:10])))
    return target


def environment(layout):
    """The environment of an unpatched host's process: the copy first."""
    return {'PYTHONPATH': os.pathsep.join(
        p for p in (directory(layout), layout_mod.REPO_ROOT,
                    os.environ.get('PYTHONPATH')) if p)}


def assert_imported(target):
    """In an unpatched host's process, before nova-compute starts: Nova
    comes from ``target`` and none of its compute modules loaded
    ``nova_cyborg``; exit with a message otherwise.

    :returns: the line the host logs.
    """
    import importlib
    import nova
    for name in COMPUTE_MODULES:
        importlib.import_module(name)
    where = os.path.abspath(nova.__file__)
    loaded = sorted(m for m in sys.modules if m.split('.')[0] ==
                    'nova_cyborg')
    root = os.path.abspath(target) + os.sep
    if not where.startswith(root) or loaded:
        sys.exit('Not an unpatched nova-compute: nova from %s (expected '
                 'under %s), nova_cyborg modules loaded: %s' % (
                     where, root, ', '.join(loaded) or 'none'))
    return ('Unpatched nova-compute: nova from %s; no nova_cyborg module '
            'loaded after %s' % (os.path.dirname(where),
                                 ', '.join(COMPUTE_MODULES)))


#: The capability trait every patched compute reports
#: (``nova_cyborg.model.capability``); an unpatched one does not.
TRAIT = 'CUSTOM_NOVA_CYBORG_1_0'


def node_traits(conn, host):
    """The traits of the compute node provider named ``host``."""
    get = conn.placement.get
    providers = get('/resource_providers?name=%s' % host,
                    microversion='1.14').json()['resource_providers']
    if not providers:
        return None
    return set(get('/resource_providers/%s/traits' % providers[0]['uuid'],
                   microversion='1.14').json()['traits'])


def check_traits(layout, conn):
    """Placement shows the capability trait on every patched host and on
    no unpatched one.

    :raises: NotPristine naming the host that differs.
    """
    for host in layout.hosts:
        traits = node_traits(conn, host) or set()
        served = sorted(t for t in traits if t.startswith(TRAIT[:-3]))
        if host in layout.unpatched_hosts and served:
            raise NotPristine('%s runs unpatched Nova but its compute node '
                              'reports %s' % (host, ', '.join(served)))
        if host not in layout.unpatched_hosts and TRAIT not in traits:
            raise NotPristine('%s runs patched Nova but its compute node '
                              'does not report %s' % (host, TRAIT))
