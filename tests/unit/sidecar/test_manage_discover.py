"""``nova-cyborg-sidecar-manage discover`` on simulated hosts: what it
prints, why it skips a device, and that it changes nothing."""

import io
import json
import logging
import os

import fixtures
import testtools

from sidecar.cmd import discover
from sidecar.cmd import manage
from sidecar_simulator import dfl
from sidecar_simulator import host as simulator
from sidecar_simulator import nvidia
from sidecar_simulator import xrt
from tests.unit.sidecar import simhost

N6000 = '0000:81:00.0'   # PF; its port released to the VF 81:00.1
N6000_VF = '0000:81:00.1'
D5005 = '0000:81:01.0'
T4 = '0000:3b:00.0'
AMD = '0000:3c:00.0'     # a GPU [gpu] device_selector does not select
BMC = '0000:02:00.0'     # ASPEED BMC display: never offered
NIC = '0000:5e:00.0'
NIC_VFS = ('0000:5e:00.1', '0000:5e:00.2')
QAT = '0000:6b:00.0'     # no driver enabled for it

CONFIG = """[DEFAULT]
host = compute1
[sidecar]
sysfs_root = %(root)s
state_path = %(state)s
nova_config_file =
enabled_drivers = fpga,gpu,pci
[gpu]
device_selector = 10de:*,1a03:*
enabled_mdev_types = nvidia-222,nvidia-999
[pci]
device_spec = {"vendor_id": "8086", "product_id": "1515"}
"""


def build_host():
    """A host with an N6000 (SR-IOV), a D5005, a T4 with vGPU types, an
    AMD GPU, a BMC display, a NIC with two VFs and a QAT card."""
    host = simulator.SimulatedHost()
    cards = dfl.DflHost(host)
    cards.add_card('n6000', afu_id=simhost.FUNCTION_ID, sriov=True,
                   address=N6000)
    cards.add_card('d5005', afu_id=simhost.FUNCTION_ID, address=D5005)
    host.add_gpu(address=T4, mdev_types=[simhost.T4_1B])
    host.add_gpu('1002', '740f', '038000', address=AMD)
    host.add_gpu('1a03', '2000', '030000', address=BMC)
    host.add_pf('8086', '1592', address=NIC, num_vfs=2,
                vf_product_id='1515')
    host.add_pf('8086', '4940', '0b4000', address=QAT)
    return cards


class DiscoverCase(simhost.SimHostTestCase):

    def setUp(self):
        super().setUp()
        self.cards = build_host()
        self.sys = os.path.join(self.root, 'sys')
        self.cards.write(self.sys, os.path.join(self.root, 'dev'))
        self.state = os.path.join(self.root, 'state')
        os.mkdir(self.state)
        self.config_file = self.write_config(self.sys)

    def write_config(self, sysfs_root, extra=''):
        path = os.path.join(self.root, 'sidecar-%d.conf'
                            % len(os.listdir(self.root)))
        with open(path, 'w') as f:
            f.write(CONFIG % {'root': sysfs_root, 'state': self.state} +
                    extra)
        return path

    def manage(self, *args, config_file=None):
        """``(exit status, stdout, stderr)`` of the CLI."""
        out, err = io.StringIO(), io.StringIO()
        status = manage.main(['--config-file',
                              config_file or self.config_file] +
                             list(args), stdout=out, stderr=err)
        return status, out.getvalue(), err.getvalue()

    def discover(self, *args, config_file=None):
        status, out, err = self.manage('discover', *args,
                                       config_file=config_file)
        self.assertEqual((0, ''), (status, err), out)
        return out


