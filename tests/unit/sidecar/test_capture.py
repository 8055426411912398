"""``nova-cyborg-sidecar-manage capture`` and the simulator loading a
capture: a host's sysfs becomes a test's sysfs root, scrubbed, and a
hostile archive is refused with nothing written."""

import gzip
import io
import json
import os
import tarfile

import fixtures
import testtools

from sidecar.cmd import capture as capture_cmd
from sidecar_simulator import capture
from sidecar_simulator import host as simulator
from sidecar_simulator import nvidia
from sidecar_simulator import xrt
from tests.unit.sidecar import test_manage_discover as base

MAC = 'b4:96:91:aa:bb:cc'
SERIAL = 'PVPA12345678'


class CaptureTest(base.DiscoverCase):

    def setUp(self):
        super().setUp()
        nic = os.path.join(self.sys, 'bus/pci/devices', base.NIC)
        os.makedirs(os.path.join(nic, 'net', 'ens1f0', 'statistics'))
        for relpath, value in (('net/ens1f0/address', MAC),
                               ('net/ens1f0/perm_addr', MAC),
                               ('net/ens1f0/mtu', '1500'),
                               ('net/ens1f0/statistics/rx_bytes', '1'),
                               ('vpd', 'PN ' + SERIAL),
                               ('resource0', 'x')):
            with open(os.path.join(nic, relpath), 'w') as f:
                f.write(value + '\n')
        with open(os.path.join(nic, 'config'), 'wb') as f:
            f.write(b'\x86\x80' * 128)
        # The T4 is also reached through class/mdev_bus: still one entry.
        with open(os.path.join(self.sys, 'bus/pci/devices', base.T4,
                               'resource0'), 'w') as f:
            f.write('x\n')
        qat = os.path.join(self.sys, 'bus/pci/devices', base.QAT)
        with open(os.path.join(qat, 'serial_number'), 'w') as f:
            f.write(SERIAL + '\n')
        with open(os.path.join(qat, 'big'), 'w') as f:
            f.write('0' * (capture_cmd.MAX_FILE + 1))
        os.symlink('/etc', os.path.join(qat, 'out_of_tree'))
        os.symlink('../../../../../..', os.path.join(qat, 'climbs_out'))
        self.archive = os.path.join(self.root, 'host.tar.gz')

    def capture(self, output=None):
        status, out, err = self.manage('capture', '--output',
                                       output or self.archive)
        self.assertEqual((0, ''), (status, err))
        return out

    def test_loaded_capture_discovers_the_same(self):
        out = self.capture()
        self.assertIn('Wrote %s: ' % self.archive, out)
        self.assertIn('4 scrubbed (serial numbers, MAC addresses), 5 '
                      'skipped (listed in its MANIFEST.json)', out)
        loaded = capture.load(self.archive, os.path.join(self.root, 'new'))
        original = self.discover()
        again = self.discover(config_file=self.write_config(loaded))
        self.assertNotEqual(self.sys, loaded)
        self.assertEqual(original.replace(self.sys, 'SYSFS'),
                         again.replace(loaded, 'SYSFS'))
        # Not an empty agreement: the capture holds the host's devices.
        self.assertIn('Would report 4 device(s)', again)
        self.assertIn('Not reported: 3 PCI function(s)', again)

    def test_scrubbed_and_skipped(self):
        self.capture()
        with gzip.open(self.archive) as f:
            data = f.read()
        self.assertNotIn(MAC.encode(), data)
        self.assertNotIn(SERIAL.encode(), data)
        manifest = capture.manifest(self.archive)
        nic = 'devices/pci0000:00/%s/' % base.NIC
        qat = 'devices/pci0000:00/%s/' % base.QAT
        self.assertEqual(sorted([nic + 'net/ens1f0/address',
                                 nic + 'net/ens1f0/perm_addr', nic + 'vpd',
                                 qat + 'serial_number']),
                         manifest['scrubbed'])
        expected = {
            nic + 'resource0': 'not captured (BARs, option ROM or an action '
                               'file)',
            'devices/pci0000:00/%s/resource0' % base.T4:
                'not captured (BARs, option ROM or an action file)',
            qat + 'big': 'larger than 65536 bytes',
            qat + 'out_of_tree': 'link leaves the sysfs root',
            qat + 'climbs_out': "target '../../../../../..' leaves the "
                                "sysfs root"}
        self.assertEqual(expected, {s['path']: s['reason']
                                    for s in manifest['skipped']})
        self.assertEqual(len(expected), len(manifest['skipped']))
        root = capture.load(self.archive, os.path.join(self.root, 'new'))
        nic_dir = os.path.join(root, 'bus/pci/devices', base.NIC)
        with open(os.path.join(nic_dir, 'net/ens1f0/address')) as f:
            self.assertEqual('00:00:00:00:00:00\n', f.read())
        with open(os.path.join(nic_dir, 'config'), 'rb') as f:
            self.assertEqual(b'\x86\x80' * 32, f.read())
        with open(os.path.join(nic_dir, 'net/ens1f0/mtu')) as f:
            self.assertEqual('1500\n', f.read())
        self.assertFalse(os.path.exists(os.path.join(
            nic_dir, 'net/ens1f0/statistics')))
        # Links stay links, as the host had them.
        self.assertEqual('../' + base.NIC, os.readlink(
            os.path.join(root, 'bus/pci/devices', base.NIC_VFS[0],
                         'physfn')))

    def test_same_host_same_bytes_and_no_overwrite(self):
        self.capture()
        second = os.path.join(self.root, 'again.tar.gz')
        self.capture(second)
        with open(self.archive, 'rb') as a, open(second, 'rb') as b:
            self.assertEqual(a.read(), b.read())
        status, out, err = self.manage('capture', '--output', second)
        self.assertEqual((2, ''), (status, out))
        self.assertIn('exists: choose another --output', err)

    def test_not_a_sysfs_tree(self):
        config = self.write_config(os.path.join(self.root, 'dev'))
        status, out, err = self.manage('capture', '--output', self.archive,
                                       config_file=config)
        self.assertEqual(2, status)
        self.assertIn('has no bus/pci/devices', err)
        self.assertFalse(os.path.exists(self.archive))


