"""P11: addAccelerator and removeAccelerator, against a boot's device.

One host with one FPGA of 4 VFs (the ``fpga`` driver) and one
vGPU-capable GPU (fakelibvirt's ``nvidia-11``, the ``gpu`` driver); device
profiles asking for one VF and one vGPU, a flavor for each, and a plain
flavor. Each round, in one process:

* three boots (VF, vGPU, plain; the order rotates), each deleted before
  the next: a boot is timed as for P1 (POST to ACTIVE), and the Cyborg
  bind (``CyborgClient.bind_arqs``, the PATCH) that began within it;
* on a running plain server: ``addAccelerator`` of the VF profile, then
  ``removeAccelerator``;
* on a stopped plain server: the same with the vGPU profile (a mediated
  device is not plugged into a running guest: refused by design).

An action is timed from its POST to the end of nova-compute's handler
(``nova_cyborg.flows.attach.endpoint._Actions``: the task state cleared and the
instance action's event recorded; no polling), and checked (the ARQs the
server holds in Cyborg afterwards). The first ``WARMUP`` rounds are not
counted; ``NOVA_CYBORG_BENCH_ROUNDS`` rounds are (default 20).

fakelibvirt sends no events: Nova's detach from a running guest would wait
for libvirt's device-removed event until ``[libvirt]
device_detach_timeout`` (20 s) every time. Here the event is sent as
libvirt sends it once the guest let go (:class:`DeviceRemovedEvents`),
at once: a real guest's own time to release the device is not in the
figure.
"""

# Nova picks its threading mode when the harness is imported: first.
from benchmarks import harness  # noqa: I100

import os  # noqa: E402
import time  # noqa: E402
from xml.etree import ElementTree  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402
from nova.virt.libvirt import event as libvirtevent  # noqa: E402

from benchmarks import stopwatch  # noqa: E402

WARMUP = 2
FPGA = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
VGPU = [{'resources:VGPU': '1'}]
WATCHED = [
    ('nova_cyborg.flows.attach.endpoint._Actions.add_accelerator', 'add'),
    ('nova_cyborg.flows.attach.endpoint._Actions.remove_accelerator',
     'remove'),
    ('nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', 'cyborg.bind'),
    # Where an action's time goes (inside nova-compute's handler).
    ('nova_cyborg.clients.cyborg.get_device_profile_request_groups',
     'cyborg.profile'),
    ('nova_cyborg.clients.cyborg.CyborgClient.get_arqs_for_instance',
     'cyborg.get'),
    ('nova_cyborg.clients.cyborg.CyborgClient.create_arqs', 'cyborg.create'),
    ('nova_cyborg.clients.allocations.add', 'placement.add'),
    ('nova_cyborg.clients.allocations.remove', 'placement.remove'),
    ('nova_cyborg.steps.arqs.bind_and_wait', 'bind_and_wait'),
    ('nova_cyborg.steps.arqs.retire', 'cyborg.retire'),
    ('nova_cyborg.flows.attach.compute._driver', 'libvirt'),
]


def _address(hostdev):
    addr = hostdev.find('./source/address')
    if addr is None:
        return None
    return tuple(int(addr.get(k, '0'), 16)
                 for k in ('domain', 'bus', 'slot', 'function'))


def live_alias(domain_xml, device_xml):
    """The alias libvirt gave in the live domain to the ``<hostdev>`` of
    ``device_xml`` (the same source address), or None."""
    wanted = _address(ElementTree.fromstring(device_xml))
    for hostdev in ElementTree.fromstring(domain_xml).findall(
            './devices/hostdev'):
        alias = hostdev.find('./alias')
        if alias is not None and wanted and _address(hostdev) == wanted:
            return alias.get('name')
    return None


class DeviceRemovedEvents(fixtures.Fixture):
    """libvirt's device-removed event after a live detach, to the
    driver of the host whose connection holds the domain."""

    def __init__(self, computes):
        super().__init__()
        self.computes = computes

    def _setUp(self):
        real = fakelibvirt.Domain.detachDeviceFlags
        computes = self.computes

        # fakelibvirt keeps one definition for the live domain and the
        # persistent one: a detach from the definition (Nova's first) takes
        # the device out of both. The alias it had is kept for the live
        # detach that follows.
        aliases = {}

        def detach(domain, xml, flags):
            key = (domain.UUIDString(),
                   _address(ElementTree.fromstring(xml)))
            alias = live_alias(domain.XMLDesc(0), xml)
            if alias:
                aliases[key] = alias
            result = real(domain, xml, flags)
            if flags & fakelibvirt.VIR_DOMAIN_AFFECT_LIVE:
                alias = aliases.pop(key, alias)
            else:
                alias = None
            for compute in computes.values() if alias else ():
                driver = compute.driver
                if driver._host.get_connection() is domain._connection:
                    driver.emit_event(libvirtevent.DeviceRemovedEvent(
                        domain.UUIDString(), alias))
            return result
        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Domain, 'detachDeviceFlags', new=detach))


