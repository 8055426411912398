"""A simulated host's domains outlive a restart of its process."""

import json
import os

import fixtures
import testtools

from localcloud import compute_host
from nova.tests.fixtures import libvirt as fakelibvirt

UUID = '11111111-2222-3333-4444-555555555555'
DOMAIN = """<domain type='kvm'><name>instance-%s</name><uuid>%s</uuid>
<memory>524288</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>
<hostdev mode='subsystem' type='pci' managed='yes'><source><address
domain='0x0000' bus='0x81' slot='0x00' function='0x1'/></source></hostdev>
</devices></domain>"""


def _connection():
    """A new host process's libvirt connection: no domain yet."""
    return fakelibvirt.Connection(
        'qemu:///system', version=fakelibvirt.FAKE_LIBVIRT_VERSION,
        hv_version=fakelibvirt.FAKE_QEMU_VERSION,
        host_info=fakelibvirt.HostInfo(),
        pci_info=fakelibvirt.HostPCIDevicesInfo(num_pci=0, num_pfs=1,
                                                num_vfs=4),
        hostname='compute1')


class DomainFilesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.files = compute_host.DomainFiles(self.dir, 'compute1')
        for fixture in self.files.fixtures():
            self.useFixture(fixture)
        self.conn = _connection()

    def _define(self, uuid=UUID, start=True):
        domain = self.conn.defineXML(DOMAIN % (uuid[-4:], uuid))
        if start:
            domain.createWithFlags(0)
        return domain

    def _state(self, uuid=UUID):
        with open(os.path.join(self.dir, uuid + '.state')) as f:
            return json.load(f)

    def _restart(self, host='compute1'):
        """A new process: its connection, with the saved domains."""
        self.useFixture(fixtures.MockPatchObject(
            self.files, 'fixtures'))   # not set up twice
        conn = _connection()
        restored = compute_host.DomainFiles(self.dir, host).restore(conn)
        return conn, restored

    def test_running_domain_is_running_again_with_its_xml(self):
        domain = self._define()
        xml = domain.XMLDesc(0)
        self.assertEqual({'state': fakelibvirt.VIR_DOMAIN_RUNNING,
                          'managed_save': False}, self._state())
        conn, restored = self._restart()
        self.assertEqual([UUID], restored)
        again = conn.lookupByUUIDString(UUID)
        self.assertEqual(1, again.isActive())
        self.assertEqual(xml, again.XMLDesc(0))
        with open(os.path.join(self.dir, UUID + '.xml')) as f:
            self.assertEqual(xml, f.read())

    def test_each_state_is_kept(self):
        paused = self._define('%s1' % UUID[:-1])
        paused.suspend()
        stopped = self._define('%s2' % UUID[:-1])
        stopped.destroy()
        saved = self._define('%s3' % UUID[:-1])
        saved.managedSave(0)
        self._define('%s4' % UUID[:-1], start=False)

        def states(conn, uuids):
            return {uuid: (conn.lookupByUUIDString(uuid).info()[0],
                           conn.lookupByUUIDString(uuid).isActive(),
                           conn.lookupByUUIDString(uuid).hasManagedSaveImage(
                               0)) for uuid in uuids}

        conn, restored = self._restart()
        self.assertEqual(4, len(restored))
        before = states(self.conn, restored)
        self.assertEqual(before, states(conn, restored))
        self.assertEqual(
            [(fakelibvirt.VIR_DOMAIN_PAUSED, 0, 0),
             (fakelibvirt.VIR_DOMAIN_SHUTOFF, 0, 0)],
            [before[paused.UUIDString()], before[stopped.UUIDString()]])
        self.assertEqual(1, before[saved.UUIDString()][2])

    def test_another_hosts_domains_are_not_defined(self):
        self._define()
        conn, restored = self._restart(host='compute2')
        self.assertEqual([], restored)
        self.assertEqual([], conn.listAllDomains(
            fakelibvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE |
            fakelibvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE))

    def test_undefine_removes_every_file(self):
        domain = self._define()
        domain.destroy()
        domain.undefine()
        self.assertEqual([], os.listdir(self.dir))
        self.assertEqual([], self._restart()[1])

    def test_a_moved_domain_belongs_to_its_destination(self):
        # The destination defined and started it; the source's cleanup
        # stops and undefines its own copy afterwards.
        domain = self._define()
        with open(os.path.join(self.dir, UUID + '.host'), 'w') as f:
            f.write('compute2')
        domain.destroy()
        domain.undefine()
        self.assertEqual(fakelibvirt.VIR_DOMAIN_RUNNING,
                         self._state()['state'])
        self.assertEqual([], self._restart()[1])
        self.assertEqual([UUID], self._restart(host='compute2')[1])

    def test_files_of_an_older_cloud_restore_running(self):
        self._define()
        os.unlink(os.path.join(self.dir, UUID + '.state'))
        conn, restored = self._restart()
        self.assertEqual(1, conn.lookupByUUIDString(UUID).isActive())


class ManagedSaveRemoveTest(testtools.TestCase):
    """A suspended server can be deleted: undefining a domain with a
    managed save image removes the image (fakelibvirt called its own
    managedSaveRemove without the flags it requires)."""

    def saved_domain(self, conn, uuid):
        domain = conn.defineXML(DOMAIN % (uuid, uuid))
        domain.create()
        domain.managedSave(0)
        return domain

    def test_undefine_a_saved_domain(self):
        conn = _connection()
        flags = fakelibvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
        self.assertRaises(TypeError,
                          self.saved_domain(conn, UUID).undefineFlags, flags)
        for fixture in compute_host._host_fixtures(conn)[:1]:
            self.useFixture(fixture)
        other = '11111111-2222-3333-4444-666666666666'
        domain = self.saved_domain(conn, other)
        domain.undefineFlags(flags)
        self.assertEqual(0, domain.hasManagedSaveImage(0))
        self.assertNotIn(other, [d.UUIDString()
                                 for d in conn.listAllDomains()])
