"""Seed 004 under load: two servers, two functions, booted at once.

``python -m localcloud stress [--rounds N]`` (``tools/stress-seed004``)
runs against a running cloud of two hosts with one FPGA each. It puts two
bitstreams in Glance (functions A and B), makes a device profile and a
flavor for each (``accel:bitstream_id``), and then, every round, boots one
server of each flavor at the same moment, waits until both are ACTIVE or
ERROR, prints what happened, and deletes them.

Each round line says how long the round took, where each server landed
(host and FPGA), the function its FPGA holds as Placement says (the
``CUSTOM_FPGA_FUNCTION_ID_*`` trait of its provider) and as the
simulated card says (``afu_id`` of its FPGA region in the host's sysfs
tree), and how many times Nova rescheduled it (the ``create`` action's
``compute__do_build_and_run_instance`` events: one per host tried). A
server ACTIVE on an FPGA holding another function than its bitstream's is
the race of seed 004. The summary counts those, the servers not ACTIVE,
the reschedules, and the round times; the exit status is 1 if a server
was ACTIVE on a wrong function or not ACTIVE at all.
"""

import concurrent.futures
import os
import statistics
import threading
import time
import uuid as uuidlib

from localcloud import identity
from sidecar.sources import dfl
from tests import waiting

COMPUTE = '2.84'        # networks 'none'; instance action events' host
PLACEMENT = '1.14'
TRAIT_PREFIX = 'CUSTOM_FPGA_FUNCTION_ID_'
DEADLINE = 300
BUILD_EVENT = 'compute__do_build_and_run_instance'


class StressError(Exception):
    pass


def _check(response, *expected):
    if response.status_code not in expected:
        raise StressError('%s %s: HTTP %d: %s' % (
            response.request.method, response.url, response.status_code,
            response.text[:500]))
    return response


class Function:
    """A bitstream in Glance, and a device profile and flavor asking for
    it."""

    def __init__(self, label, function_id):
        self.label = label
        self.function_id = function_id
        self.image = self.profile = self.flavor = None


