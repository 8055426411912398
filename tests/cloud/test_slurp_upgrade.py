"""The SLURP upgrade, 2026.1 to 2026.2, under servers with devices.

Runs against a local cloud started on the 2026.1 release (``tox -e
upgrade``: ``python -m localcloud up`` from the ``cloud-nova33`` env) and
upgrades it with ``python -m localcloud upgrade --to-env
$NOVA_CYBORG_UPGRADE_TO_ENV`` (the ``cloud`` env: Nova 34, Cyborg 17),
as an operator does: the control plane first, then one compute (a mixed
period: one compute on each release), then the other.

Before: servers of an owner, with an FPGA (booted; booted and resized),
with a vGPU (an mdev the sidecar created on the host's GPU; one server
booted for each kind of :data:`OTHER_DEVICES`), with a live-migratable
VF (the sidecar's pci driver's, which goes to Cyborg 16 as type GPU;
live-migrated) and without (one given an accelerator afterwards).
The FPGA server is resized by the admin, another project's (on Cyborg
16 the bind then needs the bare ``OpenStack-API-Version: 2.1``). During
the mixed period and after (no device reported anew when a sidecar is
unpinned: the VFs' type turns from GPU to PCI in place): every server
ACTIVE for its owner and
for the admin (another project), its domain on its host with exactly its
Bound ARQs' devices, those ARQs Bound on its host and the devices'
allocations on their providers (``churn.server_problems``), and each
server keeps the devices it had before the upgrade (its mdev still on
its host). After: a hard reboot, a cold migration (refused for the
server with an added accelerator, which a move would drop) and a delete
of each, and nothing left: no ARQ, no allocation, no domain, no mdev.
Every wait has a deadline (``base``).

Skipped unless the cloud runs 2026.1 everywhere and
``NOVA_CYBORG_UPGRADE_TO_ENV`` names the new release's environment.
"""

import os
import re

from localcloud import configs
from localcloud import release
from tests.cloud import base
from tests.cloud import churn

TO_ENV = os.environ.get('NOVA_CYBORG_UPGRADE_TO_ENV')

#: Devices beside the FPGAs that a server is booted with on 2026.1 and
#: keeps through the upgrade, then is hard rebooted, cold-migrated and
#: deleted with: ``(device profile groups, resource class)``, one server
#: each.
OTHER_DEVICES = (
    (base.VGPU_GROUPS, 'VGPU'),
)


