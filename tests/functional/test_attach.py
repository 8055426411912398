"""The addAccelerator and removeAccelerator server actions.

A running server without accelerators gets a device hot-plugged (and
unplugged) through libvirt; a stopped server, with or without the
flavor's accelerators, gets it when it starts. After each action, what a
user or operator checks: the instance action's event, the ARQs in Cyborg
(state, host, provider), the ``<hostdev>`` lines of the domain, and the
server's Placement allocation. Failures leave everything as it was.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

import fixtures  # noqa: E402
from nova.tests.functional.api import client  # noqa: E402
from oslo_concurrency import lockutils  # noqa: E402

from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from nova_cyborg import exception as nc_exception  # noqa: E402
from tests.functional import base  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

PROFILE = attach_base.PROFILE


class AttachTest(attach_base.AttachTestBase):

    def setUp(self):
        super().setUp()
        self.plain = self._create_flavor(name='plain')

    # Helpers

    def act(self, server, action, dp):
        self.api.post_server_action(server['id'],
                                    {action: {'device_profile': dp}})

    def refused(self, server, action, dp, status):
        ex = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            server['id'], {action: {'device_profile': dp}})
        self.assertEqual(status, ex.response.status_code)
        return str(ex)

    def event(self, server, action, result):
        return self._wait_for_instance_action_event(
            server, action, attach_base.ACTION_EVENTS[action], result)

    def last_event(self, server, action):
        """The event of the newest ``action`` once it has a result."""
        method = attach_base.ACTION_EVENTS[action]

        def done():
            newest = [a for a in self.admin_api.get_instance_actions(
                server['id']) if a['action'] == action][0]
            for event in self.admin_api.get_instance_action_details(
                    server['id'], newest['request_id'])['events']:
                if event['event'] == method and event['result']:
                    return event
        return waits.wait_until(done, 'the result of the newest ' + action)

    def task_state(self, server):
        return self.api.get_server(server['id'])['OS-EXT-STS:task_state']

    def device_usage(self):
        return sum(self._get_provider_usages(rp).get('FPGA', 0)
                   for rp in self.device_rp_uuids('compute1').values())

    def assert_plain(self, server, usage=0):
        """No accelerator for the server: ARQs, domain, allocation; the
        host's devices used by ``usage`` others."""
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        self.assertEqual([], self.hostdev_bdfs(server))
        self.assertEqual({}, self._device_allocations(server['id']))
        self.assertEqual(usage, self.device_usage())

    # Attach and detach

    def test_hot_plug_and_unplug(self):
        server = self.boot(self.plain)
        self.act(server, 'addAccelerator', self.dp)
        self.event(server, 'addAccelerator', 'Success')
        arqs = self.assert_accelerated(server, 1)
        self.assertEqual('ACTIVE', self.api.get_server(server['id'])['status'])
        # The domain keeps it through a hard reboot.
        self._reboot_server(server, hard=True)
        self.assertEqual([self.arq_bdf(arqs[0])], self.hostdev_bdfs(server))

        self.act(server, 'removeAccelerator', self.dp)
        self.event(server, 'removeAccelerator', 'Success')
        self.assert_plain(server)
        self.assertEqual('ACTIVE', self.api.get_server(server['id'])['status'])

    def test_cold_plug_next_to_the_flavor_accelerators(self):
        server = self.boot(self.accel_flavor)
        flavor_arq = self.assert_accelerated(server, 1)[0]
        self._stop_server(server)
        self.cyborg.create_device_profile('extra', PROFILE)
        self.act(server, 'addAccelerator', 'extra')
        self.event(server, 'addAccelerator', 'Success')
        self._start_server(server)
        arqs = self.assert_accelerated(server, 2)
        self.assertIn(flavor_arq['uuid'], [a['uuid'] for a in arqs])

        self._stop_server(server)
        self.act(server, 'removeAccelerator', 'extra')
        self.event(server, 'removeAccelerator', 'Success')
        self._start_server(server)
        arqs = self.assert_accelerated(server, 1)
        self.assertEqual([flavor_arq['uuid']], [a['uuid'] for a in arqs])

    def test_an_action_under_way_holds_the_server(self):
        """Nothing overtakes an attach; two attaches in a row keep both."""
        server = self.boot(self.accel_flavor)
        flavor_arq = self.assert_accelerated(server, 1)[0]
        self._stop_server(server)
        for name in ('extra', 'extra2'):
            self.cyborg.create_device_profile(name, PROFILE)
        # nova-compute takes the instance's lock first: while the test
        # holds it, the attach stays under way.
        with lockutils.lock(server['id']):
            self.act(server, 'addAccelerator', 'extra')
            self.assertEqual('adding_accelerator', self.task_state(server))
            for action in ({'os-start': None},
                           {'addAccelerator': {'device_profile': 'extra2'}},
                           {'removeAccelerator': {'device_profile': 'extra'}}):
                ex = self.assertRaises(
                    client.OpenStackApiException,
                    self.api.post_server_action, server['id'], action)
                self.assertEqual(409, ex.response.status_code)
                self.assertIn('adding_accelerator', str(ex))
        self.assertEqual('Success',
                         self.last_event(server, 'addAccelerator')['result'])
        self.act(server, 'addAccelerator', 'extra2')
        self.assertEqual('Success',
                         self.last_event(server, 'addAccelerator')['result'])
        self.assertIsNone(self.task_state(server))
        self._start_server(server)
        arqs = self.assert_accelerated(server, 3)
        self.assertIn(flavor_arq['uuid'], [a['uuid'] for a in arqs])
        # Both attaches are recorded: each one can be removed.
        self._stop_server(server)
        for name in ('extra', 'extra2'):
            self.act(server, 'removeAccelerator', name)
            self.assertEqual(
                'Success', self.last_event(server,
                                           'removeAccelerator')['result'])
        self._start_server(server)
        arqs = self.assert_accelerated(server, 1)
        self.assertEqual([flavor_arq['uuid']], [a['uuid'] for a in arqs])

    def test_deleting_the_server_frees_what_was_attached(self):
        server = self.boot(self.plain)
        self.act(server, 'addAccelerator', self.dp)
        self.event(server, 'addAccelerator', 'Success')
        self._delete_server(server)
        self.assert_nothing_left(server['id'])
        self.assertEqual(0, self.device_usage())

    # Refusals, answered at once

    def test_running_server_with_accelerators_is_refused(self):
        server = self.boot(self.accel_flavor)
        msg = self.refused(server, 'addAccelerator', self.dp, 409)
        self.assertIn('stop the server first', msg)
        self.assert_accelerated(server, 1)

    def test_unknown_profile_is_refused(self):
        server = self.boot(self.plain)
        msg = self.refused(server, 'addAccelerator', 'no-such-dp', 400)
        self.assertIn('no-such-dp', msg)
        self.assert_plain(server)

    def test_a_profile_no_flavor_of_the_project_offers(self):
        """The cloud admin's private flavor carries a profile the owner's
        project has no access to: the owner may not add it (private
        flavors decide who gets accelerators), the admin may."""
        self.cyborg.create_device_profile('admin-only', PROFILE)
        with self.acting(self.cloud_admin_api):
            self._create_flavor(
                name='accel-admin-only', is_public=False,
                extra_spec={'accel:device_profile': 'admin-only'})
        with self.acting(self.owner_api):
            server = self.boot(self.plain)
            msg = self.refused(server, 'addAccelerator', 'admin-only', 403)
        self.assertIn('No flavor that project %s can use offers device '
                      'profile admin-only' % attach_base.OWNER_PROJECT, msg)
        self.assertIsNone(self.task_state(server))
        self.assert_plain(server)
        # Another tenant does not see the server at all.
        ex = self.assertRaises(
            client.OpenStackApiException,
            self.other_tenant_api.post_server_action, server['id'],
            {'addAccelerator': {'device_profile': self.dp}})
        self.assertEqual(404, ex.response.status_code)
        # The cloud admin (project C) attaches it to the owner's server;
        # the owner sees it.
        self.accelerator_action(self.cloud_admin_api, server,
                                'addAccelerator', 'admin-only')
        self.assert_owner_has_devices(server, 'compute1', 1)

    def test_limits_count_the_whole_server_and_the_records(self):
        self.flags(max_accelerators_per_instance=2, group='nova_cyborg')
        server = self.boot(self.accel_flavor)
        self.cyborg.create_device_profile('two', [dict(PROFILE[0], **{
            'resources:FPGA': '2'})])
        msg = self.refused(server, 'addAccelerator', 'two', 400)
        self.assertIn('asks for 2 accelerators and the server has 1 '
                      'already; at most 2', msg)
        # "<profile> <rp uuid> FPGA 1" would not fit 255 characters.
        long_name = 'p' * 212
        self.cyborg.create_device_profile(long_name, PROFILE)
        msg = self.refused(server, 'addAccelerator', long_name, 400)
        self.assertIn('need 256 characters, at most 255 fit', msg)
        self.assertIsNone(self.task_state(server))
        self.assert_accelerated(server, 1)

    def test_malformed_body_is_refused(self):
        server = self.boot(self.plain)
        for body in ({'addAccelerator': {}},
                     {'addAccelerator': {'device_profile': '<x/>'}},
                     {'addAccelerator': {'device_profile': self.dp,
                                         'extra': 1}}):
            ex = self.assertRaises(
                client.OpenStackApiException, self.api.post_server_action,
                server['id'], body)
            self.assertEqual(400, ex.response.status_code)
        self.assert_plain(server)

    def test_detaching_what_is_not_attached_is_refused(self):
        server = self.boot(self.accel_flavor)
        msg = self.refused(server, 'removeAccelerator', self.dp, 409)
        self.assertIn('No accelerator of device profile', msg)
        self.assert_accelerated(server, 1)

    def test_actions_that_would_drop_an_attached_accelerator(self):
        server = self.boot(self.plain)
        self.act(server, 'addAccelerator', self.dp)
        self.event(server, 'addAccelerator', 'Success')
        for action in ({'resize': {'flavorRef': self.accel_flavor}},
                       {'shelve': {}}):
            ex = self.assertRaises(
                client.OpenStackApiException, self.api.post_server_action,
                server['id'], action)
            self.assertEqual(400, ex.response.status_code)
            self.assertIn('removeAccelerator', str(ex))
        self.assert_accelerated(server, 1)

    # Failures in nova-compute leave everything as it was

    def test_bind_failure_puts_everything_back(self):
        server = self.boot(self.plain)
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs',
            side_effect=nc_exception.CyborgError(
                op='bind', msg='injected: HTTP 503', status=503)))
        self.act(server, 'addAccelerator', self.dp)
        event = self.event(server, 'addAccelerator', 'Error')
        self.assertIn('injected: HTTP 503', str(event.get('details')))
        self.assertEqual('ACTIVE', self.api.get_server(server['id'])['status'])
        self.assert_plain(server)

    def test_no_free_device_puts_everything_back(self):
        servers = [self.boot(self.accel_flavor)
                   for _i in range(self.NUM_VFS)]
        server = self.boot(self.plain)
        self.act(server, 'addAccelerator', self.dp)
        event = self.event(server, 'addAccelerator', 'Error')
        self.assertIn('no free device', str(event.get('details')))
        self.assert_plain(server, usage=self.NUM_VFS)
        for other in servers:
            self.assert_accelerated(other, 1)

    def test_cold_plug_failure_rebinds_the_flavor_accelerators(self):
        server = self.boot(self.accel_flavor)
        flavor_arq = self.assert_accelerated(server, 1)[0]
        self._stop_server(server)
        real = nc_client.CyborgClient.bind_arqs

        def bind_arqs(cyclient, bindings):
            if len(bindings) > 1:   # the new ARQ with the parked one
                raise nc_exception.CyborgError(
                    op='bind', msg='injected', status=503)
            return real(cyclient, bindings)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))
        self.act(server, 'addAccelerator', self.dp)
        self.event(server, 'addAccelerator', 'Error')
        self._start_server(server)
        arqs = self.assert_accelerated(server, 1)
        self.assertEqual([flavor_arq['uuid']], [a['uuid'] for a in arqs])


