"""The services' schemas: made by their own tools once, then restored.

A first start builds every schema with the services' own tools
(``keystone-manage``, ``placement-manage``, ``glance-manage``,
``nova-manage``, ``cyborg-dbsync``; see :mod:`localcloud.cloud`), then
saves what they made, with the service users and the catalog that ``up``
registers next: a ``mariadb-dump`` of each of the cloud's databases and
the Keystone key repositories that ``keystone-manage`` wrote. The next
start restores them instead of running the tools again (on this 2-core
machine the tools take most of a start: they import each service and
run hundreds of migrations).

The cache lives under ``$NOVA_CYBORG_CLOUD_CACHE`` (default
``~/.cache/nova-cyborg/localcloud``), one directory per key: a digest of
the services' package versions, MariaDB's version, the Nova patches that
touch its database code (a migration), the commands that made the
schemas and the cloud's port base (Nova's cell mappings and Keystone's
endpoints name ports). Anything else, or a directory that is not
complete, is a miss: the tools run. An entry is written to a temporary
directory and renamed into place, so that a start interrupted while
saving leaves no half entry.
"""

import concurrent.futures
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import tempfile

from localcloud import layout as layout_mod
from localcloud import procs

#: Bumped when what an entry holds changes.
FORMAT = 2

CACHE_DIR = os.environ.get('NOVA_CYBORG_CLOUD_CACHE') or os.path.join(
    os.path.expanduser('~'), '.cache', 'nova-cyborg', 'localcloud')

#: Distributions whose migrations make the schemas.
PACKAGES = ('keystone', 'openstack-placement', 'glance', 'nova',
            'openstack-cyborg', 'oslo.db', 'SQLAlchemy', 'alembic')

#: Keystone's key repositories (``etc/keystone/<name>``), by
#: ``keystone-manage fernet_setup`` and ``credential_setup``.
KEY_REPOSITORIES = ('fernet-keys', 'credential-keys')

DUMPS = 'dumps'
MANIFEST = 'manifest.json'


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _mariadb_version():
    try:
        return subprocess.run(['mariadbd', '--version'], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return None


def _patches_digest():
    """The Nova patches that touch Nova's database code (a migration)."""
    digest = hashlib.sha256()
    top = os.path.join(layout_mod.REPO_ROOT, 'patches')
    for root, dirs, files in sorted(os.walk(top)):
        dirs.sort()
        for name in sorted(files):
            with open(os.path.join(root, name), 'rb') as f:
                text = f.read()
            if re.search(rb'^\+\+\+ \S*/db/', text, re.MULTILINE):
                digest.update(name.encode() + b'\0' + text)
    return digest.hexdigest()


def manifest(layout, commands):
    """What an entry depends on; ``commands`` are the schema commands
    (their paths of this cloud left out)."""
    return {
        'format': FORMAT,
        'packages': {p: _version(p) for p in PACKAGES},
        'mariadb': _mariadb_version(),
        'patches': _patches_digest(),
        'port_base': layout.port_base,
        'databases': list(layout_mod.DATABASES),
        'commands': [a.replace(layout.root, '<root>') for a in commands],
    }


def key(info):
    return hashlib.sha256(json.dumps(info, sort_keys=True).encode()
                          ).hexdigest()[:24]


def lookup(info, cache_dir=None):
    """The entry's directory for ``info`` (:func:`manifest`), or None."""
    entry = os.path.join(cache_dir or CACHE_DIR, key(info))
    try:
        with open(os.path.join(entry, MANIFEST)) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return None
    if saved != info or not all(os.path.isfile(_dump(entry, db))
                                for db in layout_mod.DATABASES):
        return None
    if not all(os.path.isdir(os.path.join(entry, name))
               for name in KEY_REPOSITORIES):
        return None
    return entry


def _dump(entry, database):
    return os.path.join(entry, DUMPS, database + '.sql')


def _mariadb(layout, tool, *args):
    return [tool, '--no-defaults', '-S',
            layout.path('mariadb', 'mysqld.sock'), '-uroot'] + list(args)


def save(layout, info, cache_dir=None):
    """Dump the databases and copy Keystone's keys into a new entry."""
    cache_dir = cache_dir or CACHE_DIR
    os.makedirs(cache_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix='.new-', dir=cache_dir)
    try:
        os.makedirs(os.path.join(work, DUMPS))
        for db in layout_mod.DATABASES:
            with open(_dump(work, db), 'wb') as out, open(
                    procs.log_path(layout, 'schema-cache'), 'ab') as log:
                subprocess.run(_mariadb(
                    layout, 'mariadb-dump', '--single-transaction',
                    '--skip-dump-date', db), stdout=out, stderr=log,
                    check=True)
        for name in KEY_REPOSITORIES:
            shutil.copytree(layout.path('etc', 'keystone', name),
                            os.path.join(work, name))
        with open(os.path.join(work, MANIFEST), 'w') as f:
            json.dump(info, f, indent=1, sort_keys=True)
        entry = os.path.join(cache_dir, key(info))
        shutil.rmtree(entry, ignore_errors=True)
        os.rename(work, entry)
        return entry
    except (OSError, subprocess.CalledProcessError):
        # A cache that cannot be written costs the next start time only.
        shutil.rmtree(work, ignore_errors=True)
        return None


def restore(layout, entry):
    """Load an entry's dump into the running server and its keys into
    Keystone's configuration directory."""
    for name in KEY_REPOSITORIES:
        target = layout.path('etc', 'keystone', name)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(os.path.join(entry, name), target)
    path = procs.log_path(layout, 'schema-cache')

    def load(db):
        with open(_dump(entry, db), 'rb') as dump, open(path, 'ab') as log:
            proc = subprocess.run(_mariadb(layout, 'mariadb', db),
                                  stdin=dump, stdout=log,
                                  stderr=subprocess.STDOUT)
        if proc.returncode:
            raise procs.ServiceError(
                'mariadb', 'restoring %s from %s failed (exit %d; remove '
                'that directory to build the schemas again)' % (
                    db, entry, proc.returncode), path)

    # One client per database: the server creates their tables at once.
    with concurrent.futures.ThreadPoolExecutor(
            len(layout_mod.DATABASES)) as pool:
        for job in [pool.submit(load, db) for db in layout_mod.DATABASES]:
            job.result()
