"""A herd: N compute hosts whose sidecars start at the same moment.

Used by ``tests/functional/test_herd.py`` and ``benchmarks/herd.py``.

Each host of a herd is:

* a compute node provider in Placement: the caller starts one real
  nova-compute per host (the spine harness's ``start_accel_compute`` with
  ``sidecar=False``: Nova's libvirt driver over fakelibvirt, which
  registers the node's provider as a deployment's nova-compute does);
* a ``nova-cyborg-sidecar`` PROCESS, the console script a deployer's unit
  file runs, with its own configuration, log, state directory and sysfs
  tree (:class:`sidecar_simulator.host.SimulatedHost`, the same PCI addresses
  as the host's fakelibvirt). Its libvirt connection (``[sidecar]
  libvirt_uri``, opened read-only by the daemon to see which devices
  domains use) is the libvirt test driver over the host's own node file
  (``SimulatedHost.write_node_xml``), so every process has a libvirt of
  its own, as every host has. It reports to the real cyborg-conductor
  (the harness's Cyborg process) over RabbitMQ and reads Placement over
  loopback HTTP, like the sidecar of a deployment.

:class:`HerdFixture` writes every host's files first and then spawns all
the processes in one loop, so they start together, as a rack of identical
hosts does after maintenance. :class:`PlacementView` tells what is still
missing for a host's devices to be schedulable, as a scheduler would find
them; :func:`cyborg_problems` what Cyborg lacks to bind them;
:func:`wait_converged` waits until nothing is missing.
"""

import os
import re
import signal
import subprocess
import sys
import time
import uuid as uuidlib

import fixtures
import requests

from sidecar.drivers import fpga as fpga_driver
from tests.functional.harness import child
from tests.functional.harness import sidecar_fixture

#: Placement microversion of the reads: ``in_tree<N>`` (1.31), suffixed
#: groups (1.33), ``root_required`` (1.35), ``reserved == total`` (1.26).
MICROVERSION = '1.36'
#: The root trait Nova's scheduler requires of accelerator requests.
ROOT_TRAIT = 'COMPUTE_ACCELERATORS'
#: The line the sidecar logs before each ``report_data`` RPC.
REPORT_LINE = re.compile(r'Reporting \d+ device\(s\) of (\S+) to '
                         r'cyborg-conductor')
STARTED_LINE = 'Sidecar for host %s started'
SCRIPT = os.path.join(os.path.dirname(sys.executable),
                      'nova-cyborg-sidecar')

OVERRIDES = """
[DEFAULT]
transport_url = {transport_url}

[sidecar]
libvirt_uri = {libvirt_uri}
report_interval = {report_interval}
resync_interval = {resync_interval}

[sidecar_privsep]
helper_command = {privsep_helper} --config-file {config}
"""


def deployable_name(hostname, address):
    return '%s_%s' % (hostname, address)


def provider_uuid(name):
    """The UUID cyborg-conductor gives the provider of a deployable."""
    return str(uuidlib.uuid3(uuidlib.NAMESPACE_DNS, name))


def expected_devices(hostname, simulated):
    """What Placement must show for a simulated host's FPGAs.

    ``{provider name: {'uuid', 'resource_class', 'total', 'traits'}}``,
    from the simulated host alone (not from the sidecar's code).
    """
    expected = {}
    for pf in simulated.fpga_pfs():
        card = simulated.fpga_card(pf)
        vendor = fpga_driver.vendor_name(
            simulated.functions[pf].vendor_id).upper()
        for port, handle in zip(card.ports, card.handles()):
            # Documentation/ABI/testing/sysfs-class-fpga-region (the PR
            # region's compat_id), sysfs-platform-dfl-port (afu_id).
            traits = {'OWNER_CYBORG', 'CUSTOM_FPGA_' + vendor,
                      'CUSTOM_FPGA_REGION_%s_%s' % (vendor,
                                                    card.compat_id.upper())}
            if port.afu_id:
                traits.add('CUSTOM_FPGA_FUNCTION_ID_%s_%s' % (
                    vendor, port.afu_id.upper()))
            name = deployable_name(hostname, handle)
            expected[name] = {'uuid': provider_uuid(name),
                              'resource_class': 'FPGA', 'total': 1,
                              'traits': frozenset(traits)}
    return expected


