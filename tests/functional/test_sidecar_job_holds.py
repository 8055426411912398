"""A programming job and the holds, against the real cyborg-conductor and
Placement.

While a card's port is programmed its provider is fully reserved (here
an Intel DFL card with one port, its provider ``<host>_<VF>``). An operator
who disables the card during the job keeps it disabled after the job (the
end of the job does not write back the reservation read before it), and
the sidecar sends no report while the job runs (cyborg-conductor rewrites
the inventory of a changed deployable without ``reserved``, which would
lift the job's reservation).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import threading  # noqa: E402

import fixtures  # noqa: E402

from sidecar.state import holds  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402

F_A = test_sidecar.F_A
F_B = test_sidecar.F_B
NUM_VFS = 1


class ProgrammerGate(fixtures.Fixture):
    """Holds the sidecar's FPGA programmer (the card is being loaded)
    until :meth:`release`."""

    def _setUp(self):
        self.entered = threading.Event()
        self.gate = threading.Event()
        gate = self
        from sidecar.program import programmers
        real = programmers.CommandProgrammer.program

        def program(programmer, address, bitstream_path):
            gate.entered.set()
            gate.gate.wait(waits.DEADLINE)
            return real(programmer, address, bitstream_path)
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.program.programmers.CommandProgrammer.program', program))
        self.addCleanup(self.gate.set)

    def wait_entered(self):
        waits.wait_until(self.entered.is_set, 'the programmer to be called')

    def release(self):
        self.gate.set()


class JobHoldsTest(test_sidecar.SidecarTestBase):

    def setUp(self):
        super().setUp()
        self.start_glance()
        self.image_b = self.create_bitstream(F_B)
        self.start_accel_compute('compute1', num_pfs=1, num_vfs=NUM_VFS,
                                 function_ids=[F_A])
        (self.pf,) = self.pf_bdfs('compute1')
        # A DFL card with one port (released to its VF): one provider.
        (self.name,) = self.fpga_providers('compute1', self.pf)
        (self.vf,) = self.handle_bdfs('compute1')
        self.sidecar = self.sidecars['compute1']
        self.assertEqual(0, self.reserved())

    def reserved(self):
        return self.inventory(self.name)['FPGA']['reserved']

    def program_in_background(self):
        """Cyborg's program API for the card (F_B), in a thread; the
        sidecar's programmer is held until the gate opens."""
        gate = self.useFixture(ProgrammerGate())
        uuid = [d['uuid'] for d in self.cyborg.list_deployables()
                if d['name'] == self.name][0]
        done = {}

        def call():
            done['response'] = self.cyborg.request(
                'PATCH', '/deployables/%s/program' % uuid,
                json=[{'path': '/bitstream_id', 'op': 'replace',
                       'value': [{'image_uuid': self.image_b}]}])
        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        self.addCleanup(thread.join, waits.DEADLINE)
        gate.wait_entered()
        self.assertEqual(NUM_VFS, self.reserved())
        return gate, thread, done

    def finish(self, gate, thread, done):
        gate.release()
        thread.join(waits.DEADLINE)
        self.assertFalse(thread.is_alive())
        self.assertIn('response', done)
        self.assertEqual(F_B, self.loaded('compute1', self.vf))

    def test_disable_during_a_job_survives_its_end(self):
        gate, thread, done = self.program_in_background()
        self.sidecar.sidecar.holds.disable(self.pf, 'bad fan')
        self.finish(gate, thread, done)
        # Before the fix the end of the job wrote back reserved 0.
        self.assertEqual(NUM_VFS, self.reserved())
        self.sidecar.cycle()
        self.assertEqual(NUM_VFS, self.reserved())
        self.assertEqual({holds.DISABLED: 'bad fan'},
                         self.sidecar.sidecar.holds.reasons(self.pf))
        # Enabled: everything is given back.
        self.sidecar.sidecar.holds.enable(self.pf)
        self.sidecar.cycle()
        self.assertEqual(0, self.reserved())

    def test_no_report_while_the_card_is_programmed(self):
        reporter = self.sidecar.sidecar.reporter
        gate, thread, done = self.program_in_background()
        sends = reporter.sends
        # A full report is due (as after SIGHUP or a resync interval), and
        # a cycle runs during the job: nothing is sent, the job's
        # reservation stays.
        self.sidecar.sidecar.resync()
        self.sidecar.cycle()
        self.assertEqual(sends, reporter.sends)
        self.assertEqual(NUM_VFS, self.reserved())
        self.finish(gate, thread, done)
        # After the job the report goes out and the card is given back.
        waits.wait_until(lambda: reporter.sends > sends,
                         'the report after the job')
        self.sidecar.cycle()
        self.assertEqual(0, self.reserved())
