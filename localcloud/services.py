"""Stop and start any one service of the running cloud.

``python -m localcloud service stop|start|restart NAME`` (and
``service list``): what a crash, an operator's restart or a chaos test
does to one service while the others run. ``stop`` kills the service's
process with SIGKILL (``--graceful``: SIGTERM, SIGKILL after 10 s);
``start`` starts it again as ``up`` did and waits, with a deadline, until
it answers:

==========================  ================  ==============================
Name                        Process           Answers when
==========================  ================  ==============================
``mariadb``                 mariadb           its port accepts connections
``rabbitmq``                rabbitmq          AMQP answers (a fresh node)
``keystone``, ``glance``    one each          its API answers
``placement``, ``neutron``  placement         both APIs answer
``nova-api``                nova              its API answers
``cyborg-api``              cyborg            its API answers
``nova-conductor``,         nova-conductor    Nova's service list shows both
``nova-scheduler``                            up, with a heartbeat of the
                                              new process
``cyborg-conductor``        cyborg-conductor  it answers oslo.messaging's ping
``nova-compute@HOST``,      HOST              as ``host start``: nova-compute
``sidecar@HOST``                              up, the sidecar's devices in
                                              Placement
==========================  ================  ==============================

Services that share a process are stopped and started together, and the
command says so: the Neutron stand-in is served from Placement's process,
nova-conductor and nova-scheduler run in one process, and a compute
host's nova-compute and sidecar share its process (they share its
libvirt connection, as they share libvirtd on a real host). A process's
name is accepted too (``nova``, ``cyborg``, ``compute1``).

Unlike ``host stop``, stopping a host's services does not force its
nova-compute down: it is a crash, which Nova notices by itself.
"""

import dataclasses
import os
import time
import warnings

from localcloud import cloud
from localcloud import hosts
from localcloud import identity
from localcloud import procs
from localcloud import sql

#: Seconds ``start`` waits for a service to answer, by default.
TIMEOUT = 300

#: The WSGI processes and the services they serve.
WSGI = {'keystone': ('keystone',), 'placement': ('placement', 'neutron'),
        'glance': ('glance',), 'nova': ('nova-api',),
        'cyborg': ('cyborg-api',)}
NOVA_RPC = ('nova-conductor', 'nova-scheduler')


@dataclasses.dataclass(frozen=True)
class Process:
    """One process of the cloud (``process``: its pid file's name) and
    the services it runs."""

    process: str
    names: tuple
    kind: str

    @property
    def host(self):
        return self.process if self.kind == 'host' else None


def processes(layout):
    """The cloud's processes, in the order ``up`` starts them."""
    result = [Process('mariadb', ('mariadb',), 'mariadb'),
              Process('rabbitmq', ('rabbitmq',), 'rabbitmq')]
    result += [Process(p, names, 'wsgi') for p, names in WSGI.items()]
    result += [Process('nova-conductor', NOVA_RPC, 'nova-rpc'),
               Process('cyborg-conductor', ('cyborg-conductor',),
                       'cyborg-conductor')]
    result += [Process(h, ('nova-compute@' + h, 'sidecar@' + h), 'host')
               for h in layout.hosts]
    return result


def names(layout):
    """Every service name ``stop`` and ``start`` take."""
    return [n for p in processes(layout) for n in p.names]


def resolve(layout, name):
    """The :class:`Process` that runs service ``name``.

    :raises: ValueError for a name that is not the cloud's.
    """
    for process in processes(layout):
        if name in process.names or name == process.process:
            return process
    raise ValueError('%s: no such service (services: %s)' % (
        name, ', '.join(names(layout))))


def _together(process, name):
    others = [n for n in process.names if n != name]
    if not others:
        return ''
    return ' (with %s: one process, %s)' % (
        ', '.join(others), process.process)


def _pid_files(process):
    """The pid files ``up`` writes for the process (one per service it
    runs; a host's is its name)."""
    if process.kind == 'host':
        return (process.process,)
    if process.kind == 'wsgi':
        return (process.process,) + tuple(
            g for g, host in cloud.GUESTS.items() if host == process.process)
    return (process.process,) + tuple(
        n for n in process.names if n != process.process)


def stop(layout, name, graceful=False, out=print):
    """Stop service ``name`` (its whole process); True if it ran."""
    process = resolve(layout, name)
    ran = process.process in procs.running(layout)
    if process.kind == 'rabbitmq':
        cloud.stop_rabbit(layout, graceful=graceful)
        procs.stop(layout, 'rabbitmq', kill=True)
    else:
        procs.stop(layout, process.process, kill=not graceful,
                   also=_pid_files(process)[1:])
    if process.host:
        _unlink(hosts.ready_file(layout, process.host))
    out('%s: %s%s' % (name, ('stopped (%s)' % (
        'SIGTERM' if graceful else 'SIGKILL')) if ran else
        'was not running', _together(process, name)))
    return ran


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def start(layout, name, out=print, timeout=TIMEOUT):
    """Start service ``name`` again and wait until it answers; returns
    the seconds it took. A service that runs is only waited for."""
    process = resolve(layout, name)
    began = time.monotonic()
    running = process.process in procs.running(layout)
    if process.kind == 'host':
        if not running:
            hosts.start(layout, process.host, out=lambda line: None,
                        timeout=timeout)
        else:
            _wait_host(layout, process.host, timeout)
    else:
        _START[process.kind](layout, process, running, timeout)
    seconds = time.monotonic() - began
    out('%s: %s, answers (%.1f s)%s' % (
        name, 'was running' if running else 'started', seconds,
        _together(process, name)))
    return seconds


