"""A live migration hands a domain from one host process to another
through the shared domain directory (localcloud.migration).

Each simulated host is a process of its own; here the two hosts' patches
of fakelibvirt are set up one host at a time, each with its own
connection, as two processes would have them.
"""

import os

import fixtures
import testtools

from localcloud import compute_host
from localcloud import migration
from nova.tests.fixtures import libvirt as fakelibvirt

UUID = '11111111-2222-3333-4444-555555555555'
DOMAIN = """<domain type='kvm'><name>instance-0001</name><uuid>%s</uuid>
<memory>524288</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>
<hostdev mode='subsystem' type='pci' managed='yes'><source><address
domain='0x0000' bus='0x81' slot='0x00' function='0x%d'/></source></hostdev>
</devices></domain>"""
ALL = (fakelibvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE |
       fakelibvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE)


def _connection(host):
    return fakelibvirt.Connection(
        'qemu:///system', version=fakelibvirt.FAKE_LIBVIRT_VERSION,
        hv_version=fakelibvirt.FAKE_QEMU_VERSION,
        host_info=fakelibvirt.HostInfo(),
        pci_info=fakelibvirt.HostPCIDevicesInfo(num_pci=0, num_pfs=1,
                                                num_vfs=4),
        hostname=host)


class _Host(fixtures.Fixture):
    """One host process's patches (DomainFiles, then Migrations)."""

    def __init__(self, directory, name, addresses=None):
        self.files = compute_host.DomainFiles(directory, name)
        self.addresses = addresses

    def _setUp(self):
        for fixture in (self.files.fixtures() + migration.Migrations(
                self.files, self.addresses).fixtures()):
            self.useFixture(fixture)


