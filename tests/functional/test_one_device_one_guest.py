"""One device, one guest: a guest never starts with a device it is not
given.

compute1 has one FPGA VF. The owner's server P once had it (attached,
then removed while P was stopped); a cloud admin of a third project boots
Q, which gets that VF. Whatever path starts P again, P runs without it
and Q keeps it: the definition P keeps is cleaned when the device is
removed, and every start of a guest removes a device that neither its
Bound ARQs nor Nova's own claims give it (a *stray*, planted here in P's
definition behind Nova's back, as a definition saved by another tool or
an older release would hold it), with a WARNING and an instance action
event. The reverse holds too: a device attached while the server was
stopped is in the guest after a start from its saved definition.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

import os  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402

from nova_cyborg.virt import guard  # noqa: E402
from tests.functional.harness import waits  # noqa: E402

PROFILE = attach_base.PROFILE


class OneDeviceOneGuestBase(attach_base.AttachTestBase):
    """compute1 with one VF; helpers to see and plant devices."""

    NUM_VFS = 1

    def setUp(self):
        super().setUp()
        self.without_disks()
        self.plain = self._create_flavor(name='plain')
        (self.vf,) = self.handle_bdfs('compute1')

    def instance_dir(self, server):
        # Rescue saves the domain XML there; the harness writes no disks.
        from nova.conf import CONF
        os.makedirs(os.path.join(CONF.instances_path, server['id']),
                    exist_ok=True)

    def domain(self, server):
        conn = self.computes['compute1'].driver._host.get_connection()
        return conn.lookupByUUIDString(server['id'])

    def bdfs(self, server):
        """The BDFs of the server's ``<hostdev>``s, running or not."""
        return self.hostdev_bdfs(self.admin_api.get_server(server['id']))

    def plant(self, server, bdf):
        """Add ``bdf`` to the server's definition, as another tool would
        (Nova and Cyborg know nothing of it)."""
        domain, bus, rest = bdf.split(':')
        slot, function = rest.split('.')
        self.domain(server).attachDeviceFlags(
            "<hostdev mode='subsystem' type='pci' managed='yes'><source>"
            "<address domain='0x%s' bus='0x%s' slot='0x%s' "
            "function='0x%s'/></source></hostdev>" % (
                domain, bus, slot, function),
            fakelibvirt.VIR_DOMAIN_AFFECT_CONFIG)
        self.assertIn(bdf, self.bdfs(server))

    def boot_q(self):
        """A cloud admin of a third project boots Q: it gets the VF."""
        with self.acting(self.cloud_admin_api):
            server_q = self.boot(self.accel_flavor)
        arqs = self.assert_accelerated(server_q, 1)
        self.assertEqual(self.vf, self.arq_bdf(arqs[0]))
        return server_q, arqs

    def assert_q_untouched(self, server_q, arqs):
        server_q = self.cloud_admin_api.get_server(server_q['id'])
        self.assertEqual(arqs, self.assert_accelerated(server_q, 1))

    def assert_p_plain(self, server_p):
        """P, as its owner and an operator see it: ACTIVE, no device, no
        ARQ, nothing allocated on the device providers."""
        self.assertEqual(
            'ACTIVE', self.owner_api.get_server(server_p['id'])['status'])
        # The host, as an operator sees it.
        server_p = self.admin_api.get_server(server_p['id'])
        self.assertEqual([], self.bdfs(server_p))
        self.assertEqual([], self.cyborg.list_arqs(server_p['id']))
        self.assertEqual({}, self._device_allocations(server_p['id']))

    def events(self, server, action):
        """{event: result} of the newest ``action`` of the server."""
        def newest():
            actions = [a for a in self.admin_api.get_instance_actions(
                server['id']) if a['action'] == action]
            return actions[0] if actions else None
        found = waits.wait_until(newest, 'a %s action' % action)
        return {e['event']: e['result'] for e in
                self.admin_api.get_instance_action_details(
                    server['id'], found['request_id'])['events']}