def rows(table, first):
    """The cells of each row of the table whose first line has ``first``
    as its first column title, by their first cell."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith('| ' + first + ' '))
    found = {}
    for line in lines[start + 2:]:
        if not line.startswith('|'):
            break
        cells = [cell.strip() for cell in line.strip('|').split(' | ')]
        found.setdefault(cells[0], []).append(cells)
    return found


class DiscoverTableTest(DiscoverCase):

    def test_reported_devices(self):
        out = self.discover()
        self.assertIn('Host compute1, drivers fpga, gpu, pci', out)
        self.assertIn('Would report 4 device(s):', out)
        reported = rows(out, 'device')
        self.assertEqual({N6000, D5005, T4, NIC}, set(reported))
        # The N6000's port is reached through its VF: one FPGA provider
        # named after the VF, the VF as attach handle, its function's
        # trait; the card is healthy (the DFL manager's "unknown" is not
        # a fault).
        [(device, kind, driver, provider, rc, amount, traits, handles,
          health)] = reported[N6000]
        self.assertEqual(('FPGA', 'fpga', 'compute1_' + N6000_VF, 'FPGA',
                          '1', 'PCI ' + N6000_VF, 'healthy'),
                         (kind, driver, provider, rc, amount, handles,
                          health))
        self.assertIn('CUSTOM_FPGA_FUNCTION_ID_INTEL_'
                      + simhost.FUNCTION_ID.upper(), traits)
        self.assertIn('CUSTOM_FPGA_REGION_INTEL_'
                      + simhost.COMPAT_ID.upper(), traits)
        self.assertEqual(('compute1_' + D5005, 'PCI ' + D5005),
                         (reported[D5005][0][3], reported[D5005][0][7]))
        t4 = reported[T4][0]
        self.assertEqual(('GPU', 'VGPU', '16',
                          'MDEV %s nvidia-222 x16' % T4),
                         (t4[1], t4[4], t4[5], t4[7]))
        nic = reported[NIC][0]
        self.assertEqual(('PCI', 'CUSTOM_PCI', '2',
                          'PCI %s, PCI %s' % NIC_VFS),
                         (nic[1], nic[4], nic[5], nic[7]))

    def test_why_each_other_function_is_not_reported(self):
        out = self.discover()
        skipped = rows(out[out.index('Not reported'):], 'device')
        self.assertEqual({AMD, BMC, QAT}, set(skipped))
        self.assertIn('Not reported: 3 PCI function(s):', out)
        why = {address: cells[0][4] for address, cells in skipped.items()}
        self.assertIn('GPU %s is not selected by [gpu] device_selector'
                      % AMD, why[AMD])
        self.assertIn('Not reporting GPU %s: it is the ASPEED BMC display '
                      'controller' % BMC, why[BMC])
        self.assertEqual(
            'no enabled driver claims it: a co-processor, vendor 8086 '
            'device 4940 class 0b4000, bound to no driver', why[QAT])
        self.assertEqual(['8086:4940', '0b4000', ''], skipped[QAT][0][1:4])
        self.assertIn('Notes:\n- [gpu] enabled_mdev_types names '
                      'nvidia-999, which no GPU of this host offers', out)

    def test_bound_driver_and_malformed_device(self):
        os.symlink('../../../bus/pci/drivers/qat_4xxx', os.path.join(
            self.sys, 'bus/pci/devices', QAT, 'driver'))
        self.cards.host.remove_attr(AMD, 'vendor')
        out = self.discover()
        skipped = rows(out[out.index('Not reported'):], 'device')
        self.assertEqual('qat_4xxx', skipped[QAT][0][3])
        self.assertIn('bound to qat_4xxx', skipped[QAT][0][4])
        self.assertIn('Skipping PCI device %s: vendor id (vendor) is '
                      'missing or unreadable' % AMD, skipped[AMD][0][4])

    def test_unhealthy_card(self):
        self.cards.set_error(self.cards.cards[1], 'fme/pcie0_errors', '0x1')
        reported = rows(self.discover(), 'device')
        self.assertEqual('unhealthy; dfl-fme.1/errors/pcie0_errors is 0x1',
                         reported[D5005][0][8])
        self.assertEqual('healthy', reported[N6000][0][8])

    def test_a_driver_clash_is_a_note(self):
        # A broad [pci] device_spec also selects the N6000's VF: the fpga
        # driver, first, keeps it; the clash is shown.
        config = self.write_config(self.sys)
        with open(config) as f:
            text = f.read().replace(
                'device_spec = {"vendor_id": "8086", "product_id": "1515"}',
                'device_spec = {"vendor_id": "8086", "product_id": "bccf"}')
        with open(config, 'w') as f:
            f.write(text)
        out = self.discover(config_file=config)
        self.assertIn('- Driver pci reports %s, but %s is already reported '
                      'by fpga; skipping it' % (N6000, N6000), out)
        skipped = rows(out[out.index('Not reported'):], 'device')
        self.assertEqual({AMD, BMC, QAT} | {NIC} | set(NIC_VFS),
                         set(skipped))
        self.assertEqual('no enabled driver claims it: a network controller,'
                         ' a VF of %s, vendor 8086 device 1515 class 020000,'
                         ' bound to no driver' % NIC,
                         skipped[NIC_VFS[0]][0][4])


class DiscoverJsonTest(DiscoverCase):

    def test_json(self):
        result = json.loads(self.discover('--format', 'json'))
        self.assertEqual(['fpga', 'gpu', 'pci'], result['drivers'])
        devices = {d['address']: d for d in result['devices']}
        self.assertEqual({N6000, D5005, T4, NIC}, set(devices))
        [dep] = devices[N6000]['deployables']
        self.assertEqual({'name': N6000_VF, 'provider': 'compute1_' +
                          N6000_VF, 'resource_class': 'FPGA', 'amount': 1,
                          'attach_handles': [{'type': 'PCI', 'address':
                                              N6000_VF, 'count': 1}]},
                         {k: v for k, v in dep.items() if k != 'traits'})
        self.assertEqual({'state': 'healthy', 'problems': []},
                         devices[N6000]['health'])
        [vgpu] = devices[T4]['deployables']
        self.assertEqual([{'type': 'MDEV', 'address': T4, 'count': 16,
                           'mdev_type': 'nvidia-222'}],
                         vgpu['attach_handles'])
        skipped = {s['address']: s for s in result['not_reported']}
        self.assertEqual({AMD, BMC, QAT}, set(skipped))
        self.assertEqual({'vendor_id': '8086', 'product_id': '4940',
                          'class_id': '0b4000', 'bound_driver': '',
                          'kind': 'a co-processor', 'address': QAT,
                          'reasons': [
                              'no enabled driver claims it: a co-processor,'
                              ' vendor 8086 device 4940 class 0b4000, bound'
                              ' to no driver']}, skipped[QAT])

    def test_bad_configuration_is_said(self):
        config = self.write_config(self.sys)
        with open(config, 'a') as f:
            f.write('[sidecar]\nenabled_drivers = fpga,nope\n')
        status, out, err = self.manage('discover', config_file=config)
        self.assertEqual((2, ''), (status, out))
        self.assertEqual('discover failed: Invalid [sidecar] enabled_drivers:'
                         ' unknown driver(s) nope\n', err)


def snapshot(root):
    """Every path under ``root`` with its kind, content and mtime."""
    found = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            if os.path.islink(path):
                value = ('link', os.readlink(path))
            elif os.path.isdir(path):
                value = ('dir',)
            else:
                with open(path, 'rb') as f:
                    value = ('file', f.read())
            found[os.path.relpath(path, root)] = value + (st.st_mtime_ns,
                                                          st.st_mode)
    return found


class DiscoverWritesNothingTest(DiscoverCase):

    def test_read_only(self):
        # No RPC, no control socket, no Placement: none is built.
        for name in ('sidecar.daemon.rpc.get_transport',
                     'sidecar.daemon.control.call',
                     'sidecar.report.placement.PlacementClient'):
            self.useFixture(fixtures.MockPatch(
                name, side_effect=AssertionError(name)))
        self.cards.set_error(self.cards.cards[1], 'port/errors', '0x2')
        before = snapshot(self.root)
        self.assertGreater(len(before), 200)
        for fmt in ('table', 'json'):
            self.discover('--format', fmt)
        self.assertEqual(before, snapshot(self.root))
        self.assertEqual([], os.listdir(self.state))

    def test_logging_is_left_as_it_was(self):
        logger = logging.getLogger('sidecar')
        before = (logger.level, logger.propagate, list(logger.handlers))
        self.discover()
        self.assertEqual(before, (logger.level, logger.propagate,
                                  list(logger.handlers)))


class RowsTest(testtools.TestCase):

    def test_rows(self):
        table = manage.table([{'a': 'x', 'b': 'y'}], ('a', 'b'))
        self.assertEqual({'x': [['x', 'y']]}, rows(table, 'a'))


class DiscoverAlveoAndVgpuTest(simhost.SimHostTestCase):
    """The profiles of an Alveo card (XRT) and of an H100 with vGPU 17
    VFs, on one host."""

    def test_mgmt_pf_and_untyped_vfs_are_explained(self):
        host = simulator.SimulatedHost()
        alveo = xrt.XrtHost(host)
        alveo.add_card('u250', address='0000:81:00.0')
        gpus = nvidia.NvidiaHost(host)
        card = gpus.add_vfio_vgpu_card(num_vfs=2, address='0000:3b:00.0',
                                       types={0: 'NVIDIA H100-4C'})
        alveo.write(self.root)
        gpus.write(self.root)
        self.config.config(group='sidecar', nova_config_file='',
                           enabled_drivers=['fpga', 'gpu', 'pci'])
        self.config.config(group='gpu', device_selector=['10de:*'])
        result = discover.discover(self.conf)
        self.assertEqual({'0000:81:00.1': ['0000:81:00.1'],
                          card.pf: [card.vfs[0]]},
                         {d['address']: [h['address'] for dep in
                                         d['deployables'] for h in
                                         dep['attach_handles']]
                          for d in result['devices']})
        why = {s['address']: s['reasons'] for s in result['not_reported']}
        self.assertEqual({'0000:81:00.0', card.vfs[1]}, set(why))
        self.assertEqual(['part of reported device 0000:81:00.1 (its board '
                          'info names it as mgmt_pf); not offered itself'],
                         why['0000:81:00.0'])
        self.assertIn('nvidia/current_vgpu_type is 0', why[card.vfs[1]][0])
        # The VF's handle shows the managed mode Nova will write.
        (handle,) = [h for d in result['devices'] if d['address'] == card.pf
                     for dep in d['deployables']
                     for h in dep['attach_handles']]
        self.assertEqual('no', handle['managed'])
        self.assertIn('PCI %s managed=no' % card.vfs[0],
                      manage.render_discover(result, 'table'))


class DiscoverLibvirtSourceTest(DiscoverCase):

    def test_same_devices_from_libvirt(self):
        # [sidecar] discovery_source = libvirt: the daemon's source, read
        # from libvirt's node devices (its test driver here), which lack
        # the NIC's VFs: the NIC is not reported from there.
        other = build_host().host
        for vf in NIC_VFS:
            other.remove_function(vf)
        uri = other.write_node_xml(os.path.join(self.root, 'node.xml'))
        config = self.write_config(self.sys)
        with open(config, 'a') as f:
            f.write('[sidecar]\ndiscovery_source = libvirt\n'
                    'libvirt_uri = %s\n' % uri)
        from_sysfs = json.loads(self.discover('-f', 'json'))
        from_libvirt = json.loads(self.discover('-f', 'json',
                                                config_file=config))
        self.assertEqual([d for d in from_sysfs['devices']
                          if d['address'] != NIC], from_libvirt['devices'])
        self.assertEqual(3, len(from_libvirt['devices']))
