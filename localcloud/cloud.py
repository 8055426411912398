"""Bring the local cloud up in dependency order, and tear it down.

Order: RabbitMQ starts first (it takes the longest) while MariaDB starts. At
a first start every service's schema is then made by its own tool, in
parallel (the real ``keystone-manage``, ``placement-manage``,
``glance-manage``, ``nova-manage`` and ``cyborg-dbsync upgrade``), the WSGI
services start in one process each (:mod:`localcloud.wsgi`), Keystone gets
the service users and the catalog, and all of that is saved
(:mod:`localcloud.schemas`) before the RPC services start
(:mod:`localcloud.rpc`). A start that finds its schemas saved restores them
instead, and starts nova-conductor and nova-scheduler beside the WSGI
services (cyborg-conductor, which authenticates as it starts, once they
answer). Then the simulated compute hosts, each with its sidecar
(:mod:`localcloud.hosts`). A failure names the service and shows the last
lines of its log (and, when hosts lack their FPGAs, of cyborg-conductor's).
``<root>/startup.json`` says when each service was started and ready
(:mod:`benchmarks.cloud_start`).
"""

import concurrent.futures
import hashlib
import inspect
import json
import os
import subprocess
import time

from localcloud import admission
from localcloud import configs
from localcloud import hosts
from localcloud import identity
from localcloud import layout as layout_mod
from localcloud import pristine
from localcloud import procs
from localcloud import schemas
from localcloud import sql

RABBIT = os.path.join(layout_mod.REPO_ROOT, 'tools', 'rabbitmq')

#: Stopped last by ``down`` (the others still talk to them while stopping).
INFRASTRUCTURE = ('keystone', 'rabbitmq', 'mariadb')


class Progress:
    """One line per step, with the seconds since the start.

    It also keeps when each service was started and when it was ready
    (:meth:`started`, :meth:`ready`), which ``up`` saves in
    ``<root>/startup.json`` for the start-time benchmark.
    """

    def __init__(self, out):
        self.out = out
        self.started_at = time.monotonic()
        self.services = {}

    def elapsed(self):
        return time.monotonic() - self.started_at

    def __call__(self, message):
        self.out('[%6.1fs] %s' % (self.elapsed(), message))

    def started(self, *names):
        for name in names:
            self.services.setdefault(name, {})['started'] = round(
                self.elapsed(), 2)

    def ready(self, *names):
        for name in names:
            self.services.setdefault(name, {})['ready'] = round(
                self.elapsed(), 2)

    def save(self, path, **extra):
        with open(path, 'w') as f:
            json.dump(dict(extra, services=self.services), f, indent=1)


def _rabbit_env(layout):
    env = dict(os.environ)
    env.update(NOVA_CYBORG_RABBIT_DIR=layout.path('rabbitmq'),
               NOVA_CYBORG_RABBIT_PORT=str(layout.port('rabbit')),
               NOVA_CYBORG_RABBIT_MGMT_PORT='0',
               # RabbitMQ's own defaults, and one scheduler (with its
               # allocators) instead of one per core: a small broker.
               RABBITMQ_SERVER_ERL_ARGS='+P 1048576 +t 5000000 +stbt db '
               '+zdbbl 128000 +sbwt none +sbwtdcpu none +sbwtdio none '
               '+S 1:1 +SDcpu 1:1 +SDio 2',
               NOVA_CYBORG_RABBIT_NODE='nova-cyborg-cloud-%d@localhost' %
               layout.port_base)
    return env


def start_rabbit(layout):
    out = open(procs.log_path(layout, 'rabbitmq'), 'ab')
    return subprocess.Popen([RABBIT, 'start'], stdout=out,
                            stderr=subprocess.STDOUT, env=_rabbit_env(layout))


def wsgi_service(layout, name, env, also=()):
    argv = [layout.python_for(name), '-m', 'localcloud.wsgi']
    for each in (name,) + also:
        argv += [each, str(layout.port(each))]
    return procs.start(layout, name, argv, env, also=also)