class MigrationTest(testtools.TestCase):

    #: The hosts' migration addresses (``{address: host}``).
    addresses = None

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conns = {'compute1': _connection('compute1'),
                      'compute2': _connection('compute2')}
        self.logger = self.useFixture(fixtures.FakeLogger(
            name='localcloud.migration'))

    def on(self, host):
        return _Host(self.dir, host, self.addresses)

    def _file(self, suffix, uuid=UUID):
        with open(os.path.join(self.dir, uuid + suffix)) as f:
            return f.read()

    def _boot(self, host='compute1'):
        with self.on(host):
            domain = self.conns[host].defineXML(DOMAIN % (UUID, 1))
            domain.createWithFlags(0)
        return domain

    def _migrate(self, domain, source, dest, function=3, uri=None):
        """The source migrates; Nova's cleanup on the source follows a
        completed job. Returns the job type."""
        with self.on(source):
            domain.migrateToURI3(
                uri or 'qemu+tcp://%s/system' % dest,
                {'destination_xml': DOMAIN % (UUID, function),
                 'bandwidth': 0}, 0)
            job = domain.jobStats()['type']
            if job == fakelibvirt.VIR_DOMAIN_JOB_COMPLETED:
                domain.destroy()
                domain.undefine()
        return job

    def _domains(self, host):
        with self.on(host):
            return self.conns[host].listAllDomains(ALL)

    def _lookup(self, host):
        with self.on(host):
            return self.conns[host].lookupByUUIDString(UUID)

    def test_destination_takes_the_domain_with_its_xml(self):
        domain = self._boot()
        self.assertEqual(fakelibvirt.VIR_DOMAIN_JOB_COMPLETED,
                         self._migrate(domain, 'compute1', 'compute2'))
        self.assertEqual('compute2', self._file('.host'))
        self.assertEqual(DOMAIN % (UUID, 3), self._file('.xml'))
        # The source's cleanup left the destination's files.
        self.assertEqual([], self._domains('compute1'))

        moved = self._lookup('compute2')
        self.assertEqual(1, moved.isActive())
        self.assertIn("function='0x3'", moved.XMLDesc(0))
        self.assertEqual('compute2', self._file('.host'))
        self.assertEqual([UUID], [d.UUIDString()
                                  for d in self._domains('compute2')])
        # Taken over once.
        self.assertEqual(1, len(self._domains('compute2')))

    def test_paused_guest_arrives_paused(self):
        domain = self._boot()
        with self.on('compute1'):
            domain.suspend()
        self.assertEqual(fakelibvirt.VIR_DOMAIN_JOB_COMPLETED,
                         self._migrate(domain, 'compute1', 'compute2'))
        moved = self._lookup('compute2')
        self.assertEqual(fakelibvirt.VIR_DOMAIN_PAUSED, moved.info()[0])

    def test_listing_takes_the_domain_over(self):
        domain = self._boot()
        self._migrate(domain, 'compute1', 'compute2')
        self.assertEqual([UUID], [d.UUIDString()
                                  for d in self._domains('compute2')])

    def test_there_and_back(self):
        domain = self._boot()
        self._migrate(domain, 'compute1', 'compute2')
        moved = self._lookup('compute2')
        self.assertEqual(fakelibvirt.VIR_DOMAIN_JOB_COMPLETED,
                         self._migrate(moved, 'compute2', 'compute1',
                                       function=2))
        self.assertEqual([], self._domains('compute2'))
        back = self._lookup('compute1')
        self.assertEqual(1, back.isActive())
        self.assertIn("function='0x2'", back.XMLDesc(0))
        self.assertEqual('compute1', self._file('.host'))
        with self.on('compute1'):
            restored = _connection('compute1')
            self.assertEqual([UUID], compute_host.DomainFiles(
                self.dir, 'compute1').restore(restored))

    def _assert_stays_on_source(self, domain):
        self.assertEqual('compute1', self._file('.host'))
        self.assertEqual(domain.XMLDesc(0), self._file('.xml'))
        self.assertIn("function='0x1'", self._file('.xml'))
        self.assertEqual(1, domain.isActive())
        self.assertEqual([], self._domains('compute2'))
        error = self.assertRaises(fakelibvirt.libvirtError, self._lookup,
                                  'compute2')
        self.assertEqual(fakelibvirt.VIR_ERR_NO_DOMAIN,
                         error.get_error_code())
        self.assertIn('stays on compute1', self.logger.output)

    def test_asked_failure_leaves_the_domain_on_the_source(self):
        domain = self._boot()
        marker = os.path.join(self.dir, UUID + migration.FAIL_SUFFIX)
        with open(marker, 'w') as f:
            f.write('destination unreachable\n')
        self.assertEqual(fakelibvirt.VIR_DOMAIN_JOB_FAILED,
                         self._migrate(domain, 'compute1', 'compute2'))
        self._assert_stays_on_source(domain)
        self.assertIn('destination unreachable', self.logger.output)
        self.assertFalse(os.path.exists(marker))

    def test_uri_without_another_host_fails(self):
        for uri in ('qemu+tcp://compute1/system', 'qemu:///system'):
            domain = self._boot()
            self.assertEqual(fakelibvirt.VIR_DOMAIN_JOB_FAILED,
                             self._migrate(domain, 'compute1', None,
                                           uri=uri))
            self._assert_stays_on_source(domain)

    def test_xml_of_another_domain_fails(self):
        domain = self._boot()
        with self.on('compute1'):
            domain.migrateToURI3('qemu+tcp://compute2/system', {
                'destination_xml': DOMAIN % (UUID[:-1] + '6', 1)}, 0)
        self.assertEqual(fakelibvirt.VIR_DOMAIN_JOB_FAILED,
                         domain.jobStats()['type'])
        self._assert_stays_on_source(domain)

    def test_destination_host_of_uri(self):
        self.assertEqual('compute2', migration.destination_host(
            'qemu+tcp://compute2/system'))
        self.assertRaises(migration.MigrationRefused,
                          migration.destination_host, 'qemu:///system')
