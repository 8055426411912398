"""The simulated compute hosts: launched, waited for, stopped, restarted.

A host is ready when its process runs, its sidecar has found Placement
matching its devices (the process then writes ``hosts/<host>/ready``),
Nova lists it as a hypervisor whose nova-compute service is up, and
Placement has its FPGAs (``pfs`` providers with ``FPGA`` inventory in the
tree of its compute node).

``stop`` is what an operator does before a host's maintenance or to
evacuate it: the host's processes stop (libvirtd's domains and the
devices' state live on, see :mod:`localcloud.compute_host`) and its
nova-compute service is forced down, as a fencing step would, so that
Nova treats it as down at once (evacuation, and a delete is done by the
API alone). ``start`` starts the host again and waits until it is ready,
its service up again (a heartbeat of the new process, then the forced
down flag cleared).
"""

import os
import time

from localcloud import configs
from localcloud import identity
from localcloud import pristine
from localcloud import procs
from localcloud import reboot as reboot_mod

#: Services a host needs; if one of them is gone, waiting is pointless.
RPC_SERVICES = ('nova-conductor', 'nova-scheduler', 'cyborg-conductor')

#: Seconds ``up`` and ``host start`` wait for the hosts.
TIMEOUT = 300

COMPUTE_MICROVERSION = '2.53'     # os-services: forced_down, by id


def ready_file(layout, host):
    return layout.path('hosts', host, 'ready')


def launch(layout, host, unpatched=None):
    """Start the host's process (nova-compute and its sidecar); an
    unpatched host's imports Nova from the pristine copy
    (:mod:`localcloud.pristine`).

    :param unpatched: True: run this host's nova-compute from the copy,
        as a compute reverted to unpatched Nova; None: as the layout says.
    """
    if unpatched is None:
        unpatched = host in layout.unpatched_hosts
    sysfs = layout.path('hosts', host, 'sys')
    sidecar = configs.sidecar(layout, host, sysfs)
    try:
        os.unlink(ready_file(layout, host))
    except FileNotFoundError:
        pass
    argv = [
        layout.python_for(host), '-m', 'localcloud.compute_host',
        '--host', host,
        '--pfs', str(layout.pfs), '--vfs', str(layout.vfs),
        '--gpus', str(layout.gpus), '--vgpu17', str(layout.vgpu17),
        '--sysfs-root', sysfs, '--sidecar-config', sidecar,
        '--domain-xml-dir', layout.domain_xml_dir,
        '--ready-file', ready_file(layout, host),
        '--cloud-dir', layout.root]
    env = None
    if unpatched:
        if not os.path.isdir(pristine.directory(layout)):
            pristine.prepare(layout)
        # Pristine Nova first on the path; the process checks it.
        argv += ['--pristine-nova', pristine.directory(layout)]
        env = pristine.environment(layout)
    return procs.start(layout, host, argv + [
        '--config-file', configs.nova_file(layout),
        '--config-file', configs.compute(layout, host)], env=env)


# -- what Nova and Placement say ------------------------------------------

def fpga_counts(conn):
    """``{compute node name: providers with FPGA inventory in its tree}``."""
    get = conn.placement.get
    providers = get('/resource_providers',
                    microversion='1.14').json()['resource_providers']
    names = {rp['uuid']: rp['name'] for rp in providers}
    counts = {}
    for rp in get('/resource_providers?resources=FPGA:1',
                  microversion='1.14').json()['resource_providers']:
        root = names.get(rp['root_provider_uuid'])
        counts[root] = counts.get(root, 0) + 1
    return counts


def compute_services(conn):
    """``{host: service record}`` of the nova-compute services."""
    services = conn.compute.get(
        '/os-services?binary=nova-compute',
        microversion=COMPUTE_MICROVERSION).json()['services']
    return {s['host']: s for s in services}


def set_forced_down(conn, service, forced_down):
    conn.compute.put('/os-services/%s' % service['id'],
                     json={'forced_down': forced_down},
                     microversion=COMPUTE_MICROVERSION).raise_for_status()


def hypervisors(conn):
    return {h.name for h in conn.compute.hypervisors()}


def heartbeat_since(service, since):
    """The service reported after ``since`` (its ``updated_at`` then;
    None: any report counts)."""
    updated = service.get('updated_at') if service else None
    return bool(updated) and (since is None or updated > since)


def missing(layout, hosts, services, counts, names, since=None):
    """``{host: [what is not there yet]}`` of the hosts not ready.

    ``services``, ``counts`` and ``names`` are :func:`compute_services`,
    :func:`fpga_counts` and :func:`hypervisors`; ``since`` maps a host to
    its service's ``updated_at`` before it was started.
    """
    result = {}
    for host in hosts:
        service = services.get(host)
        lacks = []
        if not os.path.exists(ready_file(layout, host)):
            lacks.append('sidecar converged')
        if host not in names:
            lacks.append('hypervisor')
        if since is not None and not heartbeat_since(service,
                                                     since.get(host)):
            lacks.append('nova-compute heartbeat')
        elif not service or service.get('state') != 'up':
            lacks.append('nova-compute service up')
        found = counts.get(host, 0)
        if found < layout.pfs:
            lacks.append('FPGAs in Placement (%d of %d)' % (
                found, layout.pfs))
        if lacks:
            result[host] = lacks
    return result