#: WSGI services served from another's process: the Neutron stand-in
#: (no configuration of its own) from Placement's (its own ConfigOpts).
GUESTS = {'neutron': 'placement'}


def _migrations(layout, files):
    """Every schema but Keystone's (it is bootstrapped on its own)."""
    nova = [layout.bin('nova-manage'), '--config-file', files['nova']]
    return {
        'placement': [[layout.bin('placement-manage'), '--config-file',
                       files['placement'], 'db', 'sync']],
        'glance': [[layout.bin('glance-manage'), '--config-file',
                    files['glance'], 'db_sync']],
        'nova': [nova + ['api_db', 'sync'],
                 nova + ['cell_v2', 'map_cell0', '--database_connection',
                         layout.db_url('nova_cell0')],
                 nova + ['cell_v2', 'create_cell', '--name', 'cell1'],
                 nova + ['db', 'sync']],
        'cyborg': [[layout.bin('cyborg-dbsync'), '--config-file',
                    files['cyborg'], 'upgrade']],
    }


def write_configs(layout):
    return {'keystone': configs.keystone(layout),
            'placement': configs.placement(layout),
            'glance': configs.glance(layout),
            'nova': configs.nova(layout),
            'cyborg': configs.cyborg(layout),
            'clouds': configs.clouds_yaml(layout)}


def _migrate(layout, files, progress):
    def run(name, commands):
        progress.started(name + '-db')
        for argv in commands:
            procs.run(layout, name + '-db', argv)
        progress.ready(name + '-db')
        return name

    def keystone():
        progress.started('keystone-db')
        identity.bootstrap(layout, files['keystone'])
        progress.ready('keystone-db')

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        jobs = [pool.submit(keystone)]
        jobs += [pool.submit(run, name, commands) for name, commands in
                 _migrations(layout, files).items()]
        for job in concurrent.futures.as_completed(jobs):
            job.result()
    progress('schemas migrated (keystone, placement, glance, nova, cyborg)')


def _schema_commands(layout, files):
    """What builds the schemas (the key of their cache), as text."""
    commands = ['keystone-manage db_sync', 'keystone-manage fernet_setup',
                'keystone-manage credential_setup',
                'keystone-manage bootstrap %s %s' % (
                    layout.auth_url, layout_mod.REGION)]
    # The dump holds the service users and the catalog too.
    commands.append('catalog %s' % hashlib.sha256(repr((
        inspect.getsource(identity.register_services), identity.CATALOG,
        layout_mod.SERVICE_USERS)).encode()).hexdigest())
    for argvs in _migrations(layout, files).values():
        commands += [' '.join(os.path.basename(a) if a.startswith(
            os.path.dirname(layout.python)) else a for a in argv)
            for argv in argvs]
    return commands


