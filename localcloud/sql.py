"""The cloud's SQL server: a private MariaDB on loopback.

Its data directory, socket and log live under ``<root>/mariadb``; it
answers on 127.0.0.1 only, with one account (``openstack``) for the
services. The server runs as root with ``--user=root`` (the machines here
run everything as root; a deployment would use its packaged service).
"""

import shutil

from localcloud import layout as layout_mod
from localcloud import procs

NAME = 'mariadb'


def _socket(layout):
    return layout.path('mariadb', 'mysqld.sock')


def _client(layout, sql):
    return [shutil.which('mariadb') or 'mysql', '--no-defaults',
            '-S', _socket(layout), '-uroot', '-e', sql]


def start(layout):
    """Initialise the data directory, start the server, create the DBs."""
    if not shutil.which('mariadbd'):
        raise procs.ServiceError(
            NAME, 'mariadbd not found: install the mariadb-server package',
            procs.log_path(layout, NAME))
    procs.run(layout, NAME, [
        'mariadb-install-db', '--no-defaults', '--datadir=' + _data(layout),
        '--user=root', '--auth-root-authentication-method=socket',
        '--skip-test-db'])
    launch(layout)
    statements = ["CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' "
                  "IDENTIFIED BY '%s'" % (layout_mod.DB_USER,
                                          layout_mod.PASSWORD)]
    for db in layout_mod.DATABASES:
        statements.append('CREATE DATABASE IF NOT EXISTS %s CHARACTER SET '
                          'utf8mb4' % db)
        statements.append("GRANT ALL ON %s.* TO '%s'@'127.0.0.1'" % (
            db, layout_mod.DB_USER))
    procs.run(layout, NAME, _client(layout, '; '.join(statements)))


def _data(layout):
    return layout.path('mariadb', 'data')


def launch(layout, timeout=60):
    """Start the server on its data directory; wait until it accepts
    connections (a server killed before recovers its data first)."""
    data = _data(layout)
    proc = procs.start(layout, NAME, [
        'mariadbd', '--no-defaults', '--datadir=' + data,
        '--socket=' + _socket(layout), '--port=%d' % layout.port(NAME),
        '--bind-address=127.0.0.1', '--user=root', '--skip-name-resolve',
        '--log-error=' + procs.log_path(layout, NAME),
        '--pid-file=' + layout.path('mariadb', 'mariadbd.pid'),
        '--max-connections=2000', '--character-set-server=utf8mb4',
        # A small cloud's data fits in a small pool; the other caches
        # serve engines it does not use (MyISAM, Aria's system tables).
        '--innodb-buffer-pool-size=32M', '--innodb-log-buffer-size=4M',
        '--key-buffer-size=1M', '--aria-pagecache-buffer-size=8M',
        '--performance-schema=OFF',
        # Throwaway data: no flush at commit, no doublewrite, and one
        # tablespace (creating the ~400 tables of a restore makes no
        # file each).
        '--innodb-flush-log-at-trx-commit=0', '--innodb-doublewrite=0',
        '--innodb-file-per-table=OFF'])
    procs.wait(layout, NAME, proc, port=layout.port(NAME), timeout=timeout)
    return proc
