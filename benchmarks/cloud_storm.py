"""P4 on the local cloud: 50 concurrent accel boots on one host.

Run by :func:`benchmarks.cloud.storm` as ``python -m benchmarks.cloud_storm
--dir STATE_DIR`` against a cloud started there with ``python -m
localcloud up --keep --no-demo --computes 1 --pfs 1 --vfs 64``; prints one
JSON line: ``{"servers", "where", "accel": {...}, "plain": {...},
"double": {...}}``. Everything goes through the cloud's APIs as its admin
(openstacksdk), and the domain XML files the simulated host writes.

Why not on the harness: there Cyborg's API and conductor share one child
process on SQLite, and a storm measures that. Measured (2 cores): Cyborg's
API answered ARQ creations "Timed out waiting for a reply" from its own
conductor, 15 of 50 boots reached Cyborg, the rest hung in BUILD.

Setup: quotas unlimited for the admin project, the host's VCPU
allocation ratio raised to 16 in Placement (fakelibvirt's host has 8
threads), a one-FPGA device profile, and 256 MB flavors with and without
it. Then ``SERVERS`` servers are created at once from as many threads,
polled every ``POLL`` seconds until all are ACTIVE or ERROR (or
``TIMEOUT``), checked and deleted; then the same with the plain flavor.
"""

import argparse
import collections
import json
import re
import sys
import threading
import time

from localcloud import cloud as cloud_mod
from localcloud import demo
from localcloud import identity
from localcloud import layout as layout_mod

SERVERS = 50
HANDLES = 64
TIMEOUT = 300
POLL = 0.2
PLACEMENT = {'OpenStack-API-Version': 'placement 1.26'}


def _placement(conn, method, path, **kwargs):
    resp = conn.session.request(
        path, method, endpoint_filter={'service_type': 'placement'},
        headers=PLACEMENT, raise_exc=True, **kwargs)
    return resp.json() if resp.content else None


def prepare(conn, host):
    """Quotas, VCPU ratio, profile and both flavors; returns them."""
    conn.set_compute_quotas(conn.current_project_id, instances=-1,
                            cores=-1, ram=-1)
    rp = _placement(conn, 'GET', '/resource_providers?name=%s' % host)[
        'resource_providers'][0]
    path = '/resource_providers/%s/inventories/VCPU' % rp['uuid']
    inv = _placement(conn, 'GET', path)
    inv['allocation_ratio'] = 16.0
    _placement(conn, 'PUT', path, json=inv)
    conn.accelerator.create_device_profile(
        name='storm', groups=[{'resources:FPGA': '1'}])
    flavors = {}
    for kind in ('accel', 'plain'):
        flavor = conn.compute.create_flavor(name='storm-' + kind, ram=256,
                                            vcpus=1, disk=1)
        if kind == 'accel':
            conn.compute.create_flavor_extra_specs(
                flavor, {'accel:device_profile': 'storm'})
        flavors[kind] = flavor.id
    return flavors, rp['uuid']


def storm(conn, flavor, image):
    """Create SERVERS servers at once; (states, wall seconds, errors)."""
    ids, errors = [], []
    go = threading.Event()

    def create(i):
        go.wait()
        try:
            ids.append(conn.compute.create_server(
                name='storm-%d' % i, flavor_id=flavor, image_id=image,
                networks='none').id)
        except Exception as exc:  # counted, reported
            errors.append(repr(exc)[:200])
    threads = [threading.Thread(target=create, args=(i,))
               for i in range(SERVERS)]
    for t in threads:
        t.start()
    start = time.monotonic()
    go.set()
    for t in threads:
        t.join()
    settled = {}
    while len(settled) < len(ids) and time.monotonic() < start + TIMEOUT:
        try:
            listed = list(conn.compute.servers(name='^storm-'))
        except Exception as exc:  # a poll the cloud failed: poll again
            errors.append('poll: %r' % exc)
            listed = []
        for server in listed:
            if server.id in ids and server.status in ('ACTIVE', 'ERROR'):
                settled.setdefault(server.id, time.monotonic())
        time.sleep(POLL)
    servers = [conn.compute.get_server(i) for i in ids]
    wall = max(settled.values()) - start if settled else None
    return servers, wall, errors[:5]


def double_assignments(conn, layout, servers, compute_rp):
    arqs = [a for a in conn.accelerator.accelerator_requests()
            if a.state == 'Bound']
    by_vf = collections.Counter(
        '%(domain)s:%(bus)s:%(device)s.%(function)s' % a.attach_handle_info
        for a in arqs)
    hostdevs = collections.Counter()
    for server in servers:
        if server.status == 'ACTIVE':
            for line in demo.hostdev_lines(layout, server.id):
                hostdevs.update(re.findall(
                    r'<source> ?<address ([^>]*?) ?/>', line))
    over = 0
    tree = _placement(conn, 'GET', '/resource_providers?in_tree=%s' %
                      compute_rp)['resource_providers']
    for rp in tree:
        usages = _placement(conn, 'GET', '/resource_providers/%s/usages' %
                            rp['uuid'])['usages']
        if 'FPGA' in usages:
            inv = _placement(conn, 'GET', '/resource_providers/%s/'
                             'inventories/FPGA' % rp['uuid'])
            over += max(usages['FPGA'] - inv['total'], 0)
    return dict({'arq_vfs': sum(n - 1 for n in by_vf.values() if n > 1),
                 'hostdev_vfs': sum(n - 1 for n in hostdevs.values()
                                    if n > 1),
                 'over_allocated': over, 'bound_arqs': len(arqs)},
                **sidecar_watch(layout))


def sidecar_watch(layout):
    """What the sidecars' one-device-one-guest watch counted on the
    cloud's hosts (``<state_path>/guests.json``, sidecar.discovery.guests):
    findings of the last cycle (a device in two domains, or in a domain
    whose server holds no ARQ for it) and since each sidecar started."""
    totals = collections.Counter()
    for host in layout.hosts:
        path = layout.path('hosts', host, 'sidecar', 'guests.json')
        try:
            with open(path) as f:
                counts = json.load(f)
        except (OSError, ValueError):
            continue
        for key in ('shared', 'no_arq', 'findings_total'):
            totals['watch_' + key] += int(counts.get(key, 0))
    return dict(totals)


def delete_all(conn, servers):
    for server in servers:
        conn.compute.delete_server(server.id, ignore_missing=True)
    for server in servers:
        conn.compute.wait_for_delete(server, interval=0.5, wait=TIMEOUT)


def run(state_dir):
    layout = layout_mod.Layout.load(state_dir)
    conn = identity.admin_connection(layout)
    image = conn.image.find_image(cloud_mod.IMAGE).id
    flavors, compute_rp = prepare(conn, layout.hosts[0])
    result = {'servers': SERVERS, 'where': 'local cloud'}
    for kind in ('accel', 'plain'):
        servers, wall, errors = storm(conn, flavors[kind], image)
        states = collections.Counter(s.status for s in servers)
        result[kind] = {
            'active': states.get('ACTIVE', 0),
            'error': states.get('ERROR', 0),
            'stuck': len(servers) - states.get('ACTIVE', 0) -
            states.get('ERROR', 0), 'post_errors': errors, 'wall_s': wall,
            'faults': sorted({(s.fault or {}).get('message', '')[:200]
                              for s in servers if s.status == 'ERROR'})}
        if kind == 'accel':
            result['double'] = double_assignments(conn, layout, servers,
                                                  compute_rp)
        delete_all(conn, servers)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dir', required=True)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.dir), sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
