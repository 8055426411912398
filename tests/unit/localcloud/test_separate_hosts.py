"""The simulated compute hosts are separate hosts to Nova (issue 26).

Each has its own address (``my_ip``, the live migration address) and its
own instances path; Nova reaches the other host's disk over SSH, for
which :mod:`localcloud.remotefs` stands in. With one address for every
host, Nova took a cold migration's destination for shared storage and
left the instance directory on the source.
"""

import configparser
import os

import fixtures
import testtools
from oslo_concurrency import processutils

from localcloud import configs
from localcloud import layout as layout_mod
from localcloud import remotefs
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt.volume import remotefs as nova_remotefs
from tests.unit.localcloud import test_migration as base


class AddressesTest(testtools.TestCase):

    def test_each_host_its_own_address_each_cloud_its_own(self):
        one = layout_mod.Layout(port_base=32000, computes=3)
        other = layout_mod.Layout(port_base=25000, computes=3)
        addresses = [one.host_address(h) for h in one.hosts]
        self.assertEqual(['127.125.0.2', '127.125.0.3', '127.125.0.4'],
                         addresses)
        self.assertEqual(set(), set(addresses) & {
            other.host_address(h) for h in other.hosts})
        self.assertNotIn('127.0.0.1', addresses)

    def test_compute_config_names_its_address_and_disk(self):
        layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=32000)
        seen = {}
        for host in layout.hosts:
            conf = configparser.RawConfigParser(strict=True)
            conf.read(configs.compute(layout, host))
            address = conf.get('DEFAULT', 'my_ip')
            self.assertEqual(layout.host_address(host), address)
            self.assertEqual(address, conf.get(
                'libvirt', 'live_migration_inbound_addr'))
            path = conf.get('DEFAULT', 'instances_path')
            self.assertTrue(os.path.isdir(path))
            seen[host] = (address, path)
        self.assertEqual(2, len(set(a for a, _ in seen.values())))
        self.assertEqual(2, len(set(p for _, p in seen.values())))


class LoopbackSshTest(testtools.TestCase):
    """What Nova's libvirt driver does with the other host's disk."""

    def setUp(self):
        super().setUp()
        self.layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=32000)
        for host in self.layout.hosts:
            os.makedirs(self.layout.instances_path(host))
        self.peers = remotefs.Peers(self.layout, 'compute1')
        self.dest = self.layout.host_address('compute2')
        for fixture in remotefs.fixtures_for(self.peers):
            self.useFixture(fixture)
        # Nova's default transport, ssh, which the cloud keeps.
        self.fs = nova_remotefs.RemoteFilesystem()

    def _mine(self, *parts):
        return os.path.join(self.layout.instances_path('compute1'), *parts)

    def _theirs(self, *parts):
        return os.path.join(self.layout.instances_path('compute2'), *parts)

    def test_instance_path_is_not_shared(self):
        # LibvirtDriver._is_path_shared_with, as a cold migration asks it
        # (the source's my_ip is not the destination's).
        os.makedirs(self._mine('uuid'))
        os.makedirs(self._theirs('uuid'))
        fake = type('Driver', (), {
            '_remotefs': self.fs,
            'get_host_ip_addr': lambda self: '127.125.0.2'})()
        self.assertFalse(libvirt_driver.LibvirtDriver._is_path_shared_with(
            fake, self.dest, self._mine('uuid')))
        # Its test file was made there, and removed.
        self.assertEqual([], os.listdir(self._theirs('uuid')))

    def test_directory_made_there_files_copied_there(self):
        self.fs.create_dir(self.dest, self._mine('uuid'))
        self.assertTrue(os.path.isdir(self._theirs('uuid')))
        self.assertFalse(os.path.exists(self._mine('uuid')))
        os.makedirs(self._mine('uuid_resize'))
        with open(self._mine('uuid_resize', 'disk.info'), 'w') as f:
            f.write('{}')
        self.fs.copy_file(self._mine('uuid_resize', 'disk.info'),
                          '%s:%s' % (self.dest, self._mine('uuid',
                                                           'disk.info')))
        with open(self._theirs('uuid', 'disk.info')) as f:
            self.assertEqual('{}', f.read())
        self.fs.remove_dir(self.dest, self._mine('uuid'))
        self.assertFalse(os.path.exists(self._theirs('uuid')))

    def test_other_hosts_file_is_not_seen_here(self):
        # ComputeManager._is_instance_storage_shared at a revert: the
        # destination made a file in its instance directory and asks the
        # source whether it sees it.
        os.makedirs(self._theirs('uuid'))
        made = self._theirs('uuid', 'tmpfile')
        open(made, 'w').close()
        data = {'filename': made}
        check = libvirt_driver.LibvirtDriver.\
            check_instance_shared_storage_remote
        self.assertFalse(check(None, None, data))
        os.makedirs(self._mine('uuid'))
        open(self._mine('uuid', 'tmpfile'), 'w').close()
        self.assertTrue(check(None, None, data))
        self.assertEqual(self._mine('uuid', 'tmpfile'),
                         self.peers.here(made))
        self.assertEqual('/var/lib/other', self.peers.here('/var/lib/other'))

    def test_unknown_host_fails_as_ssh(self):
        self.assertRaises(processutils.ProcessExecutionError,
                          self.fs.create_dir, '192.0.2.1', self._mine('x'))
        self.assertRaises(processutils.ProcessExecutionError,
                          self.fs.remove_file, self.dest, self._mine('x'))

    def test_path_outside_the_instances_path_is_the_same(self):
        self.assertEqual('/var/lib/other', self.peers.path_on(
            self.dest, '/var/lib/other'))
        self.assertEqual(self._theirs(), self.peers.path_on(
            'compute2', self._mine()))


class MigrationByAddressTest(base.MigrationTest):
    """Nova's live migration URI names the destination's address."""

    addresses = {'127.125.0.2': 'compute1', '127.125.0.3': 'compute2'}

    def test_addresses_are_the_layouts(self):
        layout = layout_mod.Layout(port_base=32000)
        self.assertEqual(self.addresses, {
            layout.host_address(h): h for h in layout.hosts})

    def test_uri_with_the_destination_address(self):
        domain = self._boot()
        self.assertEqual(fakelibvirt.VIR_DOMAIN_JOB_COMPLETED, self._migrate(
            domain, 'compute1', None, uri='qemu+tcp://127.125.0.3/system'))
        self.assertEqual('compute2', self._file('.host'))
        self.assertEqual(1, self._lookup('compute2').isActive())

    def test_uri_with_its_own_address_fails(self):
        domain = self._boot()
        self.assertEqual(fakelibvirt.VIR_DOMAIN_JOB_FAILED, self._migrate(
            domain, 'compute1', None, uri='qemu+tcp://127.125.0.2/system'))
        self._assert_stays_on_source(domain)
