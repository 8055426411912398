"""Soft reboot, rescue and unrescue keep the saved definition true,
against a real libvirtd: the project's part of each (the hooks Nova's
patched driver calls, ``guest_to_relaunch`` and ``guest_xml``) on real
domains, and the guest started from what they return.

Nova's own ``_soft_reboot``, ``rescue`` and ``unrescue`` are not run
whole: they need the patched Nova (the stage runs on Nova as installed),
an image, disks and networks; a guest with no OS never acknowledges the
ACPI shutdown a soft reboot asks for (Nova then reboots it hard). The
tests start where the project's code starts: a guest shut down (soft
reboot), the unrescue XML Nova saved, the rescue XML Nova built. A guest
whose definition holds a ``<hostdev>`` cannot start here (no device to
pass through): that refusal shows a stray was left, and the cases that
add a device stop at the definition.
"""

from unittest import mock

import libvirt
from nova.virt.libvirt import guest as libvirt_guest

from nova_cyborg.hooks import libvirt as hooks
from nova_cyborg.virt import guard
from nova_cyborg.virt import libvirt as nc_libvirt
from tests.libvirt_real import base

STRAY = base.pci(bus='0e', function='4')


def hostdev(arq):
    """The ``<hostdev>`` the project writes for ``arq``."""
    return nc_libvirt.hostdev_config(nc_libvirt.validated([arq])[0])


class RestartTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.events = []
        recorder = mock.patch.object(
            guard, '_record',
            side_effect=lambda ctx, inst, event: self.events.append(event))
        recorder.start()
        self.addCleanup(recorder.stop)

    def test_soft_reboot_relaunches_without_a_stray(self):
        guest = self.define()
        guest.launch()
        # The definition got a device the server no longer holds (its ARQ
        # was deleted while the guest ran).
        guest.attach_device(hostdev(STRAY), persistent=True, live=False)
        self.assertEqual({base.key('0e', '4')}, self.keys(self.saved(guest)))
        guest.poweroff()  # the guest has shut down
        # Started as it is, it would pass the device through (here:
        # libvirt refuses, having none).
        self.assertRaises(libvirt.libvirtError, guest.launch)
        self.bound()
        relaunched = hooks.guest_to_relaunch(self.driver, self.instance,
                                             guest)
        relaunched.launch()
        self.assertTrue(relaunched.is_active())
        self.assertEqual(set(), self.keys(self.saved(relaunched)))
        self.assertEqual(set(), self.keys(self.live(relaunched)))
        self.assertEqual([guard.EVENT_REMOVED], self.events)

    def test_soft_reboot_keeps_a_bound_device(self):
        arq = base.pci()
        guest = self.define(hostdev(arq).to_xml())
        self.bound(arq)
        self.assertIs(guest, hooks.guest_to_relaunch(
            self.driver, self.instance, guest))
        self.assertEqual({base.key('0c', '2')}, self.keys(self.saved(guest)))
        self.assertEqual([], self.events)

    def test_unrescue_drops_a_device_removed_while_rescued(self):
        # Nova saved the XML to unrescue with before the rescue; the
        # accelerator was removed while the server was rescued.
        saved_for_unrescue = self.saved(self.define(hostdev(STRAY).to_xml()))
        self.conn.lookupByUUIDString(self.instance.uuid).undefine()
        self.bound()
        xml = hooks.guest_xml(self.driver, self.context, self.instance,
                              saved_for_unrescue)
        guest = libvirt_guest.Guest.create(xml, self.driver._host)
        self.addCleanup(self._remove, guest._domain)
        guest.launch()
        self.assertTrue(guest.is_active())
        self.assertEqual(set(), self.keys(self.saved(guest)))
        self.assertEqual(set(), self.keys(self.live(guest)))
        self.assertEqual([guard.EVENT_REMOVED], self.events)

    def test_rescue_definition_holds_the_bound_devices(self):
        # The rescue XML Nova builds without one of the server's devices
        # (an ARQ bound while the guest was being rebuilt) gets it.
        bound, other = base.pci(), base.pci(bus='0d', function='1')
        rescue_xml = self.saved(self.define(hostdev(bound).to_xml()))
        self.conn.lookupByUUIDString(self.instance.uuid).undefine()
        self.bound(bound, other)
        xml = hooks.guest_xml(self.driver, self.context, self.instance,
                              rescue_xml)
        guest = libvirt_guest.Guest.create(xml, self.driver._host)
        self.addCleanup(self._remove, guest._domain)
        self.assertEqual({base.key('0c', '2'), base.key('0d', '1')},
                         self.keys(self.saved(guest)))
        self.assertEqual([guard.EVENT_ADDED], self.events)