class HerdHost:
    """One host of a herd: its files and, once started, its process."""

    def __init__(self, name, simulated, base_dir):
        self.name = name
        self.simulated = simulated
        self.dir = os.path.join(base_dir, name)
        self.config_path = os.path.join(self.dir, 'sidecar.conf')
        self.log_path = os.path.join(self.dir, 'sidecar.log')
        self.state_path = os.path.join(self.dir, 'state')
        self.sysfs_root = None
        self.process = None

    def write(self, transport_url, placement_url, report_interval,
              resync_interval, extra='', cyborg_url=None):
        os.makedirs(self.dir)
        self.sysfs_root = self.simulated.write(os.path.join(self.dir, 'sys'))
        libvirt_uri = self.simulated.write_node_xml(
            os.path.join(self.dir, 'node.xml'))
        sidecar_fixture.write_config(
            self.config_path, host=self.name, sysfs_root=self.sysfs_root,
            state_path=self.state_path, placement_url=placement_url,
            **({'cyborg_url': cyborg_url} if cyborg_url else {}))
        # Later values of an option win (oslo.config).
        with open(self.config_path, 'a') as f:
            f.write(OVERRIDES.format(
                transport_url=transport_url, libvirt_uri=libvirt_uri,
                report_interval=report_interval,
                resync_interval=resync_interval,
                privsep_helper=os.path.join(os.path.dirname(sys.executable),
                                            'privsep-helper'),
                config=self.config_path))
            if extra:
                f.write('\n%s\n' % extra)

    def spawn(self):
        self.process = subprocess.Popen(
            [SCRIPT, '--config-file', self.config_path,
             '--log-file', self.log_path],
            cwd=child.REPO_ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            start_new_session=True)

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process is not None:
            self.process.wait()

    def log(self):
        try:
            with open(self.log_path, errors='replace') as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def reports(self):
        """``report_data`` RPCs this sidecar has sent (its log lines)."""
        return len(REPORT_LINE.findall(self.log()))

    def started(self):
        return (STARTED_LINE % self.name) in self.log()

    def tail(self, lines=30):
        return ''.join(self.log().splitlines(True)[-lines:])

    def exited(self):
        """The exit status if the process ended, else None."""
        return None if self.process is None else self.process.poll()


class HerdFixture(fixtures.Fixture):
    """Sidecar processes for ``hosts`` (``{name: SimulatedHost}``).

    setUp writes every host's files; :meth:`start` spawns all the
    processes in one loop and records ``started_at`` (monotonic). Cleanup
    kills them.

    :param report_interval: ``[sidecar] report_interval`` (seconds).
    :param resync_interval: ``[sidecar] resync_interval``; None leaves
        the daemon's default.
    :param extra: more configuration, appended to every host's file.
    """

    def __init__(self, hosts, transport_url, placement_url,
                 report_interval, resync_interval=0, extra='',
                 cyborg_url=None):
        super().__init__()
        #: Cyborg's API, where the sidecars read back what they reported.
        self.cyborg_url = cyborg_url
        self._simulated = hosts
        self.transport_url = transport_url
        self.placement_url = placement_url
        self.report_interval = report_interval
        self.resync_interval = resync_interval
        self.extra = extra
        self.started_at = None

    def _setUp(self):
        self.base_dir = self.useFixture(fixtures.TempDir()).path
        if self.resync_interval is None:
            from sidecar import conf as sidecar_conf
            self.resync_interval = next(
                o.default for o in sidecar_conf.SIDECAR_OPTS
                if o.name == 'resync_interval')
        self.hosts = {}
        for name, simulated in self._simulated.items():
            host = HerdHost(name, simulated, self.base_dir)
            host.write(self.transport_url, self.placement_url,
                       self.report_interval, self.resync_interval,
                       self.extra, cyborg_url=self.cyborg_url)
            self.hosts[name] = host
            self.addCleanup(host.kill)

    def start(self):
        """Spawn every sidecar, one right after the other."""
        self.started_at = time.monotonic()
        for host in self.hosts.values():
            host.spawn()
        return self.started_at

    def reports(self):
        """``{host: report_data RPCs sent so far}``."""
        return {name: host.reports() for name, host in self.hosts.items()}

    def exited(self):
        """``{host: exit status}`` of the sidecars that ended."""
        return {name: host.exited() for name, host in self.hosts.items()
                if host.exited() is not None}


