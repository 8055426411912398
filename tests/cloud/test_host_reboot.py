"""A compute host reboots under servers with devices (issue 39).

The owner boots, on one host (a server group with the ``affinity``
policy), one server of each kind of device the local cloud's hosts
offer:

- an FPGA port released to a VF of an Intel DFL card (the ``fpga``
  driver);
- an SR-IOV VF of the hosts' plain PF (the generic PCI driver's
  live-migratable VFs, ``CUSTOM_MIGRATABLE_VF``);
- an mdev vGPU (``nvidia-11`` on the hosts' mdev-capable GPUs, the
  ``gpu`` driver);
- an NVIDIA vGPU 17 VF of the hosts' H100 (the ``gpu`` driver writes its
  type, H100-20C, to the VF's ``nvidia/current_vgpu_type`` at bind; the
  VF goes to the guest as an unmanaged PCI hostdev).

What each server holds is recorded: its ARQs (state, device provider,
attach handle), the ``<hostdev>``s of its domain XML, its allocations.
Then its host reboots (``python -m localcloud host reboot``,
:mod:`localcloud.reboot`): its domains are shut off and its devices are
as a cold boot leaves them (no mdev, SR-IOV enabled again and the FPGA
ports released to their VFs again by the boot's configuration, every
port with its card's default function, every vGPU 17 VF untyped). As on
a real host, the sidecar starts first and nova-compute only once the
sidecar said READY (:mod:`localcloud.boot_order`, the unit's
``Type=notify`` and ``Before=nova-compute``), its first cycle having put
back each server's device: its mdev (the sidecar creates those of Bound
ARQs again), its FPGA port on its VF, its VF's vGPU type (written again
for Bound ARQs). nova-compute, with
``resume_guests_state_on_host_boot`` as a deployer sets it, finds the
guests shut off and starts them again by itself. Each server is ACTIVE
with its guest running, without its owner doing anything: each guest
was started once since the reboot and found its device there when it
started (:class:`localcloud.reboot.GuestStarts`, what the guest sees),
its ARQs are Bound to the same providers and handles, its domain's
``<hostdev>``s and its allocations are as before, its device on the host
(the FPGA VF on ``vfio-pci``, held by the guest), the host's providers as
before. Once the owner has deleted them, nothing is left: no domain, ARQ,
allocation or mdev.

The same with an FPGA port whose profile names a bitstream: its port is
loaded with the server's function again before the guest starts (the
sidecar does it for each Bound ARQ once it starts, before its first
report: :mod:`sidecar.program.fpga_restore`).
"""

import glob
import json
import os
import uuid as uuidlib
from xml.etree import ElementTree

from localcloud import configs
from localcloud import reboot
from tests.cloud import base
from tests.cloud import churn

#: Power states of Nova's API (nova.compute.power_state).
RUNNING = 1
FUNCTION_ID_PROPERTY = 'accel:function_id'
FUNCTION_TRAIT_PREFIX = 'CUSTOM_FPGA_FUNCTION_ID_'
#: A VF of the hosts' plain PFs.
VF_GROUPS = [{'resources:%s' % configs.MIGRATABLE_RC: '1'}]