class Stress:

    def __init__(self, layout, out=print):
        self.layout = layout
        self.out = out
        self.conn = identity.admin_connection(layout)
        self.tag = uuidlib.uuid4().hex[:6]
        self.functions = [Function(label, uuidlib.uuid4().hex)
                          for label in ('A', 'B')]
        self._cleanups = []

    # -- REST ------------------------------------------------------------

    def _compute(self, method, path, expected=(200,), **kwargs):
        return _check(getattr(self.conn.compute, method)(
            path, microversion=COMPUTE, **kwargs), *expected)

    def _placement(self, path):
        return _check(self.conn.placement.get(
            path, microversion=PLACEMENT), 200).json()

    # -- set up and tear down ----------------------------------------------

    def setup(self):
        hosts = self._placement('/resource_providers?resources=FPGA:1')[
            'resource_providers']
        if len(hosts) < 2:
            raise StressError('the race needs two FPGAs; Placement has %d '
                              '(start the cloud with two hosts)' % len(hosts))
        for f in self.functions:
            f.image = self._bitstream(f)
            name = 'stress-%s-%s' % (self.tag, f.label)
            _check(self.conn.accelerator.post('/device_profiles', json=[{
                'name': name, 'groups': [{
                    'resources:FPGA': '1',
                    'accel:bitstream_id': f.image}]}]), 201)
            f.profile = name
            self._cleanups.append(lambda n=name: self.conn.accelerator.delete(
                '/device_profiles/%s' % n))
            flavor = self.conn.compute.create_flavor(
                name=name, ram=512, vcpus=1, disk=1)
            f.flavor = flavor.id
            self._cleanups.append(
                lambda fl=flavor: self.conn.compute.delete_flavor(fl))
            self.conn.compute.create_flavor_extra_specs(
                flavor, {'accel:device_profile': name})
            self.out('function %s: %s, bitstream %s, profile and flavor %s'
                     % (f.label, f.function_id, f.image, name))

    def _bitstream(self, f):
        """A bitstream for the stand-in card: its first line is the id of
        the function it loads (localcloud's program command)."""
        image = _check(self.conn.image.post('/images', json={
            'name': 'stress-%s-bitstream-%s' % (self.tag, f.label),
            'disk_format': 'raw', 'container_format': 'bare',
            'visibility': 'public', 'accel:function_id': f.function_id}),
            201).json()
        self._cleanups.append(
            lambda: self.conn.image.delete('/images/%s' % image['id']))
        _check(self.conn.image.put(
            '/images/%s/file' % image['id'],
            data=('%s\n' % f.function_id).encode(),
            headers={'Content-Type': 'application/octet-stream'}), 204)
        waiting.wait_until(
            lambda: self.conn.image.get('/images/%s' % image['id']).json()[
                'status'] == 'active', 'bitstream %s active' % image['id'],
            DEADLINE, 0.2)
        return image['id']

    def cleanup(self):
        for cleanup in reversed(self._cleanups):
            try:
                cleanup()
            except Exception as exc:     # report, clean the rest
                self.out('cleanup: %s' % exc)

    # -- one round ---------------------------------------------------------

    def _boot(self, f, barrier, round_no):
        barrier.wait(timeout=60)
        return self._compute('post', '/servers', expected=(202,), json={
            'server': {'name': 'stress-%s-%d-%s' % (self.tag, round_no,
                                                    f.label),
                       'imageRef': self.conn.image.find_image(
                           'nova-cyborg-image', ignore_missing=False).id,
                       'flavorRef': f.flavor, 'networks': 'none'}}).json()[
                           'server']['id']

    def _server(self, server_id):
        response = self._compute('get', '/servers/%s' % server_id,
                                 expected=(200, 404))
        return None if response.status_code == 404 else response.json()[
            'server']

    def _settled(self, ids):
        servers = {i: self._server(i) for i in ids}
        if all(s and s['status'] in ('ACTIVE', 'ERROR')
               for s in servers.values()):
            return servers
        return None

    def round(self, round_no):
        started = time.monotonic()
        barrier = threading.Barrier(len(self.functions))
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            jobs = [pool.submit(self._boot, f, barrier, round_no)
                    for f in self.functions]
            ids = [job.result() for job in jobs]
        try:
            try:
                servers = waiting.wait_until(
                    lambda: self._settled(ids),
                    'servers %s ACTIVE or ERROR' % ', '.join(ids),
                    DEADLINE, 0.5)
            except AssertionError:
                servers = {i: self._server(i) for i in ids}
            seconds = time.monotonic() - started
            results = [self._result(f, servers[i])
                       for f, i in zip(self.functions, ids)]
        finally:
            self._delete(ids)
        return seconds, results

    def _delete(self, ids):
        for server_id in ids:
            self._compute('delete', '/servers/%s' % server_id,
                          expected=(204, 404))
        waiting.wait_until(
            lambda: all(self._server(i) is None for i in ids),
            'servers %s deleted' % ', '.join(ids), DEADLINE, 0.5)

    # -- what a server got -------------------------------------------------

    def _result(self, f, server):
        result = {'function': f, 'id': server['id'],
                  'status': server['status'],
                  'host': server.get('OS-EXT-SRV-ATTR:host'),
                  'tried': self._build_hosts(server['id']),
                  'fault': (server.get('fault') or {}).get('message')}
        arqs = _check(self.conn.accelerator.get(
            '/accelerator_requests', params={'instance': server['id']}),
            200).json()['arqs']
        result['arqs'] = [a['state'] for a in arqs]
        bound = [a for a in arqs if a.get('device_rp_uuid')]
        result['trait'] = result['afu'] = result['card'] = None
        if bound:
            rp = bound[0]['device_rp_uuid']
            traits = self._placement('/resource_providers/%s/traits' % rp)[
                'traits']
            result['trait'] = ','.join(sorted(
                t for t in traits if t.startswith(TRAIT_PREFIX))) or None
            info = bound[0].get('attach_handle_info') or {}
            if result['host'] and 'bus' in info:
                result['card'], result['afu'] = self._card(
                    bound[0]['hostname'] or result['host'],
                    '%(domain)s:%(bus)s:%(device)s.%(function)s' % info)
        wanted = f.function_id.upper()
        result['wrong'] = server['status'] == 'ACTIVE' and not (
            result['trait'] and result['trait'].endswith('_' + wanted)
            and result['afu'] and result['afu'].upper() == wanted)
        return result

    def _build_hosts(self, server_id):
        """Hosts that tried to build the server, in order."""
        actions = self._compute(
            'get', '/servers/%s/os-instance-actions' % server_id).json()[
                'instanceActions']
        hosts = []
        for action in actions:
            if action['action'] != 'create':
                continue
            events = self._compute('get', '/servers/%s/os-instance-actions/%s'
                                   % (server_id, action['request_id'])
                                   ).json()['instanceAction']['events']
            hosts += [e.get('host') or '?'
                      for e in sorted(events, key=lambda e: e['start_time'])
                      if e['event'] == BUILD_EVENT]
        return hosts

    def _card(self, host, address):
        """The FPGA card (its PF) behind an attach handle and the function
        the DFL port reached through that handle reports, from the
        host's simulated sysfs tree."""
        root = self.layout.path('hosts', host, 'sys')
        for pf, card in dfl.cards(root).items():
            for port in card.ports:
                if port.address == address:
                    try:
                        with open(os.path.join(port.path, 'afu_id')) as fh:
                            return pf, fh.read().strip()
                    except OSError:
                        return pf, None
        return None, None


def _short(value):
    if not value:
        return '-'
    return value.rsplit('_', 1)[-1][:8].lower()


def _line(r):
    return ('%s %-7s %-9s card %-12s trait %-8s afu %-8s tried %s%s%s' % (
        r['function'].label, r['status'], r['host'] or '-', r['card'] or '-',
        _short(r['trait']), _short(r['afu']), ' '.join(r['tried']) or '-',
        ' WRONG FUNCTION' if r['wrong'] else '',
        (' fault: %s' % r['fault'][:120]) if r['fault'] else ''))


def run(layout, rounds, out=print):
    """Run the rounds; returns True if no server was ACTIVE on a wrong
    function and every server became ACTIVE."""
    stress = Stress(layout, out)
    times, wrong, not_active, reschedules, same_host = [], 0, 0, 0, 0
    try:
        stress.setup()
        for round_no in range(1, rounds + 1):
            seconds, results = stress.round(round_no)
            times.append(seconds)
            out('round %2d  %5.1f s' % (round_no, seconds))
            for r in results:
                out('    ' + _line(r))
                wrong += r['wrong']
                not_active += r['status'] != 'ACTIVE'
                reschedules += max(0, len(r['tried']) - 1)
            hosts = [r['host'] for r in results if r['status'] == 'ACTIVE']
            same_host += len(hosts) != len(set(hosts))
    finally:
        stress.cleanup()
    servers = 2 * len(times)
    out('')
    out('summary: %d rounds, %d servers: %d ACTIVE on a wrong function, '
        '%d not ACTIVE, %d reschedules, %d rounds with both on one host'
        % (len(times), servers, wrong, not_active, reschedules, same_host))
    if times:
        out('round time: min %.1f s, median %.1f s, max %.1f s, total %.1f s'
            % (min(times), statistics.median(times), max(times), sum(times)))
    return wrong == 0 and not_active == 0