def _archive(path, *members):
    """A tar.gz with ``(name, kind, value)`` members: kind ``file``
    (value: bytes), ``dir``, ``link``/``hardlink`` (value: target), or
    ``chr``."""
    with tarfile.open(path, 'w:gz') as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            data = None
            if kind == 'file':
                info.size, data = len(value), io.BytesIO(value)
            elif kind == 'dir':
                info.type = tarfile.DIRTYPE
            elif kind == 'link':
                info.type, info.linkname = tarfile.SYMTYPE, value
            elif kind == 'hardlink':
                info.type, info.linkname = tarfile.LNKTYPE, value
            else:
                info.type = tarfile.CHRTYPE
            tar.addfile(info, data)
    return path


class HostileArchiveTest(testtools.TestCase):

    GOOD = (('sysfs/bus/pci/devices/0000:81:00.0', 'link',
             '../../../devices/pci0000:00/0000:81:00.0'),
            ('sysfs/devices/pci0000:00/0000:81:00.0/vendor', 'file',
             b'0x8086\n'))

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(self.dir, 'root')
        self.outside = os.path.join(self.dir, 'outside')
        with open(self.outside, 'w') as f:
            f.write('untouched\n')

    def refused(self, *members, match=''):
        path = _archive(os.path.join(self.dir, 'bad.tar.gz'),
                        *(self.GOOD + members))
        exc = self.assertRaises(capture.UnsafeArchive, capture.load, path,
                                self.root)
        self.assertIn(match, str(exc))
        self.assertFalse(os.path.exists(self.root))
        with open(self.outside) as f:
            self.assertEqual('untouched\n', f.read())
        self.assertEqual(['bad.tar.gz', 'outside'], sorted(os.listdir(
            self.dir)))

    def test_good(self):
        # As tar itself writes it: the directories first.
        path = _archive(os.path.join(self.dir, 'good.tar.gz'),
                        ('sysfs', 'dir', None), ('sysfs/devices', 'dir', None),
                        *self.GOOD)
        capture.load(path, self.root)
        with open(os.path.join(self.root, 'bus/pci/devices/0000:81:00.0/'
                               'vendor')) as f:
            self.assertEqual('0x8086\n', f.read())

    def test_absolute_path(self):
        self.refused((self.outside, 'file', b'x'),
                     match='not a relative POSIX path')

    def test_dot_dot(self):
        self.refused(('sysfs/../outside', 'file', b'x'), match='".."')
        self.refused(('sysfs/a/../../outside', 'file', b'x'), match='".."')

    def test_outside_sysfs(self):
        self.refused(('outside', 'file', b'x'), match='outside sysfs/')

    def test_links_that_escape(self):
        self.refused(('sysfs/a', 'link', self.outside), match='absolute')
        self.refused(('sysfs/a', 'link', '../outside'),
                     match='leaves the sysfs root')
        self.refused(('sysfs/d/e/up', 'link', '../..'),
                     ('sysfs/d/e/x', 'link', 'up/../outside'),
                     match='".." after a name')

    def test_member_through_a_link(self):
        self.refused(('sysfs/d', 'link', 'devices'),
                     ('sysfs/d/pci0000:00/x', 'file', b'x'),
                     match='reached through the link d')

    def test_special_members(self):
        self.refused(('sysfs/h', 'hardlink', 'sysfs/devices'),
                     match='neither a file')
        self.refused(('sysfs/c', 'chr', None), match='neither a file')

    def test_twice(self):
        self.refused(('sysfs/devices/pci0000:00/0000:81:00.0/vendor', 'link',
                      'device'), match='appears twice')

    def test_too_big(self):
        self.refused(('sysfs/big', 'file', b'0' * (capture.MAX_FILE + 1)),
                     match='larger than')

    def test_not_an_archive(self):
        path = os.path.join(self.dir, 'bad.tar.gz')
        with open(path, 'w') as f:
            f.write('not gzip')
        self.assertRaises(capture.UnsafeArchive, capture.load, path,
                          self.root)
        self.assertFalse(os.path.exists(self.root))

    def test_root_not_empty(self):
        path = _archive(os.path.join(self.dir, 'good.tar.gz'), *self.GOOD)
        os.mkdir(self.root)
        with open(os.path.join(self.root, 'kept'), 'w') as f:
            f.write('kept')
        self.assertRaises(capture.UnsafeArchive, capture.load, path,
                          self.root)
        self.assertEqual(['kept'], os.listdir(self.root))


