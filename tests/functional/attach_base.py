"""The base of the tests of accelerators attached to servers.

On compute1 with three FPGA VFs, a server gets accelerators attached
with addAccelerator (and detached with removeAccelerator) by its owner
(project A) or a cloud admin of project C, and is evacuated or otherwise
moved: the callers' steps and what the owner and an operator check
afterwards.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import contextlib  # noqa: E402

import fixtures  # noqa: E402

from tests.functional.harness import identity  # noqa: E402

PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
OWNER_PROJECT = identity.OWNER[1]
#: The compute manager's event of each accelerator server action.
ACTION_EVENTS = {'addAccelerator': 'compute_add_accelerator',
                 'removeAccelerator': 'compute_remove_accelerator'}


class AttachSteps(object):
    """The callers' steps and checks; mixed into an AcceleratorTestBase."""

    #: The project a server's ARQs belong to (``[nova_cyborg]
    #: arq_project = server``: the server's).
    ARQ_PROJECT = OWNER_PROJECT

    def without_disks(self):
        """The harness writes no disks: nothing to copy or move aside."""
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._get_instance_disk_info',
            return_value=[]))

    # Callers and their steps

    @contextlib.contextmanager
    def acting(self, api):
        """Nova's helpers act (and wait) with ``api`` meanwhile."""
        saved = self.api, self.admin_api
        self.api = api
        if api is self.cloud_admin_api:
            self.admin_api = api
        try:
            yield
        finally:
            self.api, self.admin_api = saved

    def accelerator_action(self, api, server, action, dp):
        """``api`` attaches (``addAccelerator``) or detaches
        (``removeAccelerator``) device profile ``dp``; waits until the
        compute manager's event succeeded."""
        api.post_server_action(server['id'],
                               {action: {'device_profile': dp}})
        self._wait_for_instance_action_event(
            server, action, ACTION_EVENTS[action], 'Success')

    def admin_evacuates(self, server, to_host):
        """compute1 fails; the cloud admin evacuates; the owner starts the
        server (since 2.95 it stays stopped on its new host). Returns
        compute1's service."""
        service = self.compute_service('compute1')
        self.computes['compute1'].stop()
        self.admin_api.put_service(service['id'], {'forced_down': 'true'})
        with self.acting(self.cloud_admin_api):
            self._evacuate_server(server, expected_host=to_host)
        with self.acting(self.owner_api):
            self._start_server(server)
        return service

    def old_host_comes_back(self, service):
        """compute1 comes back and cleans up the evacuated server (its
        devices stay allocated to the server until then)."""
        self.computes['compute1'].start()
        self.admin_api.put_service(service['id'], {'forced_down': 'false'})
        self._wait_for_assert(
            lambda: self.assert_host_free('compute1'), max_retries=40)

    # What the owner and an operator check

    def assert_owner_has_devices(self, server, hostname, n_arqs):
        """ACTIVE on ``hostname``, one hostdev per ARQ; the ARQs Bound to
        the host's providers, in the owner's project."""
        self.assertEqual(
            'ACTIVE', self.owner_api.get_server(server['id'])['status'])
        # The host, as an operator sees it.
        server = self.admin_api.get_server(server['id'])
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        arqs = self.assert_accelerated(server, n_arqs)
        rps = set(self.device_rp_uuids(hostname).values())
        self.assertEqual({(self.ARQ_PROJECT, True)},
                         {(a['project_id'], a['device_rp_uuid'] in rps)
                          for a in arqs})
        return arqs

    def assert_host_free(self, hostname):
        """No ARQ on ``hostname``, none of its devices allocated."""
        self.assertEqual([], [a for a in self.cyborg.list_arqs()
                              if a['hostname'] == hostname])
        self.assertEqual(
            {0}, {self._get_provider_usages(rp).get('FPGA', 0)
                  for rp in self.device_rp_uuids(hostname).values()})


class AttachTestBase(AttachSteps, base.AcceleratorTestBase):
    """compute1 with three FPGA VFs; ``self.dp`` and ``self.accel_flavor``
    ask for one of them."""

    NUM_VFS = 3

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')
        self.dp, self.accel_flavor = self.create_profile_flavor(PROFILE)