def _parallel(calls):
    """Run ``(function, *args)`` calls in threads; raise the first
    failure."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        jobs = [pool.submit(*call) for call in calls]
        for job in concurrent.futures.as_completed(jobs):
            job.result()


def api_services(files):
    """``{name: (environment, path that answers)}`` of the WSGI
    services (``files``: :func:`write_configs`)."""
    return {
        'keystone': ({'OS_KEYSTONE_CONFIG_FILES': files['keystone']}, '/v3'),
        'placement': ({'OS_PLACEMENT_CONFIG_DIR':
                       os.path.dirname(files['placement'])}, '/'),
        'glance': ({'OS_GLANCE_CONFIG_DIR': os.path.dirname(files['glance'])},
                   '/'),
        'nova': ({'OS_NOVA_CONFIG_DIR': os.path.dirname(files['nova'])}, '/'),
        'cyborg': ({'CYBORG_CONFIG_FILE': files['cyborg'],
                    'SCRIPT_NAME': '/accelerator'}, '/accelerator/'),
        'neutron': ({}, '/'),
    }


def _launch_api_services(layout, files, progress):
    """Start the WSGI services; returns the calls that wait for them."""
    apis = api_services(files)
    progress.started(*apis)
    started = {name: wsgi_service(layout, name, env, also=tuple(
        g for g, host in GUESTS.items() if host == name))
        for name, (env, _) in apis.items() if name not in GUESTS}
    started.update({g: started[host] for g, host in GUESTS.items()})

    def wait(name, path):
        procs.wait(layout, name, started[name], url=layout.url(name, path),
                   timeout=120)
        progress.ready(name)
        progress('%-10s %s' % (name, layout.url(name, path)))

    return [(wait, name, path) for name, (_, path) in apis.items()]


def start_nova_rpc(layout, files, progress):
    """nova-conductor and nova-scheduler in one process
    (:mod:`localcloud.rpc`)."""
    progress.started('nova-conductor', 'nova-scheduler')
    return procs.start(layout, 'nova-conductor', [
        layout.python_for('nova-conductor'), '-m', 'localcloud.rpc', 'nova',
        '--config-file', files['nova']], also=('nova-scheduler',))


def start_cyborg_conductor(layout, files, progress):
    # It looks bitstreams up in Glance with openstacksdk.
    progress.started('cyborg-conductor')
    return procs.start(layout, 'cyborg-conductor', [
        layout.python_for('cyborg-conductor'), '-m', 'localcloud.rpc',
        'cyborg', '--config-file', files['cyborg']],
        {'OS_CLIENT_CONFIG_FILE': files['clouds']})


def wait_rabbit(layout, rabbit, progress):
    if rabbit.wait():
        raise procs.ServiceError('rabbitmq', 'tools/rabbitmq start failed',
                                 procs.log_path(layout, 'rabbitmq'))
    # Its process group joins the others (memory, down).
    with open(layout.path('rabbitmq', 'rabbitmq.pgid')) as f:
        pgid = f.read().strip()
    with open(layout.path('pids', 'rabbitmq.pid'), 'w') as f:
        f.write(pgid + '\n')
    progress.ready('rabbitmq')
    progress('rabbitmq   127.0.0.1:%d' % layout.port('rabbit'))


def _check_nova_patched(layout):
    """The cloud runs Nova as patched by nova-cyborg, or refuses to start."""
    result = subprocess.run([layout.bin('nova-cyborg-patch'), 'status'],
                            capture_output=True, text=True)
    if 'Series state: applied' not in result.stdout:
        raise procs.ServiceError(
            'nova', 'the installed Nova is not patched by nova-cyborg: run '
            '"nova-cyborg-patch apply" first\n' + result.stdout,
            procs.log_path(layout, 'cloud'))


def _prepare_pristine(layout):
    try:
        pristine.prepare(layout)
    except pristine.NotPristine as exc:
        raise procs.ServiceError('pristine', str(exc),
                                 procs.log_path(layout, 'cloud'))


def _check_pristine_traits(layout, conn):
    try:
        pristine.check_traits(layout, conn)
    except pristine.NotPristine as exc:
        host = layout.unpatched_hosts[0]
        raise procs.ServiceError(host, str(exc), procs.log_path(layout,
                                                                host))


def up(layout, out=print):
    """Start every service; returns (seconds, bytes of RSS)."""
    progress = Progress(out)
    _check_nova_patched(layout)
    if procs.running(layout):
        raise procs.ServiceError('cloud', 'already running under %s (run '
                                 '"down" first)' % layout.root,
                                 procs.log_path(layout, 'cloud'))
    for d in ('logs', 'pids', 'etc', 'hosts', 'domains'):
        os.makedirs(layout.path(d), exist_ok=True)
    layout.save()
    if layout.unpatched_hosts:
        # Before anything starts: a copy that is not pristine fails fast.
        progress.started('pristine')
        _prepare_pristine(layout)
        progress.ready('pristine')
        progress('pristine   %s: unpatched Nova for %s, checked against '
                 'its wheel\'s RECORD' % (pristine.directory(layout),
                                          ', '.join(layout.unpatched_hosts)))
    progress.started('rabbitmq', 'mariadb')
    rabbit = start_rabbit(layout)
    sql.start(layout)
    progress.ready('mariadb')
    progress('mariadb    127.0.0.1:%d' % layout.port('mariadb'))
    files = write_configs(layout)
    info = schemas.manifest(layout, _schema_commands(layout, files))
    entry = schemas.lookup(info)
    if entry:
        # The catalog is in the dump: the RPC services start beside the
        # WSGI services.
        progress.started('schemas')
        schemas.restore(layout, entry)
        progress.ready('schemas')
        progress('schemas restored from %s (a dump of what the services\' '
                 'own tools made at a first start)' % entry)
        waits = _launch_api_services(layout, files, progress)
        wait_rabbit(layout, rabbit, progress)
        start_nova_rpc(layout, files, progress)
        _parallel(waits)
        # It authenticates with Keystone as it starts.
        start_cyborg_conductor(layout, files, progress)
    else:
        _migrate(layout, files, progress)
        _parallel(_launch_api_services(layout, files, progress))
        progress.started('catalog')
        identity.register_services(layout)
        progress.ready('catalog')
        progress('keystone   service users and catalog registered')
        progress.started('schema-cache')
        entry = schemas.save(layout, info)
        progress.ready('schema-cache')
        progress('schemas saved in %s for the next start' % entry if entry
                 else 'schemas not saved (see %s)' % procs.log_path(
                     layout, 'schema-cache'))
        wait_rabbit(layout, rabbit, progress)
        start_nova_rpc(layout, files, progress)
        start_cyborg_conductor(layout, files, progress)
    conn = identity.admin_connection(layout)
    progress.started(*layout.hosts)
    started = {host: hosts.launch(layout, host) for host in layout.hosts}
    # New devices wait for an operator (admitted disabled): enable them.
    enabled = admission.enable_new(layout, started, out=progress)
    hosts.wait(layout, conn, started)
    if layout.unpatched_hosts:
        _check_pristine_traits(layout, conn)
    progress.ready(*layout.hosts)
    progress('admission  %d new device(s) enabled with %s' % (
        enabled, admission.CLI))
    progress('computes   %s: nova-compute and sidecar, FPGAs in Placement'
             % ', '.join(layout.hosts))
    seconds, rss = progress.elapsed(), procs.memory(layout)
    progress.save(layout.path('startup.json'), seconds=round(seconds, 2),
                  rss_bytes=rss)
    return seconds, rss


def stop_rabbit(layout, graceful=False):
    """``tools/rabbitmq stop``: the broker's VM halted at once (its
    processes killed), or with ``graceful`` stopped by ``rabbitmqctl
    stop``."""
    env = _rabbit_env(layout)
    env['NOVA_CYBORG_RABBIT_GRACEFUL'] = '1' if graceful else '0'
    subprocess.run([RABBIT, 'stop'], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def down(layout):
    """Stop every process of the cloud; return the names stopped."""
    names = procs.stop_all(layout, order=INFRASTRUCTURE)
    if os.path.exists(layout.path('rabbitmq')):
        stop_rabbit(layout)
        if 'rabbitmq' not in names:
            names.append('rabbitmq')
    return names


IMAGE = 'nova-cyborg-image'
FLAVOR = 'm1.tiny'


def prepare(layout):
    """A public image and a plain flavor (tempest's and the demo's)."""
    conn = identity.admin_connection(layout)
    image = conn.image.create_image(
        name=IMAGE, data=b'\0' * 1024 * 1024, disk_format='raw',
        container_format='bare', visibility='public')
    flavor = conn.compute.create_flavor(name=FLAVOR, ram=512, vcpus=1,
                                        disk=1)
    return image.id, flavor.id