class SlurpUpgradeTest(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if not TO_ENV:
            self.skipTest('NOVA_CYBORG_UPGRADE_TO_ENV (the new release\'s '
                          'environment) is not set')
        pythons = {self.layout.python_for(p)
                   for p in ['control'] + self.layout.hosts}
        names = {release.of(p).name for p in pythons}
        if names != {'2026.1'}:
            self.skipTest('the cloud does not run 2026.1 everywhere (%s)'
                          % ', '.join(sorted(names)))
        if self.layout.computes < 2:
            self.skipTest('the upgrade moves servers between two computes')

    # -- helpers -------------------------------------------------------

    def action(self, server_id, body, conn=None, expect=202):
        response = self._compute(conn or self.admin, 'post',
                                 '/servers/%s/action' % server_id,
                                 json=body)
        self.assertEqual(expect, response.status_code, response.text)

    def devices(self, server_id):
        """The devices of the server's Bound ARQs."""
        return {churn.arq_device(a) for a in churn.bound(
            self.all_arqs(server_id))}

    def check(self, expected, when):
        """Every server ACTIVE for its owner and the admin, with exactly
        its devices (``expected``: ``{server: devices}``), its domain,
        ARQs and allocations consistent, its mdevs on its host."""
        domains = churn.read_domains(self.layout.domain_xml_dir)
        mdevs = churn.mdevs(self.sysfs_roots())
        problems = []
        for server_id, devices in expected.items():
            server = self.server(server_id)
            own = self.server(server_id, self.owner)
            if server['status'] != 'ACTIVE' or own['status'] != 'ACTIVE':
                problems.append('server %s: %s for the admin, %s for its '
                                'owner' % (server_id, server['status'],
                                           own['status']))
            problems += churn.server_problems(
                server, domains.get(server_id), self.all_arqs(server_id),
                self.allocations(server_id), self.resource_classes)
            if self.devices(server_id) != devices:
                problems.append('server %s had %s, has %s' % (
                    server_id, sorted(devices),
                    sorted(self.devices(server_id))))
            host = server['OS-EXT-SRV-ATTR:host']
            for device in sorted(devices):
                kind, _, name = device.partition(' ')
                if kind == 'mdev' and name not in mdevs.get(host, []):
                    problems.append('server %s: %s is not on %s (its '
                                    'mdevs: %s)' % (server_id, device, host,
                                                    mdevs.get(host, [])))
        self.assertEqual([], problems, when)

    def wait_settled(self, server_id):
        """ACTIVE with no task (an action's end)."""
        def settled():
            server = self.server(server_id)
            if server['status'] == 'ERROR':
                self.fail('server %s went to ERROR: %s' % (
                    server_id, server.get('fault')))
            return (server['status'] == 'ACTIVE' and
                    not server['OS-EXT-STS:task_state'])
        base.wait_until(settled, 'server %s ACTIVE, no task' % server_id)

    def resize(self, server_id, flavor_id):
        """The admin (another project) resizes (with None: cold-migrates)
        and confirms; returns the new host."""
        before = self.server(server_id)['OS-EXT-SRV-ATTR:host']
        conn = self.admin
        body = ({'resize': {'flavorRef': flavor_id}} if flavor_id else
                {'migrate': None})
        self.action(server_id, body, conn=conn)
        self.wait_for_status(server_id, 'VERIFY_RESIZE')
        self.action(server_id, {'confirmResize': None}, conn=conn,
                    expect=204)
        self.wait_settled(server_id)
        after = self.server(server_id)['OS-EXT-SRV-ATTR:host']
        if flavor_id is None:
            self.assertNotEqual(before, after, 'cold migration of %s'
                                % server_id)
        return after

    def live_migrate(self, server_id):
        before = self.server(server_id)['OS-EXT-SRV-ATTR:host']
        self.action(server_id, {'os-migrateLive': {
            'host': None, 'block_migration': 'auto'}})
        base.wait_until(
            lambda: (self.server(server_id)['OS-EXT-SRV-ATTR:host'] !=
                     before and not self.server(server_id)[
                         'OS-EXT-STS:task_state']),
            'server %s live-migrated from %s' % (server_id, before))
        self.wait_settled(server_id)

    def assertNothingReportedAnew(self, out):
        """No device came as new when a sidecar was unpinned (its first
        2026.2 report): Cyborg 16 had them all."""
        self.assertIn('newly reported', out)
        self.assertEqual([], re.findall(r'\b([1-9]\d*) newly reported', out),
                         out)

    def upgrade(self, *args):
        return self.localcloud('upgrade', '--to-env', TO_ENV, *args)

    # -- the scenario ----------------------------------------------------

    def test_upgrade_keeps_devices(self):
        mdevs_at_start = churn.mdevs(self.sysfs_roots())
        profile = self._profile()
        self.resource_classes = {profile: 'FPGA'}
        fpga = self.create_flavor(profile)
        fpga_big = self.create_flavor(profile, 768)
        plain = self.create_flavor()
        # On 2026.1: boot, resize, live-migrate, add an accelerator.
        booted = self.boot(fpga)['id']
        others = []
        for groups, resource_class in OTHER_DEVICES:
            other = self._profile_of(groups)
            self.resource_classes[other] = resource_class
            others.append(self.boot(self.create_flavor(other))['id'])
        resized = self.boot(fpga)['id']
        self.resize(resized, fpga_big)
        vf = self._profile_of([{'resources:%s' % configs.MIGRATABLE_RC:
                                '1'}])
        self.resource_classes[vf] = configs.MIGRATABLE_RC
        migrated = self.boot(self.create_flavor(vf, 256))['id']
        self.live_migrate(migrated)
        added = self.boot(plain)['id']
        self.action(added, {'addAccelerator': {'device_profile': profile}},
                    conn=self.owner)
        base.wait_until(lambda: len(self.devices(added)) == 1 and not (
            self.server(added)['OS-EXT-STS:task_state']),
            'an FPGA added to server %s' % added)
        self.wait_settled(added)
        expected = {s: self.devices(s)
                    for s in [booted, resized, migrated, added] + others}
        for server_id in expected:
            self.assertEqual(1, len(expected[server_id]), server_id)
        self.check(expected, 'on 2026.1')

        # The control plane and one compute: the mixed period.
        out = self.upgrade('--computes', '1')
        self.assertIn('mixed:', out)
        self.assertEqual(
            {'2026.1', '2026.2'},
            {release.of(self.layout.load(self.layout.root).python_for(h))
             .name for h in self.layout.hosts}, out)
        self.check(expected, 'mixed period:\n' + out)
        self.assertNothingReportedAnew(out)

        # The other compute.
        out = self.upgrade()
        self.assertIn('every service but', out)
        self.check(expected, 'on 2026.2:\n' + out)
        self.assertNothingReportedAnew(out)

        # After: hard reboot, cold migration, delete; nothing left.
        for server_id in expected:
            self.action(server_id, {'reboot': {'type': 'HARD'}},
                        conn=self.owner)
            self.wait_settled(server_id)
        self.check(expected, 'after hard reboots')
        for server_id in [booted, resized, migrated] + others:
            self.resize(server_id, None)
        # A move would drop an accelerator added with addAccelerator: it
        # is refused, the server left as it was.
        self.action(added, {'migrate': None}, expect=400)
        moved = {s: self.devices(s) for s in expected}
        self.assertEqual({s: len(d) for s, d in expected.items()},
                         {s: len(d) for s, d in moved.items()})
        self.check(moved, 'after cold migrations')
        for server_id in expected:
            self.delete(server_id)

        self.assert_nothing_left(list(expected), mdevs_at_start)