class PlacementView:
    """Placement as a scheduler and an operator see it (loopback HTTP)."""

    def __init__(self, placement_url, timeout=30):
        self.url = placement_url.rstrip('/')
        self.session = requests.Session()
        self.session.headers.update({
            'X-Auth-Token': 'admin',
            'OpenStack-API-Version': 'placement %s' % MICROVERSION})
        self.timeout = timeout
        self._roots = {}

    def close(self):
        self.session.close()

    def get(self, path, ok_400=False, **params):
        """The JSON body, None on 404 (and on 400 if ``ok_400``)."""
        resp = self.session.get(self.url + path, params=params or None,
                                timeout=self.timeout)
        if resp.status_code == 404 or (ok_400 and resp.status_code == 400):
            return None
        resp.raise_for_status()
        return resp.json()

    def delete_provider(self, rp_uuid):
        """As an operator would: ``DELETE /resource_providers/<uuid>``."""
        resp = self.session.delete(
            '%s/resource_providers/%s' % (self.url, rp_uuid),
            timeout=self.timeout)
        if resp.status_code != 204:
            raise AssertionError('DELETE provider %s: HTTP %s: %s' % (
                rp_uuid, resp.status_code, resp.text))

    def provider(self, name):
        found = self.get('/resource_providers', name=name)
        rps = found['resource_providers']
        return rps[0] if rps else None

    def candidates(self, root_uuid, resource_class, traits):
        """Providers in ``root_uuid``'s tree a scheduler could pick for
        one ``resource_class`` with ``traits``, as Nova asks for a device
        profile group (a suffixed group, root trait required)."""
        # 400 when a trait does not exist yet: nothing to pick from.
        body = self.get(
            '/allocation_candidates', ok_400=True,
            resources_dp='%s:1' % resource_class,
            required_dp=','.join(sorted(traits)),
            root_required=ROOT_TRAIT, in_tree_dp=root_uuid, limit=1000)
        found = set()
        if body is None:
            return found
        for request in body['allocation_requests']:
            for rp, alloc in request['allocations'].items():
                if resource_class in alloc['resources']:
                    found.add(rp)
        return found

    def compute_node(self, hostname):
        """The compute node provider's UUID (cached once found)."""
        if hostname not in self._roots:
            rp = self.provider(hostname)
            if rp is None:
                return None
            self._roots[hostname] = rp['uuid']
        return self._roots[hostname]

    def problems(self, hostname, expected):
        """What keeps a host's devices from being schedulable as
        ``expected`` (:func:`expected_devices`); empty when nothing.

        One request while providers are missing from the host's tree;
        then each provider's inventory and traits, and the allocation
        candidates.
        """
        root = self.compute_node(hostname)
        if root is None:
            return ['%s: no compute node provider' % hostname]
        tree = {rp['name']: rp for rp in self.get(
            '/resource_providers', in_tree=root)['resource_providers']}
        problems = ['%s: no provider under the compute node' % name
                    for name in sorted(expected) if name not in tree]
        if problems:
            return problems
        by_class = {}
        for name, want in sorted(expected.items()):
            rp = tree[name]
            if rp['uuid'] != want['uuid']:
                problems.append('%s: provider uuid %s, not %s' % (
                    name, rp['uuid'], want['uuid']))
            if rp['parent_provider_uuid'] != root:
                problems.append('%s: parent %s, not the compute node %s' % (
                    name, rp['parent_provider_uuid'], root))
            inv = self.get('/resource_providers/%s/inventories' % rp['uuid'])
            inv = (inv or {}).get('inventories', {})
            rc = want['resource_class']
            got = inv.get(rc)
            wanted = {'total': want['total'], 'max_unit': want['total'],
                      'reserved': 0}
            if got is None or {k: got[k] for k in wanted} != wanted:
                problems.append('%s: inventory %s, not %s %s' % (
                    name, inv, rc, wanted))
            traits = self.get('/resource_providers/%s/traits' % rp['uuid'])
            traits = set((traits or {}).get('traits', ()))
            if not want['traits'] <= traits:
                problems.append('%s: traits lack %s' % (
                    name, sorted(want['traits'] - traits)))
            by_class.setdefault((rc, want['traits']), set()).add(
                want['uuid'])
        for (rc, traits), uuids in by_class.items():
            found = self.candidates(root, rc, traits)
            if not uuids <= found:
                problems.append('%s: not schedulable (%s:1 with %s): %s' % (
                    hostname, rc, ','.join(sorted(traits)),
                    ', '.join(sorted(uuids - found))))
        return problems