def _describe(lacking):
    return '; '.join('%s lacks %s' % (host, ', '.join(what))
                     for host, what in sorted(lacking.items()))


def wait(layout, conn, started, since=None, timeout=TIMEOUT, sleep=0.5):
    """Wait until the hosts of ``started`` (``{host: Popen}``, or None
    for a host started before this command, whose exit is not watched)
    are ready.

    A forced down host whose new process has reported is set up again.
    On failure the ServiceError names the hosts and what they lack, and
    shows the last lines of their logs and of cyborg-conductor's (which
    turns the sidecars' reports into providers).
    """
    deadline = time.monotonic() + timeout
    lacking = {host: ['a first check'] for host in started}
    while True:
        for host, proc in started.items():
            if proc is not None and proc.poll() is not None:
                raise procs.ServiceError(
                    host, 'exited with %d' % proc.returncode,
                    procs.log_path(layout, host),
                    also=[procs.log_path(layout, 'cyborg-conductor')])
        running = procs.running(layout)
        for name in RPC_SERVICES:
            if name not in running:
                raise procs.ServiceError(name, 'exited',
                                         procs.log_path(layout, name))
        try:
            services = compute_services(conn)
            for host in started:
                service = services.get(host)
                if (service and service.get('forced_down') and
                        heartbeat_since(service, (since or {}).get(host))):
                    set_forced_down(conn, service, False)
                    service['state'] = 'down'   # until Nova says up
            lacking = missing(layout, list(started), services,
                              fpga_counts(conn), hypervisors(conn), since)
        except Exception as exc:       # an API not answering yet
            lacking = {host: ['an API answer (%s)' % exc]
                       for host in started}
        if not lacking:
            return
        if time.monotonic() > deadline:
            first = sorted(lacking)[0]
            raise procs.ServiceError(
                first, 'not ready after %d s: %s' % (
                    timeout, _describe(lacking)),
                procs.log_path(layout, first),
                also=[procs.log_path(layout, h) for h in sorted(lacking)] +
                [procs.log_path(layout, 'cyborg-conductor')])
        time.sleep(sleep)


# -- commands ---------------------------------------------------------------

def _check_host(layout, host):
    """A wrong request (ValueError) is not a service's failure."""
    if host not in layout.hosts:
        raise ValueError('%s: no such host (hosts: %s)' % (
            host, ', '.join(layout.hosts)))


def stop(layout, host, out=print):
    """Stop the host's processes and force its nova-compute down."""
    _check_host(layout, host)
    conn = identity.admin_connection(layout)
    stopped = procs.stop(layout, host)
    try:
        os.unlink(ready_file(layout, host))
    except FileNotFoundError:
        pass
    service = compute_services(conn).get(host)
    if service and not service.get('forced_down'):
        set_forced_down(conn, service, True)
    out('%s: %s; nova-compute forced down' % (
        host, 'stopped' if stopped else 'was not running'))


def start(layout, host, out=print, timeout=TIMEOUT, unpatched=None):
    """Start the host again and wait until it is ready; returns seconds.

    :param unpatched: see :func:`launch`.
    """
    _check_host(layout, host)
    if host in procs.running(layout):
        raise ValueError('%s: already running ("host stop %s" or "host '
                         'restart %s")' % (host, host, host))
    started = time.monotonic()
    conn = identity.admin_connection(layout)
    service = compute_services(conn).get(host)
    since = {host: service.get('updated_at') if service else None}
    proc = launch(layout, host, unpatched=unpatched)
    wait(layout, conn, {host: proc}, since=since, timeout=timeout)
    seconds = time.monotonic() - started
    out('%s: started%s; nova-compute up, %d FPGA(s) in Placement (%.1f s)'
        % (host, ' (unpatched Nova)' if unpatched else '', layout.pfs,
           seconds))
    return seconds


def restart(layout, host, out=print, timeout=TIMEOUT, unpatched=None):
    stop(layout, host, out=out)
    return start(layout, host, out=out, timeout=timeout,
                 unpatched=unpatched)


def reboot(layout, host, out=print, timeout=TIMEOUT, unpatched=None):
    """Stop the host, then start it as its reboot leaves it: its domains
    shut off, its devices reset (:mod:`localcloud.reboot`)."""
    stop(layout, host, out=out)
    reboot_mod.mark(layout, host)
    out('%s: rebooting (domains shut off, devices reset)' % host)
    return start(layout, host, out=out, timeout=timeout,
                 unpatched=unpatched)
