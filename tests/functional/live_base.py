"""Live migration in the harness: fakelibvirt's migration, two hosts.

As Nova's own ``LibvirtMigrationMixin`` (nova/tests/functional/libvirt/
base.py) does, fakelibvirt's ``migrateToURI3`` is replaced: the
destination XML Nova built (with the remapped ``<hostdev>``s) is defined
on the destination host's fakelibvirt connection, the source domain's
job completes, and the source's domain stops and is undefined (the
migration flags hold VIR_MIGRATE_UNDEFINE_SOURCE). The XML is kept
(``self.destination_xml``) so that tests read the ``<hostdev>``s the
destination got. ``self.during_migration``, if set, runs first (with the
source domain and the destination host): a test makes the migration
fail or waits there to abort it, and returns True to end the migration
there.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

from urllib import parse  # noqa: E402
from xml.etree import ElementTree  # noqa: E402

import fixtures  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from nova_cyborg.model import bookkeeping  # noqa: E402
from tests.functional import attach_base  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

TRAIT = 'HW_PCI_LIVE_MIGRATABLE'
#: libvirt 10.0.0 and QEMU 8.2.2: what Nova asks for VFIO migration.
LIBVIRT_VERSION = 10000000
QEMU_VERSION = 8002002


class LiveMigrationBase(attach_base.AttachSteps, base.AcceleratorTestBase):

    def setUp(self):
        # Every host started from now on has versions that migrate VFIO.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.FAKE_LIBVIRT_VERSION',
            LIBVIRT_VERSION))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.FAKE_QEMU_VERSION', QEMU_VERSION))
        super().setUp()
        self.without_disks()
        self.destination_xml = []
        self.during_migration = None

        def migrate(domain, destination, params=None, flags=0):
            self._migrate_stub(domain, destination, params, flags)
        # A plain function on the class: the domain is its first argument.
        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Domain, 'migrateToURI3', new=migrate))

    def _migrate_stub(self, domain, destination, params=None, flags=0):
        dest = parse.urlparse(destination).hostname
        if self.during_migration is not None and self.during_migration(
                domain, dest):
            return
        self.destination_xml.append((dest, params['destination_xml']))
        self.computes[dest].driver._host.get_connection().createXML(
            params['destination_xml'], 0)
        domain.complete_job()
        # The guest has left: its QEMU on the source exits, and libvirt
        # undefines the source's domain when asked to (Nova's libvirt
        # driver always is: VIR_MIGRATE_UNDEFINE_SOURCE, nova/virt/libvirt/
        # driver.py), as virDomainMigrateToURI3 documents.
        domain.destroy()
        if flags & fakelibvirt.VIR_MIGRATE_UNDEFINE_SOURCE:
            try:
                domain.undefine()
            except (KeyError, fakelibvirt.libvirtError):
                # The completed job let the source's _post_live_migration
                # run: its driver.cleanup() undefined the domain first.
                pass

    # Steps

    def wait_migratable(self, hostname):
        """The sidecar marked every device provider of the host."""
        for name, rp in self.device_rp_uuids(hostname).items():
            waits.wait_until(
                lambda rp=rp: TRAIT in self._get_provider_traits(rp),
                '%s on %s' % (TRAIT, name))

    def admin_starts_live_migration(self, server, host=None):
        """The cloud admin (another project) asks to live-migrate the
        owner's server."""
        self.cloud_admin_api.post_server_action(server['id'], {
            'os-migrateLive': {'host': host, 'block_migration': 'auto'}})

    def admin_live_migrates(self, server, host=None, status='completed'):
        """The cloud admin live-migrates the owner's server; waits for the
        migration's ``status``; returns the server as the admin sees it
        once ACTIVE again."""
        self.admin_starts_live_migration(server, host)
        with self.acting(self.cloud_admin_api):
            self._wait_for_migration_status(server, [status])
            return self._wait_for_state_change(server, 'ACTIVE')

    def running_live_migration(self, server):
        """The cloud admin starts live-migrating the owner's server to a
        host the scheduler chooses; returns the migration once running."""
        self.admin_starts_live_migration(server)
        with self.acting(self.cloud_admin_api):
            self._wait_for_migration_status(server, ['running'])
        return self.last_migration(server)

    def last_migration(self, server):
        """The server's latest live migration, as an operator sees it."""
        migs = [m for m in self.admin_api.api_get(
            '/os-migrations?instance_uuid=%s' % server['id']).body[
                'migrations'] if m['migration_type'] == 'live-migration']
        return max(migs, key=lambda m: m['id'])

    # Checks

    def owner_uuid(self, server):
        inst = objects.Instance.get_by_uuid(
            nova_context.get_admin_context(), server['id'],
            expected_attrs=['system_metadata'])
        return bookkeeping.arq_owner(inst)

    def xml_hostdevs(self, xml):
        """(PCI BDFs, mdev UUIDs) of the ``<hostdev>``s of a domain XML."""
        root = ElementTree.fromstring(xml)
        bdfs = sorted(base.canonical_bdf(*(
            hd.find('./source/address').get(k)
            for k in ('domain', 'bus', 'slot', 'function')))
            for hd in root.findall('./devices/hostdev[@type="pci"]'))
        mdevs = sorted(hd.find('./source/address').get('uuid')
                       for hd in root.findall(
                           './devices/hostdev[@type="mdev"]'))
        return bdfs, mdevs

    def runs_domain(self, hostname, server):
        """Whether the host runs a domain of the server."""
        conn = self.computes[hostname].driver._host.get_connection()
        try:
            return bool(conn.lookupByUUIDString(server['id']).isActive())
        except fakelibvirt.libvirtError:
            return False

    def assert_on_host(self, server, hostname, other, n_arqs=1):
        """As the owner and an operator see it: ACTIVE on ``hostname``, its
        ARQs Bound there in the owner's project (under the owner that holds
        them; none under the other), the domain's ``<hostdev>``s theirs,
        the allocation on ``hostname`` only, no running domain on
        ``other``."""
        self.assertEqual(
            'ACTIVE', self.owner_api.get_server(server['id'])['status'])
        server = self.admin_api.get_server(server['id'])
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        owner = self.owner_uuid(server)
        others = [u for u in bookkeeping.owners(server['id']) if u != owner]
        self.assertEqual([], self.cyborg.list_arqs(others[0]))
        arqs = self.cyborg.list_arqs(owner)
        self.assertEqual(n_arqs, len(arqs))
        rps = set(self.device_rp_uuids(hostname).values())
        self.assertEqual(
            {('Bound', hostname, attach_base.OWNER_PROJECT, True)},
            {(a['state'], a['hostname'], a['project_id'],
              a['device_rp_uuid'] in rps) for a in arqs})
        bdfs, mdevs = self.xml_hostdevs(self.domain_xml(server))
        self.assertEqual(sorted(self.arq_bdf(a) for a in arqs
                                if a['attach_handle_type'] == 'PCI'), bdfs)
        self.assertEqual(sorted(a['attach_handle_uuid'] for a in arqs
                                if a['attach_handle_type'] == 'MDEV'), mdevs)
        host_tree = rps | {self._get_provider_uuid_by_host(hostname)}
        self.assertTrue(set(self.allocations(server['id'])) <= host_tree)
        self.assertEqual({a['device_rp_uuid']: 1 for a in arqs},
                         {rp: sum(v for k, v in alloc['resources'].items()
                                  if k in ('FPGA', 'VGPU'))
                          for rp, alloc in self.allocations(
                              server['id']).items() if rp in rps})
        self.assertFalse(self.runs_domain(other, server))
        # No ARQ left on the other host, none of its devices allocated.
        self.assertEqual([], [a for a in self.cyborg.list_arqs()
                              if a['hostname'] == other])
        return arqs

    def action_tracebacks(self, server):
        """The tracebacks of the events of the server's live-migration
        actions, as an operator reads them."""
        texts = []
        for action in self.admin_api.get_instance_actions(server['id']):
            if action['action'] != 'live-migration':
                continue
            details = self.admin_api.get_instance_action_details(
                server['id'], action['request_id'])
            for event in details['events']:
                texts.append(event.get('details') or '')
                texts.append(event.get('traceback') or '')
        return '\n'.join(texts)