class AttachBench(harness.BenchBase):

    def timed_action(self, server, action, dp, n_arqs):
        """``(seconds, [bind seconds], {phase: ms})`` of one action;
        checks its outcome."""
        name = 'add' if action == 'addAccelerator' else 'remove'
        begun = time.time()
        self.api.post_server_action(server['id'],
                                    {action: {'device_profile': dp}})
        call = self.watch.wait(name, begun, uuid=server['id'])
        calls = self.watch.between(begun, call.end)
        binds = [c.end - c.start for c in calls if c.name == 'cyborg.bind']
        phases = {'api and cast': (call.start - begun) * 1000,
                  'handler': (call.end - call.start) * 1000}
        for c in calls:
            if c.name not in ('add', 'remove'):
                phases[c.name] = phases.get(c.name, 0) + (
                    c.end - c.start) * 1000
        self.assertTrue(call.ok, '%s %s raised' % (action, dp))
        self.assertEqual(n_arqs, len(self.cyborg.list_arqs(server['id'])),
                         '%s %s' % (action, dp))
        self.assertIsNone(
            self.api.get_server(server['id'])['OS-EXT-STS:task_state'])
        return call.end - begun, binds, phases

    def test_attach(self):
        rounds = int(os.environ.get('NOVA_CYBORG_BENCH_ROUNDS', '20'))
        self.start_accel_compute(
            'compute1', num_vfs=4, num_mdevcap=1, drivers=('fpga', 'gpu'),
            mdev_types=('nvidia-11',))
        fpga_dp, fpga = self.create_profile_flavor(FPGA)
        vgpu_dp, vgpu = self.create_profile_flavor(VGPU)
        plain = self._create_flavor(name='plain')
        self.watch = self.useFixture(stopwatch.Stopwatch(WATCHED))
        self.useFixture(DeviceRemovedEvents(self.computes))
        running = self.boot(plain)
        stopped = self.boot(plain)
        self._stop_server(stopped)
        result = {'boot': {'fpga': [], 'vgpu': [], 'plain': []},
                  'boot_bind': {'fpga': [], 'vgpu': []},
                  'actions': {}, 'action_bind': {}, 'action_phases': {},
                  'rounds': rounds,
                  'warmup': WARMUP}
        boots = [('fpga', fpga), ('vgpu', vgpu), ('plain', plain)]
        actions = [
            ('add fpga running', running, 'addAccelerator', fpga_dp, 1),
            ('remove fpga running', running, 'removeAccelerator',
             fpga_dp, 0),
            ('add vgpu stopped', stopped, 'addAccelerator', vgpu_dp, 1),
            ('remove vgpu stopped', stopped, 'removeAccelerator',
             vgpu_dp, 0)]
        for i in range(WARMUP + rounds):
            measured = []
            for kind, flavor in boots[i % 3:] + boots[:i % 3]:
                begun = time.time()
                server, seconds, _calls = self.timed_boot(flavor)
                binds = [c.end - c.start
                         for c in self.watch.between(begun, begun + seconds)
                         if c.name == 'cyborg.bind']
                if kind != 'plain':
                    self.assertEqual(
                        1, len(self.cyborg.list_arqs(server['id'])))
                self.timed_delete(server)
                measured.append((kind, seconds, binds, None))
            for key, server, action, dp, n_arqs in actions:
                measured.append((key,) + self.timed_action(
                    server, action, dp, n_arqs))
            if i < WARMUP:
                continue
            for key, seconds, binds, phases in measured:
                if key in result['boot']:
                    result['boot'][key].append(seconds)
                    if key in result['boot_bind']:
                        result['boot_bind'][key].extend(binds)
                else:
                    result['actions'].setdefault(key, []).append(seconds)
                    result['action_bind'].setdefault(key, []).extend(binds)
                    result['action_phases'].setdefault(key, []).append(
                        phases)
        self.write_result(result)