class MdevAttachTest(attach_base.AttachSteps, base.AcceleratorTestBase):
    """A mediated device goes in and out of a stopped guest only."""

    def test_mdev_is_not_removed_from_a_running_guest(self):
        self.start_accel_compute('compute1', num_mdevcap=1,
                                 drivers=('gpu',), mdev_types=('nvidia-11',))
        self.cyborg.create_device_profile('vgpu', [{'resources:VGPU': '1'}])
        server = self.boot(self._create_flavor(name='plain'))
        self._stop_server(server)
        body = {'device_profile': 'vgpu'}
        self.accelerator_action(self.api, server, 'addAccelerator', 'vgpu')
        self._start_server(server)
        (arq,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual(('Bound', 'MDEV'),
                         (arq['state'], arq['attach_handle_type']))
        ex = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            server['id'], {'removeAccelerator': body})
        self.assertEqual(409, ex.response.status_code)
        self.assertIn('A MDEV accelerator cannot be removed from a running '
                      'server: stop the server first.', str(ex))
        self.assertEqual([arq], self.cyborg.list_arqs(server['id']))
        # Stopped, it goes.
        self._stop_server(server)
        self.accelerator_action(self.api, server, 'removeAccelerator', 'vgpu')
        self.assertEqual([], self.cyborg.list_arqs(server['id']))


class ComputeDownTest(attach_base.AttachSteps, base.AcceleratorTestBase):
    """nova-api asks nothing of the compute (no blocking call): a compute
    whose service is down, as Nova's servicegroup API sees it, is refused
    before the task state is set."""

    def test_a_compute_that_is_down_is_named(self):
        self.start_accel_compute('compute1')
        dp, _flavor = self.create_profile_flavor(PROFILE)
        server = self.boot(self._create_flavor(name='plain'))
        self.force_down('compute1', True)
        ex = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            server['id'], {'addAccelerator': {'device_profile': dp}})
        self.assertEqual(409, ex.response.status_code)
        self.assertIn('nova-compute on host compute1 is down: try again '
                      'once it is up.', str(ex))
        server = self.api.get_server(server['id'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual([], self.cyborg.list_arqs(server['id']))
        # Up again, the owner's attach goes through.
        self.force_down('compute1', False)
        self.accelerator_action(self.api, server, 'addAccelerator', dp)
        self.assertEqual(1, len(self.cyborg.list_arqs(server['id'])))
