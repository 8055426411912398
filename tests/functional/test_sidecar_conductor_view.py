"""cyborg-conductor's ``bitstream_id`` stays true after any programming.

The real cyborg-conductor records a deployable's bitstream only after a
programming it made in an ARQ bind, and skips the programming of a later
bind asking the recorded bitstream. Cyborg's own program API
(``PATCH /v2/deployables/{uuid}/program``) and a card reprogrammed out of
band leave the record naming a bitstream the card no longer holds. These
tests make the record lie that way, then check that the sidecar makes the
conductor forget it (the deployable is registered again, with no
bitstream) and that a server asking the old bitstream gets it programmed.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100


from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402

F_A = test_sidecar.F_A
F_B = test_sidecar.F_B
F_OLD = test_sidecar.F_OLD
function_trait = test_sidecar.function_trait
MISSING = 'missing'


class ConductorViewTest(test_sidecar.SidecarTestBase):
    # One card with one port, released to its VF: one deployable, one
    # provider, whose record the tests make lie.
    NUM_VFS = 1

    def _deployable(self, name):
        found = [d for d in self.cyborg.list_deployables()
                 if d['name'] == name]
        self.assertEqual(1, len(found), found)
        return found[0]

    def _recorded(self, name):
        """The bitstream cyborg-conductor records for ``name`` (``MISSING``
        while it has no such deployable)."""
        found = [d for d in self.cyborg.list_deployables()
                 if d['name'] == name]
        return found[0].get('bitstream_id') if found else MISSING

    def _bound_once(self, flavor, name, image):
        """Boot a server asking ``image``, check the conductor recorded
        it, delete the server."""
        server = self.boot(flavor)
        self.assert_accelerated(server, 1)
        waits.wait_until(lambda: self._recorded(name) == image,
                         'the conductor recording bitstream %s' % image)
        self._delete_server(server)
        self.assert_nothing_left(server['id'])

    def _forgotten(self, name, ok):
        """Wait until the conductor's record of ``name`` is in ``ok``."""
        return waits.wait_until(
            lambda: self._recorded(name) in ok or None,
            'cyborg-conductor forgetting the bitstream of %s (it records '
            '%s)' % (name, self._recorded(name)))

    def _setup(self):
        self.start_glance()
        self.image_a = self.create_bitstream(F_A)
        self.image_b = self.create_bitstream(F_B)
        self.flavor_a = self.create_profile_flavor(
            [{'resources:FPGA': '1', 'accel:bitstream_id': self.image_a}])[1]
        self.start_accel_compute('compute1', function_ids=[F_OLD])
        (self.pf,) = self.pf_bdfs('compute1')
        (self.vf,) = self.handle_bdfs('compute1')
        (self.name,) = self.fpga_providers('compute1', self.pf)
        self._bound_once(self.flavor_a, self.name, self.image_a)
        self.assertEqual(F_A, self.loaded('compute1', self.vf))

    def _boot_asking_a_again(self):
        # Before the repair the conductor skips the programming: the server
        # would get a card holding F_B (or Nova's check refuses the host).
        server = self.boot(self.flavor_a)
        self.assert_accelerated(server, 1)
        self.assertEqual(F_A, self.loaded('compute1', self.vf))
        traits = self.traits(self.name)
        self.assertIn(function_trait(F_A), traits)
        self.assertNotIn(function_trait(F_B), traits)
        self.assertEqual(0, self.inventory(self.name)['FPGA']['reserved'])
        self.assertEqual(self.image_a, self._recorded(self.name))

    def test_program_api_then_bind_for_the_old_bitstream(self):
        self._setup()
        uuid = self._deployable(self.name)['uuid']
        # Cyborg's program API: the sidecar programs F_B, the conductor
        # keeps recording image A.
        self.cyborg.request(
            'PATCH', '/deployables/%s/program' % uuid,
            json=[{'path': '/bitstream_id', 'op': 'replace',
                   'value': [{'image_uuid': self.image_b}]}])
        self.assertEqual(F_B, self.loaded('compute1', self.vf))
        self.assertEqual([(self.vf, F_A), (self.vf, F_B)],
                         self.programmed('compute1'))
        # The function trait follows the API path.
        traits = self.traits(self.name)
        self.assertIn(function_trait(F_B), traits)
        self.assertNotIn(function_trait(F_A), traits)
        # The sidecar's next cycle re-registers the idle card.
        self.sidecars['compute1'].cycle()
        self._forgotten(self.name, (None, self.image_b))
        self.assertEqual(1, self.sidecars['compute1'].sidecar.view.repairs)
        self._boot_asking_a_again()
        self.assertEqual([(self.vf, F_A), (self.vf, F_B), (self.vf, F_A)],
                         self.programmed('compute1'))

    def _load_out_of_band(self, function_id):
        """Load ``function_id`` into the card's port with the card's own
        tool, not the sidecar."""
        self.hosts['compute1'].set_function_id(self.vf, function_id)

    def test_out_of_band_programming(self):
        self._setup()
        self._load_out_of_band(F_B)
        # The next discovery cycle sees the change.
        self.sidecars['compute1'].cycle()
        self.assertIn(function_trait(F_B), self.traits(self.name))
        self._forgotten(self.name, (None,))
        self._boot_asking_a_again()

    def test_not_registered_again_under_a_server(self):
        self._setup()
        server = self.boot(self.flavor_a)
        self.assert_accelerated(server, 1)
        uuid = self._deployable(self.name)['uuid']
        # The card changes under the server (out of band): the record is
        # stale, but the server's allocation and ARQ hold the card. The
        # guest holds the port's function (vfio-pci: dfl-pci's port is
        # gone from sysfs, sidecar_simulator.kernel), so the sidecar
        # reports the card as last seen (sidecar.discovery.held) and
        # cannot see the change yet: nothing is re-registered or repaired.
        self._load_out_of_band(F_B)
        self.sidecars['compute1'].cycle()
        self.assertEqual(self.image_a, self._recorded(self.name))
        self.assertEqual(uuid, self._deployable(self.name)['uuid'])
        view = self.sidecars['compute1'].sidecar.view
        self.assertEqual(0, view.repairs)
        self.assertEqual(
            'Bound', self.cyborg.list_arqs(server['id'])[0]['state'])
        # Once the server is gone, the next cycle repairs it.
        self._delete_server(server)
        self.assert_nothing_left(server['id'])
        self.sidecars['compute1'].cycle()
        self._forgotten(self.name, (None,))
        self.assertEqual(1, view.repairs)