class DetachedDeviceTest(OneDeviceOneGuestBase):
    """The four steps of issue 26, as two tenants' users and an operator
    run them."""

    def _stopped_p_without_its_device(self):
        with self.acting(self.owner_api):
            server_p = self.boot(self.plain)
            self.accelerator_action(self.owner_api, server_p,
                                    'addAccelerator', self.dp)
            self.assertEqual([self.vf], self.bdfs(server_p))
            self._stop_server(server_p)
            self.accelerator_action(self.owner_api, server_p,
                                    'removeAccelerator', self.dp)
        return server_p

    def test_removed_while_stopped_never_comes_back(self):
        server_p = self._stopped_p_without_its_device()
        # The definition lost it with the detach.
        self.assertEqual([], self.bdfs(server_p))
        server_q, arqs = self.boot_q()
        self.instance_dir(server_p)
        with self.acting(self.owner_api):
            self._rescue_server(server_p)
            self._unrescue_server(server_p)
        self.assert_p_plain(server_p)
        self.assert_q_untouched(server_q, arqs)

    def test_definition_of_an_older_detach_is_cleaned_at_start(self):
        """The detach left the device in P's definition (a compute of a
        release that did not clean it): unrescue removes it, says so."""
        with fixtures.MockPatch('nova_cyborg.virt.hotplug._redefine'):
            server_p = self._stopped_p_without_its_device()
        self.assertEqual([self.vf], self.bdfs(server_p))
        server_q, arqs = self.boot_q()
        self.instance_dir(server_p)
        logs = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        with self.acting(self.owner_api):
            self._rescue_server(server_p)
            self._unrescue_server(server_p)
        self.assert_p_plain(server_p)
        self.assert_q_untouched(server_q, arqs)
        self.assertEqual('Success', self.events(server_p, 'unrescue').get(
            guard.EVENT_REMOVED))
        self.assertIn('Removing devices no accelerator request', logs.output)
        self.assertIn(self.vf, logs.output)

    def test_attached_while_stopped_is_there_after_unrescue(self):
        with self.acting(self.owner_api):
            server_p = self.boot(self.plain)
            self._stop_server(server_p)
            self.accelerator_action(self.owner_api, server_p,
                                    'addAccelerator', self.dp)
        # The definition got it with the attach.
        self.assertEqual([self.vf], self.bdfs(server_p))
        self.instance_dir(server_p)
        with self.acting(self.owner_api):
            self._rescue_server(server_p)
            self._unrescue_server(server_p)
        self.assert_owner_has_devices(server_p, 'compute1', 1)

    def test_missing_device_is_added_at_start(self):
        """The attach did not reach the stopped guest's definition: the
        start from it adds the Bound ARQ's device."""
        with self.acting(self.owner_api):
            server_p = self.boot(self.plain)
            self._stop_server(server_p)
            with fixtures.MockPatch('nova_cyborg.virt.hotplug._redefine'):
                self.accelerator_action(self.owner_api, server_p,
                                        'addAccelerator', self.dp)
        self.assertEqual([], self.bdfs(server_p))
        self.instance_dir(server_p)
        with self.acting(self.owner_api):
            self._rescue_server(server_p)
            self._unrescue_server(server_p)
        self.assert_owner_has_devices(server_p, 'compute1', 1)
        self.assertEqual('Success', self.events(server_p, 'unrescue').get(
            guard.EVENT_ADDED))


class StrayOnEveryStartPathTest(OneDeviceOneGuestBase):
    """Q holds the VF; P (the owner's, without accelerators) has it in its
    definition. Each start path gives P a guest without it."""

    def setUp(self):
        super().setUp()
        self.server_q, self.q_arqs = self.boot_q()
        with self.acting(self.owner_api):
            self.server_p = self.boot(self.plain)
        self.plant(self.server_p, self.vf)

    def assert_cleaned(self, action=None):
        self.assert_p_plain(self.server_p)
        self.assert_q_untouched(self.server_q, self.q_arqs)
        if action:
            self.assertEqual('Success', self.events(
                self.server_p, action).get(guard.EVENT_REMOVED))

    def test_soft_reboot(self):
        with self.acting(self.owner_api):
            self._reboot_server(self.server_p)
        self.assert_cleaned('reboot')

    def test_hard_reboot(self):
        with self.acting(self.owner_api):
            self._reboot_server(self.server_p, hard=True)
        self.assert_cleaned()

    def test_stop_start(self):
        with self.acting(self.owner_api):
            self._stop_server(self.server_p)
            self._start_server(self.server_p)
        self.assert_cleaned()

    def test_rescue_unrescue(self):
        self.instance_dir(self.server_p)
        with self.acting(self.owner_api):
            self._rescue_server(self.server_p)
            self.assertEqual([], self.bdfs(self.server_p))
            self._unrescue_server(self.server_p)
        self.assert_cleaned('unrescue')

    def test_suspend_resume(self):
        with self.acting(self.owner_api):
            self._suspend_server(self.server_p)
            self._resume_server(self.server_p)
        self.assert_cleaned('resume')

    def test_rebuild(self):
        with self.acting(self.owner_api):
            self._rebuild_server(self.server_p, attach_base.base.IMAGE)
        self.assert_cleaned()

    def test_host_boot(self):
        # The host rebooted: libvirt keeps the definitions, every guest
        # is off; nova-compute starts them again.
        self.flags(resume_guests_state_on_host_boot=True)
        for server in (self.server_p, self.server_q):
            self.domain(server).destroy()
        self.restart_compute_service('compute1', keep_hypervisor_state=True)
        self.assert_cleaned()

    def test_refused_when_it_cannot_be_checked(self):
        """Q's ARQs cannot be read as its guest would start again (Cyborg
        unreachable when it is unrescued): it is not started, ERROR with
        the reason; its ARQ stays Bound with its allocation, and the
        operator's hard reboot once Cyborg is back gives it its VF."""
        self.instance_dir(self.server_q)
        endpoint = self.cyborg.endpoint
        with self.acting(self.cloud_admin_api):
            self._rescue_server(self.server_q)
            # Every retry of the read fails the same: a short fixed delay
            # instead of keystoneauth's backoff (31.5 s for 6 retries).
            self.flags(endpoint_override='http://127.0.0.1:9/accelerator/v2',
                       connect_retry_delay=0.1, group='cyborg')
            self.cloud_admin_api.post_server_action(
                self.server_q['id'], {'unrescue': None})
            server_q = self._wait_for_state_change(self.server_q, 'ERROR')
        self.assertIn('cannot be checked', server_q['fault']['message'])
        (arq,) = self.cyborg.list_arqs(self.server_q['id'])
        self.assertEqual(('Bound', self.vf), (arq['state'], self.arq_bdf(arq)))
        self.assertEqual({arq['device_rp_uuid']: 1},
                         self._device_allocations(self.server_q['id']))
        self.flags(endpoint_override=endpoint, group='cyborg')
        with self.acting(self.cloud_admin_api):
            self._reboot_server(self.server_q, hard=True)
        self.assert_q_untouched(self.server_q, self.q_arqs)
