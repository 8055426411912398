"""removeAccelerator and addAccelerator on a running guest, against a real
libvirtd and QEMU (TCG, no OS). Removal goes through the project's
per-device removal
(``nova_cyborg.virt.libvirt.remove_device``, the body of
``remove_pci_hostdevs``) and Nova's real
``LibvirtDriver._detach_with_retry`` on a real ``Host``.

No ``<hostdev>`` can run here: libvirt refuses to start a guest with one,
or to plug one live ("host doesn't support passthrough of host PCI
devices", no IOMMU and no device to give). The device unplugged is an
emulated virtio disk on the ``pc`` machine: QEMU unplugs it as it unplugs
a passed-through function (``device_del``, then ACPI PCI hot-plug: the
guest must eject the slot), libvirt names it (alias ``virtio-disk1``)
and sends the same device-removed event. The guest's OS is played by the
test: it ejects the slot as a guest's ACPI ``_EJ0`` method does, by
writing the slot's bit to the PIIX4 eject register (I/O port 0xae08,
through QEMU's monitor), once QEMU has raised the unplug request (bit of
the slot in register 0xae04); until then, the device stays.

What real libvirt 9.0 with QEMU 7.2 does (observed here), and Nova's
fakelibvirt does not:

* a live detach the guest does not acknowledge returns *successfully*
  after 5 s (libvirt's own wait for QEMU's DEVICE_DELETED): the device is
  still live, already gone from the saved definition when the call also
  asked for it, and no device-removed event comes until the guest ejects
  (fakelibvirt removes the device at once, from both);
* asking again while the unplug is pending returns successfully after
  5 s too (no error: Nova's "already in the process of unplug" case does
  not arise with QEMU 7.2);
* a detach from the definition of a device it no longer holds fails
  ``VIR_ERR_DEVICE_MISSING`` ("device not found: no target device");
* every live device has an alias (fakelibvirt gives none);
* the device-removed event arrives only once the guest ejects.
"""

import libvirt
import libvirt_qemu
from lxml import etree
from nova import exception as nova_exception
from nova.virt.libvirt import config as vconfig

from nova_cyborg.virt import hotplug
from nova_cyborg.virt import libvirt as nc_libvirt
from tests.libvirt_real import base

DISK = 'vdb'
#: PIIX4 ACPI PCI hot-plug registers of bus 0 (QEMU hw/acpi/pcihp.c): the
#: slots QEMU asks the guest to release, and the one the guest writes to
#: eject a slot.
PCI_DOWN = 0xae04
PCI_EJECT = 0xae08
_HMP = libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP


class RemoveFromRunningGuestTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        image = self.daemon.path('disk-%s.img' % self.instance.uuid)
        with open(image, 'r+b') as f:
            f.truncate(1 << 20)
        self.guest = self.define(
            "<disk type='file' device='disk'><driver name='qemu' "
            "type='raw'/><source file='%s'/><target dev='%s' "
            "bus='virtio'/></disk>" % (image, DISK))
        self.guest.launch()
        live = self.disk()
        self.assertIsNotNone(live.alias)  # libvirt names every live device
        self.slot = int(self.live_address().get('slot'), 16)
        #: (persistent, live) of each detach the project's code asked.
        self.detaches = []
        self.release_after = None
        real = self.guest.detach_device

        def detach_device(conf, persistent=False, live=False):
            real(conf, persistent=persistent, live=live)
            self.detaches.append((persistent, live))
            if live and self.release_after == self.live_detaches():
                self.release()
        self.guest.detach_device = detach_device

    def live_address(self):
        root = etree.fromstring(self.live(self.guest))
        return root.find("./devices/disk/target[@dev='%s']/../address"
                         % DISK)

    def disk(self, from_persistent_config=False):
        for dev in self.guest.get_all_devices(
                devtype=vconfig.LibvirtConfigGuestDisk,
                from_persistent_config=from_persistent_config):
            if dev.target_dev == DISK:
                return dev
        return None

    def live_detaches(self):
        return sum(1 for _persistent, live in self.detaches if live)

    def monitor(self, command):
        return libvirt_qemu.qemuMonitorCommand(self.guest._domain, command,
                                               _HMP)

    def unplug_requested(self):
        """Whether QEMU asks the guest to release the disk's slot."""
        answer = self.monitor('i /w 0x%x' % PCI_DOWN)
        return bool(int(answer.split('=')[1], 16) & (1 << self.slot))

    def release(self):
        """The guest's OS lets go of the device, as its ACPI ``_EJ0``
        does (only once QEMU asked it to)."""
        self.assertTrue(self.unplug_requested())
        self.monitor('o /w 0x%x 0x%x' % (PCI_EJECT, 1 << self.slot))

    def remove(self, attempts, timeout=1):
        self.flags.config(device_detach_attempts=attempts,
                          device_detach_timeout=timeout, group='libvirt')
        dev = vconfig.LibvirtConfigGuestDisk()
        dev.target_dev = DISK
        nc_libvirt.remove_device(self.driver, self.guest, self.instance,
                                 dev, self.disk, DISK)

    def assertGone(self):
        self.assertNotIn("dev='%s'" % DISK, self.saved(self.guest))
        self.assertNotIn("dev='%s'" % DISK, self.live(self.guest))

    def test_guest_that_releases_while_nova_waits(self):
        # The guest ejects once asked; QEMU's monitor is busy with the
        # detach until libvirt's own 5 s wait ends, so it ejects while
        # Nova waits for the event: the event ends the first attempt.
        self.release_after = 1
        self.remove(attempts=1, timeout=60)
        self.assertGone()
        self.assertEqual([(True, False), (False, True)], self.detaches)

    def test_guest_slow_to_release_is_asked_again(self):
        # Nothing happens at the first request (libvirt returns after
        # 5 s, the device live, no event); the guest lets go after the
        # second: the detach completes, the definition asked once.
        self.release_after = 2
        self.remove(attempts=3)
        self.assertGone()
        self.assertEqual([(True, False), (False, True), (False, True)],
                         self.detaches)

    def test_guest_that_never_releases_fails_and_a_retry_completes(self):
        self.release_after = None
        exc = self.assertRaises(nova_exception.PciDeviceDetachFailed,
                                self.remove, attempts=2)
        self.assertIn(DISK, exc.format_message())
        # What libvirt leaves: gone from the saved definition, still live.
        self.assertNotIn("dev='%s'" % DISK, self.saved(self.guest))
        self.assertIn("dev='%s'" % DISK, self.live(self.guest))
        self.assertTrue(self.unplug_requested())
        # The retry (removeAccelerator again) asks the live domain only,
        # never the definition (which would answer "device not found"),
        # and completes once the guest lets go.
        self.detaches = []
        self.release_after = 1
        self.remove(attempts=2)
        self.assertGone()
        self.assertEqual([(False, True)], self.detaches)
        # Gone from both: a third call has nothing to do.
        self.detaches = []
        self.remove(attempts=2)
        self.assertEqual([], self.detaches)

    def test_definition_without_the_device_answers_device_missing(self):
        # Why a retry must not ask the definition again: real libvirt
        # refuses (Nova's _detach_sync turns it into DeviceNotFound).
        dev = self.disk(from_persistent_config=True)
        self.guest.detach_device(dev, persistent=True, live=False)
        error = self.assertRaises(libvirt.libvirtError,
                                  self.guest.detach_device, dev,
                                  persistent=True, live=False)
        self.assertEqual(libvirt.VIR_ERR_DEVICE_MISSING,
                         error.get_error_code())


class AddToRunningGuestTestCase(base.TestCase):
    """addAccelerator on a running guest (``hotplug.attach``): the path
    follows libvirt's state, and the definition gets no second copy."""

    def test_running_guest_is_plugged_live_definition_untouched(self):
        arq = base.pci()
        guest = self.define()
        guest.launch()
        # An earlier addAccelerator got the device into the definition
        # only (libvirt refuses a second copy there: "already in the
        # domain configuration").
        guest.attach_device(nc_libvirt.hostdev_config(
            nc_libvirt.validated([arq])[0]), persistent=True, live=False)
        self.bound(arq)
        error = self.assertRaises(libvirt.libvirtError, hotplug.attach,
                                  self.driver, self.context, self.instance,
                                  [arq])
        # The live plug was asked (nothing to pass through here), not the
        # definition again.
        self.assertEqual(libvirt.VIR_ERR_CONFIG_UNSUPPORTED,
                         error.get_error_code())
        self.assertEqual(1, self.saved(guest).count('<hostdev'))
        self.assertEqual(set(), self.keys(self.live(guest)))
        self.assertTrue(guest.is_active())
