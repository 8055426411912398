"""Lifecycle operations on a server with an accelerator, with a fault.

The failure counterparts of test_lifecycle (resize and cold migration have
theirs in test_move). A fault is injected in the middle of each operation:
Cyborg answers HTTP 503 to one kind of call of Nova's client, Cyborg binds
only after Nova gave up waiting, or the image upload fails. Afterwards
nothing may be leaked (no ARQ in Cyborg that no server uses, no allocation
on a device provider that no server uses; the profile asks for a PCI VF,
so there is no mdev) and the server must be in a state the user can
recover from; each test shows the recovery once the fault is gone.

Cases and outcomes:

* hard reboot, Cyborg cannot list the ARQs: the reboot fails with an
  instance action error that says why; the guest runs on untouched, with
  its VF; its ARQ stays Bound and allocated. A hard reboot then works.
* start (power on), same fault: the same, the server stays SHUTOFF; a
  start then works.
* rescue, same fault: ERROR with a fault that says why; a hard reboot
  brings the server back with its VF.
* soft reboot, same fault (Nova reads the ARQs before any reboot): the
  reboot fails with the reason, the guest keeps its VF; rebooting again
  works.
* pause failing in libvirt: ACTIVE with its VF, the action's event names
  the libvirt error.
* host reboot while Cyborg fails: nova-compute cannot bring the server
  back, which goes to ERROR keeping its ARQ and allocation; a hard reboot
  brings it back with its VF.
* suspend, same fault: ERROR, the guest still runs with its VF; resume,
  same fault: ERROR, the guest was restored without its VF (suspend
  unplugs it). A hard reboot brings either back with its VF.
* rebuild on the same host: the conductor hands over the ARQs the server
  has (there is no re-bind), the compute reads them after destroying the
  guest. If that read fails: ERROR with the reason, ARQ kept and the
  allocation too (upstream's failure path deleted the server's allocation
  on its own host); a second rebuild works. If the conductor's read
  fails: the rebuild fails with the reason and the server is ACTIVE again
  (upstream left it in REBUILD for good).
* evacuate, Cyborg answers 503 to the destination's bind: nothing is left
  on the destination, the migration ends in error, the server leaves its
  task state, and a second evacuate works.
* evacuate and unshelve, Cyborg binds after ``arq_binding_timeout``: the
  operation fails with the reason (evacuate: ERROR; unshelve:
  SHELVED_OFFLOADED, no allocation), the late ARQ is deleted, and a
  second one works.
* unshelve of an offloaded server, Cyborg answers 503 to the bind: back to
  SHELVED_OFFLOADED, no ARQ, no allocation; a second unshelve works.
* shelve, Cyborg answers 503 to the ARQ delete of the offload: the server
  stays SHELVED on its host, ARQ Bound and allocated (nothing leaked); a
  shelve offload then completes.
* delete, Cyborg answers 503 to the ARQ delete: the delete fails, the
  server is in ERROR with the reason and keeps its ARQ and allocation;
  deleting it again frees everything (upstream deleted the server and
  left its ARQ Bound for good).
* snapshot and backup, the image upload fails: ACTIVE with its VF, no
  image left.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import os  # noqa: E402
import threading  # noqa: E402

import fixtures  # noqa: E402
from nova.cmd import manage  # noqa: E402
from nova import exception as nova_exception  # noqa: E402
from nova.image import glance  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from nova_cyborg.clients import cyborg_http  # noqa: E402
from nova_cyborg import exception as nc_exception  # noqa: E402
from tests.functional import test_lifecycle  # noqa: E402


def by_instance(kwargs):
    """A call on the ARQs of one instance (list, delete)."""
    return 'instance' in (kwargs.get('params') or {})


def bind_on(hostname):
    """A bind of ARQs to ``hostname``."""
    def match(kwargs):
        return any(op.get('op') == 'add' and op.get('path') == '/hostname'
                   and op.get('value') == hostname
                   for ops in (kwargs.get('json') or {}).values()
                   for op in ops)
    return match


class CyborgFault(fixtures.Fixture):
    """Cyborg answers HTTP 503 to the matching calls of Nova's client.

    :param method: HTTP method of the calls that fail (``get``, ...).
    :param match: predicate on the call's ``params`` and ``json``.
    :param skip: the first ``skip`` matching calls go through.

    ``injected`` counts the calls that failed. Usable with ``with``.
    """

    def __init__(self, method, match=by_instance, skip=0):
        super().__init__()
        self.method = method
        self.match = match
        self.skip = skip
        self.injected = 0
        self._lock = threading.Lock()

    def _fails(self, method, kwargs):
        if method != self.method or not self.match(kwargs):
            return False
        with self._lock:
            if self.skip:
                self.skip -= 1
                return False
            self.injected += 1
            return True

    def _setUp(self):
        real = cyborg_http.CyborgHTTPClient._call
        fault = self

        def _call(cyclient, op, method, url, expected, **kwargs):
            if fault._fails(method, kwargs):
                raise nc_exception.CyborgError(
                    op=op, status=503,
                    msg='Cyborg answered HTTP 503 to %s %s: injected fault'
                        % (method.upper(), url))
            return real(cyclient, op, method, url, expected, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg_http.CyborgHTTPClient._call', _call))


class LateBinds(fixtures.Fixture):
    """Cyborg accepts binds and finishes them only at ``finish()``.

    Nova hears nothing while it waits; ``finish()`` is Cyborg completing
    the bind (and sending its event) after Nova gave up.
    """

    def _setUp(self):
        self.held = []
        self._real = nc_client.CyborgClient.bind_arqs
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs',
            lambda cyclient, bindings: self.held.append(
                (cyclient, bindings))))

    def finish(self):
        if not self.held:
            raise AssertionError('Nova asked Cyborg for no bind')
        for cyclient, bindings in self.held:
            try:
                self._real(cyclient, bindings)
            except nova_exception.AcceleratorRequestBindingFailed:
                pass    # the ARQs were deleted meanwhile


class LifecycleFaultTest(test_lifecycle.ServerWithAcceleratorBase):

    # Helpers

    def action_error(self, action, event):
        """Wait for the failed ``event`` of the latest ``action``; return
        its details (the reason Nova recorded)."""
        event = self._wait_for_instance_action_event(
            self.server, action, event, 'Error')
        return str(event.get('details'))

    def wait_idle(self, status, **params):
        params.update({'status': status, 'OS-EXT-STS:task_state': None})
        return self._wait_for_server_parameter(self.server, params)

    def assert_fault(self, server, *texts):
        """The server's fault (shown in ERROR) says why."""
        self.assertIn('fault', server)
        for text in texts:
            self.assertIn(text, server['fault']['message'])

    def guest_bdfs(self):
        return self.hostdev_bdfs(self.api.get_server(self.server['id']))

    def vf(self):
        return [self.arq_bdf(arq) for arq in self.arqs]

    def hard_reboot(self):
        self._reboot_server(self.server, hard=True)

    def assert_nothing_leaked(self):
        """Cyborg has no ARQ but the server's; no device provider has an
        allocation but the server's."""
        self.assertEqual(
            [], [a['uuid'] for a in self.cyborg.list_arqs()
                 if a['instance_uuid'] != self.server['id']])
        mine = set(self._device_allocations(self.server['id']))
        for host in self.computes:
            for name, rp in self.device_rp_uuids(host).items():
                if rp not in mine:
                    self.assertEqual(
                        0, self._get_provider_usages(rp).get('FPGA', 0),
                        name)

    # Same host: the guest is rebuilt with the ARQs read from Cyborg
    # (nova_cyborg.flows.move.resize.instance_arqs).

    def _reboot_while_cyborg_cannot_list_arqs(self, reboot_type):
        # Nova reads the ARQs before any reboot (a soft one may fall back
        # to a hard one).
        with CyborgFault('get') as fault:
            self.api.post_server_action(
                self.server['id'], {'reboot': {'type': reboot_type}})
            reason = self.action_error('reboot', 'compute_reboot_instance')
        self.assertEqual(1, fault.injected)
        self.assertIn('HTTP 503', reason)
        self.wait_idle('ACTIVE')
        self.assert_arqs_kept('ACTIVE')
        self.assertEqual(self.vf(), self.guest_bdfs())

        self._reboot_server(self.server, hard=reboot_type == 'HARD')
        self.assert_running_on('compute1')

    def test_hard_reboot_while_cyborg_cannot_list_arqs(self):
        self._reboot_while_cyborg_cannot_list_arqs('HARD')

    def test_soft_reboot_while_cyborg_cannot_list_arqs(self):
        self._reboot_while_cyborg_cannot_list_arqs('SOFT')

    def test_pause_failing_in_libvirt(self):
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.guest.Guest.pause',
            side_effect=fakelibvirt.make_libvirtError(
                fakelibvirt.libvirtError, 'injected: cannot pause',
                error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR)))
        self.api.post_server_action(self.server['id'], {'pause': {}})
        reason = self.action_error('pause', 'compute_pause_instance')
        self.assertIn('libvirtError', reason)
        self.wait_idle('ACTIVE')
        self.assert_running_on('compute1')

    def test_host_reboot_while_cyborg_cannot_list_arqs(self):
        # The host reboots and nova-compute brings the server back while
        # Cyborg fails: the server goes to ERROR, keeping its ARQ and
        # allocation; a hard reboot brings it back with its VF.
        self.flags(resume_guests_state_on_host_boot=True)
        with CyborgFault('get') as fault:
            self.restart_compute_service(
                'compute1', keep_hypervisor_state=False,
                pci_info=fakelibvirt.HostPCIDevicesInfo(
                    num_pci=0, num_pfs=self.NUM_PFS, num_vfs=self.NUM_VFS))
            # Nova records no fault for a guest it could not resume.
            server = self._wait_for_server_parameter(
                self.server, {'status': 'ERROR',
                              'OS-EXT-STS:task_state': None},
                wait_for_fault_key=False)
        self.assertLessEqual(1, fault.injected)
        self.assertEqual(self.arqs[0]['uuid'],
                         self.cyborg.list_arqs(self.server['id'])[0]['uuid'])
        self.assertEqual(
            {1}, set(self._device_allocations(server['id']).values()))
        self.hard_reboot()
        self.assert_running_on('compute1')

    def test_start_while_cyborg_cannot_list_arqs(self):
        self._stop_server(self.server)
        with CyborgFault('get') as fault:
            self.api.post_server_action(self.server['id'], {'os-start': None})
            reason = self.action_error('start', 'compute_start_instance')
        self.assertEqual(1, fault.injected)
        self.assertIn('HTTP 503', reason)
        self.wait_idle('SHUTOFF')
        self.assert_arqs_kept('SHUTOFF')

        self._start_server(self.server)
        self.assert_running_on('compute1')

    def test_rescue_while_cyborg_cannot_list_arqs(self):
        # Rescue saves the domain XML in the instance directory, which the
        # harness never creates (see test_lifecycle).
        from nova.conf import CONF
        os.makedirs(os.path.join(CONF.instances_path, self.server['id']),
                    exist_ok=True)
        with CyborgFault('get') as fault:
            self.api.post_server_action(
                self.server['id'], {'rescue': {'adminPass': 'MySecretPass'}})
            server = self.wait_idle('ERROR')
        self.assertEqual(1, fault.injected)
        self.assert_fault(server, 'HTTP 503')
        self.assert_arqs_kept('ERROR')

        self.hard_reboot()
        self.assert_running_on('compute1')

    def test_suspend_while_cyborg_cannot_list_arqs(self):
        with CyborgFault('get') as fault:
            self.api.post_server_action(self.server['id'], {'suspend': {}})
            server = self.wait_idle('ERROR')
        self.assertEqual(1, fault.injected)
        self.assert_fault(server, 'HTTP 503')
        self.assert_arqs_kept('ERROR')
        # The VF was not unplugged.
        self.assertEqual(self.vf(), self.guest_bdfs())

        self.hard_reboot()
        self.assert_running_on('compute1')

    def test_resume_while_cyborg_cannot_list_arqs(self):
        self._suspend_server(self.server)
        with CyborgFault('get') as fault:
            self.api.post_server_action(self.server['id'], {'resume': {}})
            server = self.wait_idle('ERROR')
        self.assertEqual(1, fault.injected)
        self.assert_fault(server, 'HTTP 503')
        self.assert_arqs_kept('ERROR')
        # Not restored (the ARQs are read first): the guest stays saved,
        # its memory image kept, without the VF unplugged at suspend.
        self.assertEqual([], self.guest_bdfs())
        conn = self.computes['compute1'].driver._host.get_connection()
        self.assertTrue(conn.lookupByUUIDString(
            self.server['id']).hasManagedSaveImage(0))

        self.hard_reboot()
        self.assert_running_on('compute1')

    # Rebuild on the same host

    def test_rebuild_while_the_compute_cannot_list_arqs(self):
        # The conductor's read goes through, the compute's (after it
        # destroyed the guest) fails. Upstream's fault only says "Failure
        # getting accelerator resources."; the reason is in the log.
        with CyborgFault('get', skip=1) as fault:
            self.api.post_server_action(
                self.server['id'], {'rebuild': {'imageRef': base.IMAGE}})
            server = self.wait_idle('ERROR')
        self.assertEqual(1, fault.injected)
        self.assert_fault(server, 'accelerator')
        self.assertEqual([(a['uuid'], 'Bound') for a in self.arqs],
                         [(a['uuid'], a['state']) for a in
                          self.cyborg.list_arqs(self.server['id'])])

        # The allocation of its own host is kept (upstream's failure path
        # deleted it, as for a failed evacuation's destination): nothing
        # to heal.
        self.assertEqual(4, manage.PlacementCommands().heal_allocations(
            instance_uuid=self.server['id']))
        self._rebuild_server(self.server, base.IMAGE)
        self.assert_running_on('compute1')

    def test_rebuild_while_the_conductor_cannot_list_arqs(self):
        with CyborgFault('get') as fault:
            self.api.post_server_action(
                self.server['id'], {'rebuild': {'imageRef': base.IMAGE}})
            reason = self.action_error('rebuild', 'rebuild_server')
        self.assertEqual(1, fault.injected)
        self.assertIn('HTTP 503', reason)
        self.wait_idle('ACTIVE')
        self.assert_arqs_kept('ACTIVE')

        self._rebuild_server(self.server, base.IMAGE)
        self.assert_running_on('compute1')

    # Evacuate: the conductor deletes the ARQs of the dead host and binds
    # new ones on the destination.

    def _compute1_dies(self):
        self.start_accel_compute('compute2')
        self.compute1_service = self.compute_service('compute1')['id']
        self.computes['compute1'].stop()
        self.admin_api.put_service(self.compute1_service,
                                   {'forced_down': 'true'})

    def _assert_evacuated(self, source_returns=True):
        """ACTIVE on compute2 with a new ARQ, nothing leaked. Then, if
        ``source_returns``, compute1 comes back and cleans up after the
        evacuation (its allocation is kept until then)."""
        server = self.api.get_server(self.server['id'])
        self.assertEqual(('ACTIVE', 'compute2'),
                         (server['status'], server['OS-EXT-SRV-ATTR:host']))
        arqs = self.cyborg.list_arqs(self.server['id'])
        rps = set(self.device_rp_uuids('compute2').values())
        self.assertEqual(
            [('Bound', 'compute2', True)],
            [(a['state'], a['hostname'], a['device_rp_uuid'] in rps)
             for a in arqs])
        self.assertEqual([self.arq_bdf(arqs[0])], self.hostdev_bdfs(server))
        self.assertEqual(1, sum(self._fpga_usage('compute2').values()))
        self.assert_nothing_leaked()
        if not source_returns:
            return
        self.computes['compute1'].start()
        self.admin_api.put_service(self.compute1_service,
                                   {'forced_down': 'false'})
        self._wait_for_assert(lambda: self.assert_host_free('compute1'))
        self.assert_running_on('compute2', same_arqs=False,
                               moved_from='compute1')

    def _evacuate_with_bind_failing(self):
        self._compute1_dies()
        with CyborgFault('patch', bind_on('compute2')) as fault:
            self.admin_api.post_server_action(
                self.server['id'], {'evacuate': {}})
            reason = self.action_error('evacuate', 'rebuild_server')
        self.assertEqual(1, fault.injected)
        self.assertIn('HTTP 503', reason)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        # Nothing on the destination: the conductor deleted the ARQ it
        # created and freed the destination's allocation.
        self.assert_host_free('compute2')
        self.assert_nothing_leaked()

    def test_evacuate_with_the_bind_failing_leaks_nothing(self):
        self._evacuate_with_bind_failing()
        # An operator resets the server's state, then evacuates again.
        self.admin_api.post_server_action(
            self.server['id'], {'os-resetState': {'state': 'error'}})
        self._evacuate_server(self.server, expected_host='compute2',
                              expected_state='ACTIVE')
        self._assert_evacuated(source_returns=False)

    def test_evacuate_with_the_bind_failing_can_be_retried(self):
        self._evacuate_with_bind_failing()
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        # The migration's status and the server's state are set one after
        # the other: wait for both.
        self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None})
        # Since microversion 2.95 an evacuated server stays stopped.
        self._evacuate_server(self.server, expected_host='compute2',
                              expected_state='SHUTOFF')
        self._start_server(self.server)
        self._assert_evacuated()

    def _evacuate_bind_is_late(self):
        """Evacuate while Cyborg binds only after Nova's timeout."""
        self.flags(arq_binding_timeout=2)
        self._compute1_dies()
        with LateBinds() as binds:
            self.admin_api.post_server_action(
                self.server['id'], {'evacuate': {}})
            server = self.wait_idle('ERROR', **{
                'OS-EXT-SRV-ATTR:host': 'compute1'})
        self._wait_for_migration_status(self.server, ['failed'])
        binds.finish()
        # What follows binds in Nova's usual time.
        self.flags(arq_binding_timeout=300)
        return server

    def test_evacuate_with_a_late_bind_can_be_retried(self):
        self._evacuate_bind_is_late()
        # The second evacuation deletes the late ARQ first.
        self._evacuate_server(self.server, expected_host='compute2',
                              expected_state='ACTIVE')
        self._assert_evacuated()

    def test_evacuate_with_a_late_bind_leaks_nothing(self):
        server = self._evacuate_bind_is_late()
        self.assert_host_free('compute2')
        self.assert_nothing_leaked()
        self.assert_fault(server, 'Timed out')

    # Unshelve of an offloaded server: the conductor creates and binds new
    # ARQs.

    def _offload(self):
        self._shelve_server(self.server)
        self.assert_offloaded()

    def assert_offloaded(self):
        self.wait_idle('SHELVED_OFFLOADED', **{'OS-EXT-SRV-ATTR:host': None})
        self.assert_nothing_left(self.server['id'])
        self.assert_host_free('compute1')
        self.assert_nothing_leaked()

    def test_unshelve_with_the_bind_failing(self):
        self._offload()
        with CyborgFault('patch', bind_on('compute1')) as fault:
            self.api.post_server_action(self.server['id'], {'unshelve': None})
            reason = self.action_error('unshelve', 'schedule_instances')
        self.assertEqual(1, fault.injected)
        self.assertIn('HTTP 503', reason)
        self.assert_offloaded()

        self._unshelve_server(self.server)
        self.assert_running_on('compute1', same_arqs=False)

    def _unshelve_bind_is_late(self):
        """Unshelve while Cyborg binds only after Nova's timeout."""
        self.flags(arq_binding_timeout=2)
        self._offload()
        with LateBinds() as binds:
            self.api.post_server_action(self.server['id'], {'unshelve': None})
            reason = self.action_error('unshelve',
                                       'compute_unshelve_instance')
        self.wait_idle('SHELVED_OFFLOADED', **{'OS-EXT-SRV-ATTR:host': None})
        self.assertEqual({}, self.allocations(self.server['id']))
        binds.finish()
        # What follows binds in Nova's usual time.
        self.flags(arq_binding_timeout=300)
        return reason

    def test_unshelve_with_a_late_bind_can_be_retried(self):
        self._unshelve_bind_is_late()
        # The conductor deletes the late ARQ (Cyborg would refuse to bind
        # new ones next to it) before it binds new ones.
        self._unshelve_server(self.server)
        self.assert_running_on('compute1', same_arqs=False)
        self.assert_nothing_leaked()

    def test_unshelve_with_a_late_bind_leaks_nothing(self):
        reason = self._unshelve_bind_is_late()
        self.assert_offloaded()
        self.assertIn('Timed out', reason)

    # Shelve offload and delete: the compute deletes the ARQs.

    def test_shelve_offload_while_cyborg_cannot_delete_arqs(self):
        # The offload fails after the guest is destroyed: the server stays
        # SHELVED on its host, which keeps its ARQ and allocation.
        with CyborgFault('delete') as fault:
            self.api.post_server_action(self.server['id'], {'shelve': {}})
            reason = self.action_error('shelve', 'compute_shelve_instance')
        self.assertEqual(1, fault.injected)
        self.assertIn('HTTP 503', reason)
        server = self.wait_idle('SHELVED')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assert_arqs_kept('SHELVED')
        self.assert_nothing_leaked()

        self._shelve_offload_server(self.server)
        self.assert_offloaded()
        self._unshelve_server(self.server)
        self.assert_running_on('compute1', same_arqs=False)

    def test_delete_while_cyborg_cannot_delete_arqs(self):
        # As upstream: the user's delete succeeds (its guest and network
        # are gone by then); the ARQ Cyborg could not delete is left,
        # named in the log, for the cleanup of deleted servers.
        with CyborgFault('delete') as fault:
            self._delete_server(self.server)
        self.assertEqual(1, fault.injected)
        conn = self.computes['compute1'].driver._host.get_connection()
        self.assertEqual([], conn.listAllDomains())
        self.assertEqual({}, self.allocations(self.server['id']))
        self.assertEqual([(a['uuid'], 'Bound') for a in self.arqs],
                         [(a['uuid'], a['state']) for a in
                          self.cyborg.list_arqs(self.server['id'])])
        self.assertIn('Failed to delete the accelerator requests of the '
                      'instance; they are left in Cyborg',
                      self.stdlog.logger.output)

    # Snapshot and backup: Cyborg is not involved, the guest keeps its VF.

    def _image_fails(self, action):
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._live_snapshot'))
        upload = self.useFixture(fixtures.MockPatch(
            'nova.image.glance.API.update',
            side_effect=nova_exception.GlanceConnectionFailed(
                server='glance', reason='injected: HTTP 503')))
        body = self.api.post_server_action(self.server['id'], action)
        self.wait_idle('ACTIVE')
        self.assertTrue(upload.mock.called)
        # The half-made image is deleted.
        self.assertRaises(nova_exception.ImageNotFound,
                          glance.get_default_image_service().show,
                          None, body['image_id'])
        self.assert_running_on('compute1')

    def test_snapshot_with_the_upload_failing(self):
        self._image_fails({'createImage': {'name': 'accel-snap'}})

    def test_backup_with_the_upload_failing(self):
        self._image_fails({'createBackup': {
            'name': 'accel-backup', 'backup_type': 'daily', 'rotation': 100}})