class ScrubTest(testtools.TestCase):

    def test_names(self):
        for relpath, value in (
                ('devices/p/0000:01:00.0/net/eth0/address',
                 capture_cmd.MAC_PLACEHOLDER),
                ('devices/p/0000:01:00.0/net/eth0/perm_addr',
                 capture_cmd.MAC_PLACEHOLDER),
                ('devices/p/0000:01:00.0/vpd', capture_cmd.PLACEHOLDER),
                ('devices/p/0000:01:00.0/dsn', capture_cmd.PLACEHOLDER),
                ('devices/p/x/serial', capture_cmd.PLACEHOLDER),
                ('devices/p/x/board_serial_number', capture_cmd.PLACEHOLDER),
                ('devices/p/x/mac_address', capture_cmd.MAC_PLACEHOLDER),
                ('devices/p/0000:01:00.0/vendor', None),
                ('devices/p/0000:01:00.0/address', None),
                ('devices/p/0000:01:00.0/net/eth0/mtu', None)):
            self.assertEqual(value, capture_cmd.scrubbed(relpath), relpath)


class CaptureGpuAndAlveoTest(base.DiscoverCase):
    """What the GPU and Alveo drivers read is captured too: driver links,
    IOMMU groups, ``nvidia/`` files, mdevs, XRT attributes."""

    def test_loaded_capture_discovers_the_same(self):
        host = simulator.SimulatedHost()
        alveo = xrt.XrtHost(host)
        alveo.add_card('u250', address='0000:81:00.0')
        gpus = nvidia.NvidiaHost(host)
        gpus.add_vfio_vgpu_card(num_vfs=3, address='0000:3b:00.0',
                                types={0: 'NVIDIA H100-4C'})
        a100 = gpus.add_mdev_card(num_vfs=3, address='0000:5e:00.0')
        gpus.add_passthrough_gpu(address='0000:af:00.0')
        sys = os.path.join(self.root, 'gpus')
        alveo.write(sys)
        gpus.write(sys)
        gpus.create_mdev(a100, a100.vfs[0], 'nvidia-474')
        config = self.write_config(sys, '[gpu]\nenabled_mdev_types = '
                                   'nvidia-474\nmdev_max_instances = '
                                   'nvidia-474:4\n')
        original = json.loads(self.discover('-f', 'json',
                                            config_file=config))
        archive = os.path.join(self.root, 'gpus.tar.gz')
        self.assertEqual(0, self.manage('capture', '--output', archive,
                                        config_file=config)[0])
        loaded = capture.load(archive, os.path.join(self.root, 'loaded'))
        again = json.loads(self.discover('-f', 'json',
                                         config_file=self.write_config(
                                             loaded, config_extra(config))))
        for result in (original, again):
            result.pop('sysfs_root')
        self.assertEqual(original, again)
        self.assertEqual(4, len(again['devices']))


def config_extra(path):
    """The lines of a configuration file after its base part."""
    with open(path) as f:
        text = f.read()
    return text[text.index('[gpu]\nenabled_mdev_types = nvidia-474'):]
