"""A DFL card given to a guest stays in Cyborg and Placement, against the
real cyborg-conductor.

When a server starts, libvirt binds its ``<hostdev managed='yes'>`` to
``vfio-pci``; dfl-pci's remove takes the card's regions and ports out of
sysfs with it (the harness applies :mod:`sidecar_simulator.kernel` on
every start and stop of a fakelibvirt domain:
tests.functional.harness.guest_kernel). A report without the card, or
without the port, would make cyborg-conductor destroy the deployable, its
attach handles and its provider under the running server. The sidecar
reports what a guest holds as last seen; when the server is deleted the
function is back on dfl-pci and the card is read from sysfs again, the
same and healthy.

Two shapes: a D5005 without SR-IOV (the guest gets the PF, the whole
card leaves sysfs) and an N6000 whose ports are released to VFs (the
guest gets a VF, its port leaves sysfs).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import os  # noqa: E402
import sqlite3  # noqa: E402

from sidecar.discovery import health  # noqa: E402
from tests.functional import test_faults_processes as processes  # noqa
from tests.functional import test_sidecar  # noqa: E402
from tests.functional.harness import waits  # noqa: E402


class HeldByGuestBase(test_sidecar.SidecarTestBase):

    #: VFs of the card (0: a D5005 whose one port the PF serves).
    NUM_VFS = 0

    def setUp(self):
        super().setUp()
        self.host = self.start_accel_compute('compute1', num_pfs=1,
                                             num_vfs=self.NUM_VFS)
        (self.pf,) = self.pf_bdfs('compute1')
        self.names = self.fpga_providers('compute1', self.pf)
        self.sidecar = self.sidecars['compute1']

    def driver_of(self, address):
        link = os.path.join(self.sidecar.sysfs_root, 'bus', 'pci',
                            'devices', address, 'driver')
        return os.path.basename(os.readlink(link))

    def handles(self):
        """``{(deployable name, attach_info): (handle uuid, in_use)}`` in
        Cyborg's database."""
        db = sqlite3.connect(os.path.join(self.cyborg.base_dir,
                                          'cyborg.sqlite'))
        try:
            rows = db.execute(
                'SELECT d.name, h.uuid, h.attach_info, h.in_use FROM '
                'attach_handles h JOIN deployables d ON '
                'h.deployable_id = d.id').fetchall()
        finally:
            db.close()
        return {(name, json.dumps(json.loads(info), sort_keys=True)):
                (uuid, bool(in_use)) for name, uuid, info, in_use in rows}

    def cyborg_view(self):
        """Deployables (name, uuid, provider, attributes), attach handles
        and each provider's inventory and traits."""
        deployables = sorted(
            (d['name'], d['uuid'], d['rp_uuid'],
             json.dumps(json.loads(d['attributes_list']), sort_keys=True))
            for d in self.cyborg.list_deployables())
        providers = {name: (self.provider(name)['uuid'],
                            self.inventory(name)['FPGA'],
                            sorted(self.traits(name)))
                     for name in self.names}
        return deployables, self.handles(), providers

    def unhealthy(self):
        return self.sidecar.sidecar.inventory.monitor.unhealthy()

    def cycles(self, count=2):
        """``count`` sidecar report cycles."""
        for _ in range(count):
            self.sidecar.cycle()

    def reported(self):
        """The FPGA devices a discovery cycle of the sidecar gives now
        (what it reports to cyborg-conductor)."""
        return sorted((d for d in self.sidecar.sidecar.inventory.discover()
                       if d.type == 'FPGA'), key=lambda d: d.address)

    def held_function(self, server):
        (arq,) = self.cyborg.list_arqs(server['id'])
        return arq, self.arq_bdf(arq)

    def check_held_then_back(self):
        self.cycles()
        before = self.cyborg_view()
        self.assertEqual(len(self.names), len(before[0]))
        devices = self.reported()
        self.assertEqual([self.pf], [d.address for d in devices])
        _name, flavor = self.create_profile_flavor(processes.PROFILE)
        server = self.boot(flavor)
        self.assert_accelerated(server, 1)
        arq, function = self.held_function(server)
        # The host's kernel has given the function to the guest, and
        # dfl-pci's devices under it are gone ...
        self.assertEqual('vfio-pci', self.driver_of(function))
        self.assertFalse(os.path.exists(os.path.join(
            self.sidecar.sysfs_root, 'bus', 'pci', 'devices', function,
            'fpga_region')))
        # ... yet the sidecar reports the card as it was.
        self.assertEqual(devices, self.reported())
        deployables, handles, providers = before
        in_use = {key: (uuid, key[0].endswith(function))
                  for key, (uuid, _used) in handles.items()}

        def steady():
            return self.cyborg_view() == (deployables, in_use, providers)
        self.cycles()
        waits.wait_until(steady, 'the held card reported as before')
        self.cycles()
        self.assertEqual((deployables, in_use, providers),
                         self.cyborg_view())
        (now,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual(('Bound', arq['attach_handle_uuid']),
                         (now['state'], now['attach_handle_uuid']))
        self.assertEqual({}, self.unhealthy())

        self._delete_server(server)
        self.assertEqual('dfl-pci', self.driver_of(function))
        self.assertEqual(devices, self.reported())

        def back():
            self.sidecar.cycle()
            return self.cyborg_view() == before
        waits.wait_until(back, 'the card given back, as before')
        self.assertEqual({}, self.unhealthy())
        for name in self.names:
            self.assertNotIn(health.UNHEALTHY_TRAIT, self.traits(name))
            self.assertEqual(0, self.inventory(name)['FPGA']['reserved'])
        # And it is offered again.
        self.assert_accelerated(self.boot(flavor), 1)


class PfHeldTest(HeldByGuestBase):
    """A D5005 (0b2b) without SR-IOV: the guest gets the PF."""

    NUM_VFS = 0

    def test_pf_held_by_a_server(self):
        self.assertEqual('0b2b', self.host.functions[self.pf].product_id)
        self.assertEqual(['compute1_' + self.pf], self.names)
        self.check_held_then_back()


class VfHeldTest(HeldByGuestBase):
    """An N6000 whose two ports are released to its two VFs: the guest
    gets one VF."""

    NUM_VFS = 2

    def test_vf_held_by_a_server(self):
        self.assertEqual(2, len(self.names))
        self.check_held_then_back()