def cyborg_problems(expected, deployables):
    """What Cyborg lacks of ``expected`` (one host's devices):
    ``deployables`` is ``{name: rp_uuid}`` of Cyborg's deployables. A
    device Cyborg does not know cannot be bound to an instance even when
    Placement offers it."""
    problems = []
    for name, want in sorted(expected.items()):
        if name not in deployables:
            problems.append('%s: no deployable in Cyborg' % name)
        elif deployables[name] != want['uuid']:
            problems.append('%s: Cyborg\'s deployable has provider %s, '
                            'not %s' % (name, deployables[name],
                                        want['uuid']))
    return problems


def wait_converged(view, expected, deadline, herd=None, conductor_log=None,
                   deployables=None, poll=0.25):
    """Wait until no host has a problem; return the monotonic time each
    host was first seen converged, ``{host: t}``.

    :param expected: ``{host: expected_devices(...)}``.
    :param deadline: monotonic time to give up at; then AssertionError
        with each host's problems, its sidecar's log (if ``herd``) and
        cyborg-conductor's failures (if ``conductor_log``).
    :param deployables: returns ``{name: rp_uuid}`` of Cyborg's
        deployables; if given, a host has converged only when Cyborg
        knows its devices too, with their providers.
    """
    pending = dict(expected)
    converged = {}
    problems = {}
    while True:
        known = deployables() if deployables is not None else None
        for host in sorted(pending):
            problems[host] = view.problems(host, pending[host])
            if known is not None:
                problems[host] += cyborg_problems(pending[host], known)
            if not problems[host]:
                converged[host] = time.monotonic()
                del pending[host]
                del problems[host]
        if not pending:
            return converged
        if herd is not None and set(herd.exited()) & set(pending):
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(poll)
    raise AssertionError(describe(problems, herd, conductor_log))


def conductor_failures(log_path):
    """cyborg-conductor's lines about devices it dropped (the trait
    race: ``Failed to add device ... Failed to create trait ...: HTTP
    204``)."""
    try:
        with open(log_path, errors='replace') as f:
            return [line.rstrip() for line in f
                    if 'Failed to add device' in line]
    except FileNotFoundError:
        return []


def failure_reasons(lines):
    """``{reason: count}`` of :func:`conductor_failures` lines."""
    reasons = {}
    for line in lines:
        reason = line.rsplit('Reason: ', 1)[-1].strip()
        reason = re.sub(r'^\(sqlite3\.\w+\) ', '', reason)
        reason = re.sub(r'CUSTOM_\w+', 'CUSTOM_...', reason)[:60]
        reasons[reason] = reasons.get(reason, 0) + 1
    return reasons


def describe(problems, herd=None, conductor_log=None, lines=15):
    """A failure message: each host's problems, its sidecar's log and
    what cyborg-conductor failed to do."""
    text = ['%d host(s) not converged:' % len(problems)]
    for host, host_problems in sorted(problems.items()):
        text.append('  %s:' % host)
        text.extend('    %s' % p for p in host_problems)
        if herd is not None:
            status = herd.hosts[host].exited()
            if status is not None:
                text.append('    (its sidecar exited with %s)' % status)
    if herd is not None:
        for host in sorted(problems)[:3]:
            text.append('--- %s ---' % herd.hosts[host].log_path)
            text.append(herd.hosts[host].tail(lines))
    if conductor_log is not None:
        failures = conductor_failures(conductor_log)
        text.append('--- cyborg-conductor: %d failure(s) ---' % len(
            failures))
        text.extend(line[:400] for line in failures[:5])
    return '\n'.join(text)


def start_hosts(test, names, function_id, num_pfs=2, num_vfs=4,
                vendor='8086'):
    """Start a real nova-compute for each of ``names`` (``test`` is a
    :class:`tests.functional.base.AcceleratorTestBase`), each with
    ``num_pfs`` FPGAs of the same card type (``vendor``, the simulator's
    region ``compat_id``, ``function_id`` loaded); return ``{name:
    SimulatedHost}``. The sidecars are the herd's processes."""
    return {name: test.start_accel_compute(
        name, num_pfs=num_pfs, num_vfs=num_vfs, vendors=[vendor] * num_pfs,
        function_ids=[function_id] * num_pfs, sidecar=False)
        for name in names}
