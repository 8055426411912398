"""A guest gets only the accelerators bound to the host it is on.

An evacuation leaves the failed host's ARQs behind: those of the flavor
are made again on the new host, those attached with addAccelerator are
not carried over when the new host has no device for them, and the
instance action says so (test_evacuate_attached.py: when it has one).
(A resize that fails after the destination's ARQs were bound:
tests/functional/test_move.py.)
What a user or operator checks: the instance action's event, the
``<hostdev>`` BDFs of the domain, the ARQs in Cyborg (nothing left on the
failed host) and removeAccelerator (nothing attached any more).
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

from nova.tests.functional.api import client  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


class EvacuateAttachedTest(base.AcceleratorTestBase):
    """An evacuated server loses what was attached with addAccelerator,
    and is told so; nothing of the dead host is plugged into it."""

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        self.dp, self.accel_flavor = self.create_profile_flavor(PROFILE)
        self.plain = self._create_flavor(name='plain')

    def attach(self, server):
        self.api.post_server_action(
            server['id'], {'addAccelerator': {'device_profile': self.dp}})
        self._wait_for_instance_action_event(
            server, 'addAccelerator', 'compute_add_accelerator', 'Success')
        arqs = self.cyborg.list_arqs(server['id'])
        self.assertEqual({'compute1'}, {a['hostname'] for a in arqs})
        return arqs

    def evacuate(self, server, **compute2):
        self.start_accel_compute('compute2', **compute2)
        service = self.compute_service('compute1')
        self.computes['compute1'].stop()
        self.admin_api.put_service(service['id'], {'forced_down': 'true'})
        # Since 2.95 an evacuated server stays stopped on its new host.
        self._evacuate_server(server, expected_host='compute2')
        event = self._wait_for_instance_action_event(
            server, 'evacuate', 'compute_drop_attached_accelerators',
            'Error')
        self.assertIn(self.dp, str(event.get('details')))
        self.assertIn('not carried over', str(event.get('details')))
        self._start_server(server)
        return self.api.get_server(server['id'])

    def assert_nothing_attached(self, server):
        ex = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            server['id'], {'removeAccelerator': {'device_profile': self.dp}})
        self.assertEqual(409, ex.response.status_code)

    def test_attached_accelerator_is_dropped_and_said(self):
        server = self.boot(self.plain)
        attached = self.attach(server)
        # compute2 reports no device.
        server = self.evacuate(server, sidecar=False)
        self.assertEqual('ACTIVE', server['status'])
        # The dead host's ARQ is deleted; the guest has no device.
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        self.assertNotIn(attached[0]['uuid'],
                         [a['uuid'] for a in self.cyborg.list_arqs()])
        self.assertEqual([], self.hostdev_bdfs(server))
        self._reboot_server(server, hard=True)
        self.assertEqual([], self.hostdev_bdfs(
            self.api.get_server(server['id'])))
        self.assert_nothing_attached(server)

    def test_flavor_accelerator_follows_attached_does_not(self):
        server = self.boot(self.accel_flavor)
        self._stop_server(server)
        self.attach(server)
        self._start_server(server)
        # One device on compute2: the flavor's takes it.
        server = self.evacuate(server, num_vfs=1)
        # Only the flavor's, bound again on compute2.
        arqs = self.cyborg.list_arqs(server['id'])
        self.assertEqual([('Bound', 'compute2')],
                         [(a['state'], a['hostname']) for a in arqs])
        self.assertEqual([self.arq_bdf(a) for a in arqs],
                         self.hostdev_bdfs(server))
        self.assertEqual([], [a for a in self.cyborg.list_arqs()
                              if a['hostname'] == 'compute1'])
        self.assert_nothing_attached(server)