class HostRebootTest(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if not self.layout.gpus:
            self.skipTest('the cloud\'s hosts have no GPU (up --gpus 0)')
        if not self.layout.vfs:
            self.skipTest('the cloud\'s FPGAs have no VF (up --vfs 0)')
        if not self.layout.vgpu17:
            self.skipTest('the cloud\'s hosts have no vGPU 17 card '
                          '(up --vgpu17 0)')

    # -- what the admin makes ----------------------------------------------

    def bitstream(self, function_id):
        """A public image the simulated card loads (its data is the
        function id, which it declares in ``accel:function_id``), deleted
        at cleanup; its id."""
        image = self.admin.image
        response = image.post('/images', json={
            'name': base._name('bitstream'), 'container_format': 'bare',
            'disk_format': 'raw', 'visibility': 'public',
            FUNCTION_ID_PROPERTY: function_id})
        self.assertEqual(201, response.status_code, response.text)
        image_id = response.json()['id']
        self.addCleanup(image.delete, '/images/%s' % image_id)
        response = image.put(
            '/images/%s/file' % image_id,
            data=('%s\n' % function_id).encode(),
            headers={'Content-Type': 'application/octet-stream'})
        self.assertEqual(204, response.status_code, response.text)

        def active():
            response = image.get('/images/%s' % image_id)
            self.assertEqual(200, response.status_code, response.text)
            return response.json()['status'] == 'active'
        base.wait_until(active, 'bitstream image %s active' % image_id)
        return image_id

    def affinity_group(self):
        """The owner's server group: its servers on one host."""
        response = self._compute(self.owner, 'post', '/os-server-groups',
                                 json={'server_group': {
                                     'name': base._name('group'),
                                     'policies': ['affinity']}})
        self.assertEqual(200, response.status_code, response.text)
        group_id = response.json()['server_group']['id']
        self.addCleanup(self._compute, self.owner, 'delete',
                        '/os-server-groups/%s' % group_id)
        return group_id

    def boot_in(self, flavor_id, group_id):
        """The owner boots a server in the group; its admin view once
        ACTIVE."""
        response = self._compute(self.owner, 'post', '/servers', json={
            'server': {'name': base._name('server'),
                       'imageRef': self.image_id(), 'flavorRef': flavor_id,
                       'networks': 'none'},
            'os:scheduler_hints': {'group': group_id}})
        self.assertEqual(202, response.status_code, response.text)
        server_id = response.json()['server']['id']
        self.addCleanup(self._delete_quietly, server_id)
        return self.wait_for_status(server_id, 'ACTIVE')

    def settled(self, server_id, status, power):
        """Wait until the server is ``status``, with no task, in Nova's
        ``power`` state; its admin view."""
        def reached():
            server = self.server(server_id)
            if server['status'] == 'ERROR':
                self.fail('server %s went to ERROR: %s' % (
                    server_id, server.get('fault')))
            return server if (
                server['status'] == status and
                not server['OS-EXT-STS:task_state'] and
                server['OS-EXT-STS:power_state'] == power) else None
        return base.wait_until(reached, 'server %s %s, power state %d, '
                               'no task' % (server_id, status, power))

    # -- what the host has -------------------------------------------------

    def _function_dir(self, host, address):
        return os.path.join(self.sysfs_roots()[host], 'bus', 'pci',
                            'devices', address)

    def driver(self, host, address):
        """The driver PCI function ``address`` is bound to, or None
        (Documentation/ABI/testing/sysfs-bus-pci ``driver``)."""
        link = os.path.join(self._function_dir(host, address), 'driver')
        return (os.path.basename(os.readlink(link))
                if os.path.islink(link) else None)

    def port_afu_ids(self, host, address):
        """The ``afu_id`` of each DFL port the host sees under PCI
        function ``address`` (Documentation/ABI/testing/
        sysfs-platform-dfl-port): none while a guest holds it."""
        found = []
        for path in sorted(glob.glob(os.path.join(
                self._function_dir(host, address), 'fpga_region',
                'region*', 'dfl-port.*', 'afu_id'))):
            with open(path) as f:
                found.append(f.read().strip().lower())
        return found

    def function_traits(self, rp_uuid):
        return sorted(t for t in self._placement(
            '/resource_providers/%s/traits' % rp_uuid)['traits']
            if t.startswith(FUNCTION_TRAIT_PREFIX))

    def domain_state(self, server_id):
        """libvirt's state of the server's domain, as its host saved
        it (:class:`localcloud.compute_host.DomainFiles`)."""
        with open(self.domain_file(server_id)[:-len('.xml')] +
                  '.state') as f:
            return json.load(f)['state']

    def vgpu_type(self, host, address):
        """The vGPU type id of vGPU 17 VF ``address`` (NVIDIA
        vgpu-device-manager ``pkg/vgpu/vfio/sysfs.go``: ``0`` for none)."""
        with open(os.path.join(self._function_dir(host, address), 'nvidia',
                               'current_vgpu_type')) as f:
            return f.read().strip()

    def mdev_hostdevs(self, server_id):
        root = ElementTree.parse(self.domain_file(server_id)).getroot()
        return sorted(a.get('uuid').lower() for a in root.findall(
            "./devices/hostdev[@type='mdev']/source/address"))

    def held(self, server_id):
        """What the server holds and a host reboot must not change."""
        arqs = self.all_arqs(server_id)
        return {
            'arqs': sorted((a['uuid'], a['state'], a['device_rp_uuid'],
                            a['hostname'], a['attach_handle_type'],
                            churn.arq_device(a)) for a in arqs),
            'pci hostdevs': sorted(self.hostdevs(server_id)),
            'mdev hostdevs': self.mdev_hostdevs(server_id),
            'allocations': {rp: a['resources'] for rp, a in
                            self.allocations(server_id).items()},
        }

    def device_problems(self, host, kind, arq, guest_holds, function_id):
        """What the host lacks of the server's device.

        :param guest_holds: whether the server's guest runs (it then holds
            a PCI function on ``vfio-pci``, libvirt's managed hostdev).
        """
        device = churn.arq_device(arq)
        problems = []
        if kind == 'vgpu':
            mdev = arq['attach_handle_uuid'].lower()
            if mdev not in churn.mdevs(self.sysfs_roots()).get(host, []):
                problems.append('mdev %s is not on %s' % (mdev, host))
            return problems
        if not os.path.isdir(self._function_dir(host, device)):
            return ['%s (%s) is not on %s' % (device, kind, host)]
        if kind == 'vgpu17':
            if self.vgpu_type(host, device) in ('', '0'):
                problems.append('vGPU 17 VF %s has no vGPU type' % device)
            return problems
        if kind != 'fpga':
            return problems
        driver = self.driver(host, device)
        ports = self.port_afu_ids(host, device)
        if guest_holds:
            if driver != 'vfio-pci' or ports:
                problems.append('FPGA VF %s held by its guest: driver %s, '
                                'ports %s' % (device, driver, ports))
        elif driver != 'dfl-pci' or len(ports) != 1:
            problems.append('FPGA VF %s: driver %s, ports %s; its port '
                            'released to it on dfl-pci expected' % (
                                device, driver, ports))
        elif function_id and ports != [function_id]:
            problems.append('FPGA VF %s: its port loaded with %s, the '
                            'server\'s function %s' % (
                                device, ports[0], function_id))
        if not function_id:
            return problems
        traits = self.function_traits(arq['device_rp_uuid'])
        if len(traits) != 1 or not traits[0].endswith(
                '_' + function_id.upper()):
            problems.append('FPGA provider %s: function traits %s, the '
                            'server\'s function %s' % (
                                arq['device_rp_uuid'], traits, function_id))
        return problems

    def start_problems(self, start, server, held):
        """What a guest lacked when it started (a
        :class:`localcloud.reboot.GuestStarts` record): nova-compute
        started it once the sidecar said READY=1, and the device its
        ARQ names, present, with the server's FPGA function loaded in the
        port released to its VF (no function asked: a port there)."""
        kind, function_id = server
        if not start['sidecar_ready']:
            return ['started before the host\'s sidecar said READY=1']
        (arq,) = held['arqs']
        device = arq[5]
        found = start['devices'].get(device)
        if not found or not found['present']:
            return ['%s (%s) not on the host: %s' % (device, kind, found)]
        if kind == 'vgpu17':
            if found.get('current_vgpu_type') in (None, '', '0'):
                return ['vGPU 17 VF %s untyped when its guest started: %s'
                        % (device, found)]
            return []
        if kind != 'fpga':
            return []
        ports = found['afu_ids']
        if found['driver'] != 'dfl-pci' or len(ports) != 1:
            return ['FPGA VF %s: driver %s, ports %s; its port released '
                    'to it on dfl-pci expected' % (device, found['driver'],
                                                   ports)]
        if function_id and ports != [function_id]:
            return ['FPGA VF %s: its port loaded with %s, the server\'s '
                    'function %s' % (device, ports[0], function_id)]
        return []

    def providers(self, host):
        """:meth:`device_providers` without the FPGA function traits: a
        cold boot loads each idle port with its card's default
        function."""
        return {rp: (name, parent, inventories, [
            t for t in traits if not t.startswith(FUNCTION_TRAIT_PREFIX)])
            for rp, (name, parent, inventories, traits) in
            self.device_providers(host).items()}

    def wait_devices(self, host, servers, guest_holds, what):
        def problems():
            found = []
            for server_id, (kind, function_id) in servers.items():
                for arq in churn.bound(self.all_arqs(server_id)):
                    found += self.device_problems(host, kind, arq,
                                                  guest_holds, function_id)
            return found
        try:
            base.wait_until(lambda: not problems(), what, timeout=120)
        except AssertionError:
            self.assertEqual([], problems(), what)

    # -- the tests ---------------------------------------------------------

    def test_servers_come_back_with_their_devices(self):
        """An FPGA port released to a VF (no function asked), a VF, an
        mdev vGPU and a vGPU 17 VF."""
        self.reboot_under(self._profile(), None)

    def test_fpga_function_programmed_again(self):
        """An FPGA port whose profile names a bitstream, with a VF and an
        mdev vGPU: the port is loaded with the server's function again
        before its guest starts."""
        function_id = uuidlib.uuid4().hex
        self.reboot_under(self._profile_of([{
            'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required',
            'accel:bitstream_id': self.bitstream(function_id)}]),
            function_id)

    def reboot_under(self, fpga_profile, function_id):
        """The scenario of the module's docstring; ``function_id``: the
        function ``fpga_profile`` asks (None: none)."""
        flavors = {
            'fpga': self.create_flavor(fpga_profile),
            'vf': self.create_flavor(self._profile_of(VF_GROUPS), ram=256),
            'vgpu': self.create_flavor(self._profile_of(base.VGPU_GROUPS)),
            'vgpu17': self.create_flavor(
                self._profile_of(base.VGPU17_GROUPS)),
        }
        mdevs_before = churn.mdevs(self.sysfs_roots())
        group = self.affinity_group()
        servers = {}
        hosts = set()
        for kind in ('fpga', 'vf', 'vgpu', 'vgpu17'):
            server = self.boot_in(flavors[kind], group)
            servers[server['id']] = (
                kind, function_id if kind == 'fpga' else None)
            hosts.add(server['OS-EXT-SRV-ATTR:host'])
        (host,) = hosts
        for server_id in servers:
            self.settled(server_id, 'ACTIVE', RUNNING)
        before = {server_id: self.held(server_id) for server_id in servers}
        for server_id, held in before.items():
            kind = servers[server_id][0]
            (arq,) = held['arqs']
            self.assertEqual(('Bound', host), arq[1:2] + arq[3:4], held)
            # A vGPU 17 VF typed at bind: an MDEV handle naming the VF.
            self.assertEqual(['MDEV'] if kind in ('vgpu', 'vgpu17')
                             else ['PCI'], [arq[4]], held)
            devices = ({churn.mdev(m) for m in held['mdev hostdevs']} |
                       {churn.pci(*a) for a in held['pci hostdevs']})
            self.assertEqual({arq[5]}, devices, held)
        self.wait_devices(host, servers, True, 'the servers\' devices on '
                          '%s before the reboot' % host)
        providers = self.providers(host)

        self.addCleanup(self._start_if_stopped, host)
        starts_before = len(reboot.guest_starts(self.layout, host))
        out = self.localcloud('host', 'reboot', host)
        self.assertIn('%s: started' % host, out)

        # nova-compute, started once the sidecar said READY, started the
        # guests of the running servers again by itself
        # (resume_guests_state_on_host_boot): each server is ACTIVE with
        # its guest running, without its owner doing anything.
        for server_id in servers:
            server = self.settled(server_id, 'ACTIVE', RUNNING)
            self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
            base.wait_until(
                lambda sid=server_id: (
                    self.domain_state(sid) == reboot.RUNNING),
                'the guest of server %s running again' % server_id)
            self.assertEqual('running',
                             self.diagnostics(server_id)['state'])
            self.assertEqual('ACTIVE',
                             self.server(server_id, self.owner)['status'])
            self.assertEqual(before[server_id], self.held(server_id))
        # Each guest was started once since the reboot, and found its
        # devices there when it started.
        starts = reboot.guest_starts(self.layout, host)[starts_before:]
        self.assertEqual(sorted(servers), sorted(s['uuid'] for s in starts),
                         starts)
        for start in starts:
            self.assertEqual([], self.start_problems(
                start, servers[start['uuid']], before[start['uuid']]),
                start)
        self.wait_devices(host, servers, True, 'the servers\' devices on '
                          '%s, their guests running again' % host)
        self.assertEqual(providers, self.providers(host))

        for server_id in servers:
            self.delete(server_id)
        self.assert_nothing_left(sorted(servers), mdevs_before)
        # The sidecar takes the type back once the ARQ is gone.
        typed = [held['arqs'][0][5] for server_id, held in before.items()
                 if servers[server_id][0] == 'vgpu17']
        base.wait_until(
            lambda: all(self.vgpu_type(host, vf) == '0' for vf in typed),
            'the vGPU 17 VFs %s untyped after the delete' % typed)
