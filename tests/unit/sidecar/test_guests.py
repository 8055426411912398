"""One device, one guest: the watch over libvirt's test driver."""

import json
import os

import fixtures
import libvirt
import testtools

from nova_cyborg.model import bookkeeping
from sidecar.discovery import domains
from sidecar.discovery import guests
from sidecar import model

HOST = 'compute1'
PF = '0000:81:00.0'
VF1, VF2 = '0000:81:00.1', '0000:81:00.2'
GPU = '0000:82:00.0'
NOVA_VF = '0000:3b:00.1'   # Nova's own PCI passthrough, not the sidecar's
MDEV = 'b5b1c7e2-4b5b-4e8c-9f61-0f5b2b5c2d11'
P = 'c0ffee00-0000-4000-8000-00000000000a'
Q = 'c0ffee00-0000-4000-8000-00000000000b'

DOMAIN = """<domain type='test'><name>%(name)s</name><uuid>%(uuid)s</uuid>
<memory>1024</memory><os><type>hvm</type></os><devices>%(devices)s
</devices></domain>"""
PCI = """<hostdev mode='subsystem' type='pci' managed='yes'><source>
<address domain='0x%s' bus='0x%s' slot='0x%s' function='0x%s'/>
</source></hostdev>"""
MDEV_XML = """<hostdev mode='subsystem' type='mdev' model='vfio-pci'>
<source><address uuid='%s'/></source></hostdev>"""


def pci_arq(server, address, state='Bound', host=HOST):
    domain, bus, slot, function = model.parse_bdf(address)
    return {'instance_uuid': server, 'state': state, 'hostname': host,
            'attach_handle_type': 'PCI',
            'attach_handle_info': {'domain': domain, 'bus': bus,
                                   'device': slot, 'function': function}}


def mdev_arq(server, mdev):
    return {'instance_uuid': server, 'state': 'Bound', 'hostname': HOST,
            'attach_handle_type': 'MDEV', 'attach_handle_uuid': mdev,
            'attach_handle_info': {}}


def devices():
    fpga = model.Device(
        type='FPGA', vendor='8086', model='09c4', address=PF,
        deployables=(model.Deployable(
            name=PF, resource_class='FPGA', num_accelerators=2,
            attach_handles=(model.AttachHandle('PCI', VF1),
                            model.AttachHandle('PCI', VF2))),))
    gpu = model.Device(
        type='GPU', vendor='10de', model='1eb8', address=GPU,
        deployables=(model.Deployable(
            name=GPU, resource_class='VGPU', num_accelerators=1,
            attach_handles=(model.AttachHandle('MDEV', GPU, 'nvidia-222'),)),
        ))
    return [fpga, gpu]


class GuestWatchTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            format='%(levelname)s %(message)s'))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        node = os.path.join(self.tmp, 'node.xml')
        with open(node, 'w') as f:
            f.write('<node></node>')
        # A private test driver: its domains live in this connection.
        self.conn = libvirt.open('test://' + node)
        self.addCleanup(self.conn.close)
        self.sysfs = os.path.join(self.tmp, 'sys')
        # An mdev of the GPU, as the kernel shows it.
        parent = os.path.join(self.sysfs, 'devices', 'pci0000:00', GPU)
        os.makedirs(os.path.join(parent, MDEV))
        os.makedirs(os.path.join(self.sysfs, 'bus', 'mdev', 'devices'))
        os.symlink(os.path.join(parent, MDEV), os.path.join(
            self.sysfs, 'bus', 'mdev', 'devices', MDEV))
        self.arqs = {}
        self.reads = []
        self.state = os.path.join(self.tmp, 'state')
        self.watch = self.make_watch()

    def make_watch(self):
        return guests.GuestWatch(
            HOST, self.sysfs, domains.DomainInspector(lambda: self.conn),
            self.arqs_of, state_path=self.state)

    def arqs_of(self, owner):
        self.reads.append(owner)
        return list(self.arqs.get(owner, ()))

    def define(self, name, server, pci=(), mdevs=(), start=False):
        xml = ''.join(PCI % model.parse_bdf(a) for a in pci)
        xml += ''.join(MDEV_XML % m for m in mdevs)
        dom = self.conn.defineXML(DOMAIN % {'name': name, 'uuid': server,
                                            'devices': xml})
        if start:
            dom.create()
        return dom

    def check(self):
        return [(f.kind, f.device, f.card, [g.uuid for g in f.guests])
                for f in self.watch.check(devices())]

    def counters(self):
        with open(os.path.join(self.state, guests.FILE)) as f:
            return json.load(f)

    def errors(self):
        return [line for line in self.log.output.splitlines()
                if line.startswith('ERROR')]

    def test_each_guest_with_its_arqs_is_fine(self):
        self.define('instance-0000000a', P, pci=[VF1], start=True)
        self.define('instance-0000000b', Q, mdevs=[MDEV])  # stopped
        self.arqs = {P: [pci_arq(P, VF1)], Q: [mdev_arq(Q, MDEV)]}
        self.assertEqual([], self.check())
        self.assertEqual([], self.errors())
        counters = self.counters()
        self.assertEqual((0, 0, 0, []), (
            counters['shared'], counters['no_arq'],
            counters['findings_total'], counters['findings']))

    def test_device_in_two_definitions(self):
        # P's definition kept a VF after its ARQ went (stopped, detached);
        # Q was given the VF.
        self.define('instance-0000000a', P, pci=[VF1])
        self.define('instance-0000000b', Q, pci=[VF1], start=True)
        self.arqs = {Q: [pci_arq(Q, VF1)]}
        self.assertEqual([('no_arq', VF1, PF, [P]),
                          ('shared', VF1, PF, [P, Q])], self.check())
        (shared,) = [e for e in self.errors() if 'definitions of 2' in e]
        for fragment in (VF1, 'device %s' % PF, 'instance-0000000a (server '
                         '%s, shut off)' % P,
                         'instance-0000000b (server %s, running)' % Q,
                         'with an ARQ bound to it: %s' % Q):
            self.assertIn(fragment, shared)
        counters = self.counters()
        self.assertEqual((1, 1, 2), (counters['shared'], counters['no_arq'],
                                     counters['findings_total']))
        # Logged once while it lasts.
        self.check()
        self.assertEqual(2, len(self.errors()))
        self.assertEqual(2, self.counters()['findings_total'])
        # P's definition loses the device: resolved, the total stays.
        self.conn.lookupByUUIDString(P).undefine()
        self.assertEqual([], self.check())
        self.assertIn('resolved', self.log.output)
        self.assertEqual((0, 0, 2), tuple(self.counters()[k] for k in (
            'shared', 'no_arq', 'findings_total')))
        # A restart keeps the total.
        self.assertEqual(2, self.make_watch().counters()['findings_total'])

    def test_a_device_nova_manages_in_two_definitions(self):
        self.define('instance-0000000a', P, pci=[NOVA_VF])
        self.define('instance-0000000b', Q, pci=[NOVA_VF])
        self.assertEqual([('shared', NOVA_VF, '', [P, Q])], self.check())
        # Not the sidecar's device: Cyborg is not asked.
        self.assertEqual([], self.reads)

    def test_no_arq_for_the_device(self):
        self.define('instance-0000000a', P, pci=[VF1, NOVA_VF], start=True)
        self.assertEqual([('no_arq', VF1, PF, [P])], self.check())
        self.assertEqual([P, guests.alias(P)] * 2, self.reads)
        self.assertIn('ERROR One device, one guest: %s (device %s) is in '
                      'the definition of instance-0000000a (server %s, '
                      'running), whose server holds no ARQ for it' % (
                          VF1, PF, P),
                      self.log.output)
        for arqs in ([pci_arq(P, VF2)],                  # another VF
                     [pci_arq(P, VF1, host='compute2')],  # another host
                     [pci_arq(P, VF1, state='Deleting')],
                     [pci_arq(Q, VF1)]):                 # another server
            self.arqs = {P: arqs}
            self.assertEqual([('no_arq', VF1, PF, [P])], self.check())
        # Bound under the server's alias (a live migration's): its own.
        self.arqs = {guests.alias(P): [pci_arq(guests.alias(P), VF1)]}
        self.assertEqual([], self.check())

    def test_mdev_without_arq(self):
        self.define('instance-0000000a', P, mdevs=[MDEV])
        self.assertEqual([('no_arq', MDEV, GPU, [P])], self.check())
        self.arqs = {P: [mdev_arq(P, MDEV.upper())]}
        self.assertEqual([], self.check())

    def test_an_attach_between_two_reads_is_no_finding(self):
        self.define('instance-0000000a', P, pci=[VF1], start=True)
        answers = [[], [pci_arq(P, VF1)]]

        def arqs_of(owner):
            return answers.pop(0) if owner == P else []
        self.watch._arqs_of = arqs_of
        self.assertEqual([], self.check())
        self.assertEqual([], self.errors())

    def test_alias_is_nova_cyborgs(self):
        self.assertEqual(bookkeeping.alias(P), guests.alias(P))

    def test_users_lists_every_domain(self):
        self.define('instance-0000000a', P, pci=[VF1])
        self.define('instance-0000000b', Q, pci=[VF1], start=True)
        users = domains.DomainInspector(lambda: self.conn).users()
        self.assertEqual([domains.Guest('instance-0000000a', P),
                          domains.Guest('instance-0000000b', Q)],
                         list(users[VF1]))
        self.assertEqual('instance-0000000a (server %s, shut off)' % P,
                         str(users[VF1][0]))
        self.assertEqual('instance-0000000b (server %s, running)' % Q,
                         str(users[VF1][1]))