def restart(layout, name, graceful=False, out=print, timeout=TIMEOUT):
    stop(layout, name, graceful=graceful, out=out)
    return start(layout, name, out=out, timeout=timeout)


def listing(layout):
    """``[(name, process, [pids])]`` of every service (no pids: not
    running)."""
    running = procs.running(layout)
    return [(n, p.process, running.get(p.process, []))
            for p in processes(layout) for n in p.names]


# -- starting each kind of process ------------------------------------------

def _start_mariadb(layout, process, running, timeout):
    if running:
        procs.wait(layout, 'mariadb', None, port=layout.port('mariadb'),
                   timeout=timeout)
    else:
        sql.launch(layout, timeout=timeout)


def _start_rabbitmq(layout, process, running, timeout):
    progress = cloud.Progress(lambda line: None)
    cloud.wait_rabbit(layout, cloud.start_rabbit(layout), progress)


def _start_wsgi(layout, process, running, timeout):
    apis = cloud.api_services(cloud.write_configs(layout))
    env, _ = apis[process.process]
    proc = None
    if not running:
        proc = cloud.wsgi_service(layout, process.process, env,
                                  also=_pid_files(process)[1:])
    for api in _pid_files(process):
        procs.wait(layout, process.process, proc,
                   url=layout.url(api, apis[api][1]), timeout=timeout)


def _start_nova_rpc(layout, process, running, timeout):
    conn = identity.admin_connection(layout)
    since = {} if running else {
        binary: (s or {}).get('updated_at')
        for binary, s in _nova_services(conn).items()}
    proc = None
    if not running:
        progress = cloud.Progress(lambda line: None)
        proc = cloud.start_nova_rpc(layout, cloud.write_configs(layout),
                                    progress)

    def up():
        try:
            services = _nova_services(conn)
        except Exception:          # nova-api or keystone not answering
            return False
        return all(
            services.get(b) and services[b]['state'] == 'up' and
            hosts.heartbeat_since(services[b], since.get(b))
            for b in NOVA_RPC)
    procs.wait(layout, process.process, proc, check=up, timeout=timeout)


def _nova_services(conn):
    """``{binary: service}`` of nova-conductor and nova-scheduler."""
    services = conn.compute.get(
        '/os-services', microversion=hosts.COMPUTE_MICROVERSION).json()[
            'services']
    return {s['binary']: s for s in services if s['binary'] in NOVA_RPC}


def _start_cyborg_conductor(layout, process, running, timeout):
    proc = None
    if not running:
        progress = cloud.Progress(lambda line: None)
        proc = cloud.start_cyborg_conductor(
            layout, cloud.write_configs(layout), progress)
    ping = _Ping(layout)
    try:
        procs.wait(layout, process.process, proc, check=ping,
                   timeout=timeout)
    finally:
        ping.cleanup()


class _Ping:
    """oslo.messaging's ping of cyborg-conductor (``rpc_ping_enabled``
    in cyborg.conf): True once it answers."""

    def __init__(self, layout):
        with warnings.catch_warnings():
            # eventlet's deprecation, printed as oslo.messaging loads it.
            warnings.simplefilter('ignore')
            import oslo_messaging as messaging
        from oslo_config import cfg

        self.messaging = messaging
        # oslo.messaging registers some of its options on the global
        # configuration only (tracing): this command has no other use
        # for it.
        self.transport = messaging.get_rpc_transport(
            cfg.CONF, url=layout.transport_url)
        target = messaging.Target(exchange='cyborg',
                                  topic='cyborg-conductor', version='1.0')
        self.client = messaging.get_rpc_client(
            self.transport, target).prepare(timeout=5, retry=1)

    def __call__(self):
        try:
            return self.client.call({}, 'oslo_rpc_server_ping') == 'pong'
        except (self.messaging.MessagingException, OSError):
            return False

    def cleanup(self):
        self.transport.cleanup()


def _wait_host(layout, host, timeout):
    hosts.wait(layout, identity.admin_connection(layout),
               {host: None}, timeout=timeout)


_START = {'mariadb': _start_mariadb, 'rabbitmq': _start_rabbitmq,
          'wsgi': _start_wsgi, 'nova-rpc': _start_nova_rpc,
          'cyborg-conductor': _start_cyborg_conductor}
