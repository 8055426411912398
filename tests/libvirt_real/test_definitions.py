"""The domain XML the project writes, and accelerators added to and
removed from a guest that does not run, against a real libvirtd.

Every ``<hostdev>`` the project writes (a PCI VF, an mdev, a vGPU 17 VF
with ``managed='no'``, several at once, and the definitions
``nova_cyborg.virt.guard`` rewrites) passes ``virt-xml-validate`` and
libvirt's ``defineXML``, and reads back as written: the project's reader
(``domain_devices``) and the sidecar's (``DomainInspector``, on a
read-only connection) find the same devices in the saved definition.

No guest with a ``<hostdev>`` can start here: libvirt 9.0 defines one
for a PCI function or mdev the host lacks without a word, and refuses
the start ("host doesn't support passthrough of host PCI devices"). The
mdev of an mdev ARQ missing from a definition is not created here either
(Nova's ``_create_mdev`` needs a parent device and ``mdevctl``): the
stopped-guest cases add PCI functions.

Observed, where Nova's fakelibvirt differs: libvirt refuses a second
copy of a device in the definition ("device is already in the domain
configuration", ``VIR_ERR_OPERATION_INVALID``; fakelibvirt stores the
duplicate); a domain that does not run has one XML, its definition.
"""

import subprocess
import tempfile

import libvirt
from nova.compute import vm_states
from nova.virt.libvirt import config as vconfig

from nova_cyborg.model.objects import accelerator_request as arq_obj
from nova_cyborg.virt import hotplug
from nova_cyborg.virt import libvirt as nc_libvirt
from sidecar.discovery import domains
from tests.libvirt_real import base
from tests.unit.objects import test_accelerator_request as arqs


def vgpu17(bus='81', function='3'):
    """A vGPU 17 VF: PCI, ``managed='no'`` (it stays on ``nvidia``)."""
    arq = arqs.vfio_arq(bus=bus, function=function)
    arq['uuid'] = base.pci()['uuid']
    return arq


def validate(xml):
    """virt-xml-validate's complaints about a domain XML ('' if none)."""
    with tempfile.NamedTemporaryFile('w', suffix='.xml') as f:
        f.write(xml)
        f.flush()
        result = subprocess.run(['virt-xml-validate', f.name, 'domain'],
                                capture_output=True, text=True)
    return '' if result.returncode == 0 else (
        result.stdout + result.stderr + xml)


def mdev():
    return arqs.mdev_arq()


class DomainXmlTestCase(base.TestCase):

    def guest_xml(self, accel_info):
        """The guest XML with the accelerators as Nova's driver builds it
        through the project's hooks: PCI functions by
        ``add_pci_hostdevs``, mdevs by ``hostdev_config``."""
        guest = vconfig.LibvirtConfigGuest()
        guest.virt_type = 'qemu'
        guest.name = 'instance-%s' % self.instance.uuid[:8]
        guest.uuid = self.instance.uuid
        guest.memory = 32 * 1024
        guest.vcpus = 1
        guest.os_type = 'hvm'
        guest.os_mach_type = 'pc'
        nc_libvirt.add_pci_hostdevs(guest, accel_info)
        for arq in nc_libvirt.validated(accel_info):
            if arq.attach_type == arq_obj.ATTACH_TYPE_MDEV:
                guest.add_device(nc_libvirt.hostdev_config(arq))
        return guest.to_xml()

    def sidecar_sees(self):
        inspector = domains.DomainInspector(
            lambda: libvirt.openReadOnly(self.daemon.uri))
        return {device: [g.name for g in guests]
                for device, guests in inspector.users().items()}

    def test_every_kind_validates_defines_and_reads_back(self):
        kinds = {
            'PCI VF': ([base.pci()], {'0000:0c:00.2'}),
            'mdev': ([mdev()], {arqs.MDEV_UUID}),
            'vGPU 17 VF': ([vgpu17()], {'0000:81:00.3'}),
            'several': ([base.pci(), base.pci(bus='0d', function='1'),
                         vgpu17(), mdev()],
                        {'0000:0c:00.2', '0000:0d:00.1', '0000:81:00.3',
                         arqs.MDEV_UUID}),
        }
        for kind, (accel_info, expected) in kinds.items():
            with self.subTest(kind=kind):
                xml = self.guest_xml(accel_info)
                self.assertEqual('', validate(xml))
                guest = nc_libvirt.define(self.driver, xml)
                self.addCleanup(self._remove, guest._domain)
                saved = self.saved(guest)
                self.assertEqual(self.keys(xml), self.keys(saved))
                self.assertEqual(len(expected), len(self.keys(saved)))
                self.assertEqual({guest._domain.name()}, {
                    name for names in self.sidecar_sees().values()
                    for name in names})
                self.assertEqual(expected, set(self.sidecar_sees()))
                if kind == 'vGPU 17 VF':
                    self.assertIn("managed='no'", saved.replace('"', "'"))
                guest._domain.undefine()

    def test_definition_refuses_a_duplicate(self):
        guest = self.define()
        dev = nc_libvirt.hostdev_config(
            nc_libvirt.validated([base.pci()])[0])
        guest.attach_device(dev, persistent=True, live=False)
        error = self.assertRaises(libvirt.libvirtError, guest.attach_device,
                                  dev, persistent=True, live=False)
        self.assertEqual(libvirt.VIR_ERR_OPERATION_INVALID,
                         error.get_error_code())


class StoppedGuestTestCase(base.TestCase):
    """addAccelerator and removeAccelerator (``hotplug.attach`` and
    ``detach``) on a guest that does not run: its definition changes, and
    nothing starts."""

    def check(self, vm_state):
        self.instance.vm_state = vm_state
        guest = self.define()
        for arq, key, managed in ((base.pci(), base.key('0c', '2'), 'yes'),
                                  (vgpu17(), base.key('81', '3'), 'no')):
            with self.subTest(managed=managed):
                self.bound(arq)
                hotplug.attach(self.driver, self.context, self.instance,
                               [arq])
                saved = self.saved(guest)
                self.assertEqual({key}, self.keys(saved))
                self.assertIn("managed='%s'" % managed,
                              saved.replace('"', "'"))
                self.assertFalse(guest.is_active())
                nc_libvirt.validated([arq])  # still a valid handle
                self.bound()  # the ARQ is gone
                hotplug.detach(self.driver, self.context, self.instance,
                               [arq])
                self.assertEqual(set(), self.keys(self.saved(guest)))
                self.assertFalse(guest.is_active())

    def test_stopped_server(self):
        self.check(vm_states.STOPPED)

    def test_active_server_whose_guest_shut_down(self):
        # Nova says ACTIVE, libvirt's domain does not run: a live plug
        # would fail "domain is not running"; the definition changes.
        self.check(vm_states.ACTIVE)

    def test_written_definition_validates(self):
        guest = self.define()
        self.bound(base.pci(), vgpu17())
        hotplug.attach(self.driver, self.context, self.instance, [])
        saved = self.saved(guest)
        self.assertEqual({base.key('0c', '2'), base.key('81', '3')},
                         self.keys(saved))
        self.assertEqual('', validate(saved))
