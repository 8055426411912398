"""Delete an accelerated server while its nova-compute is down.

The API deletes such a server locally (``API._local_delete``): it deletes
the server's ARQs and allocations itself, and the domain is left on the
host until the restarted nova-compute reaps it
(``_cleanup_running_deleted_instances``, with
``running_deleted_instance_action=reap``). What a user and an operator
check afterwards: the server is gone, Cyborg holds no ARQ for it and
Placement no allocation, the host has no domain for it, and its attach
handle is free again, so a new server gets the same (only) VF.
"""

# base patches threading before Nova is imported.
from tests.functional import base  # noqa: I100

from nova import context as nova_context  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402


class ComputeDownTest(base.AcceleratorTestBase):

    def _domain_uuids(self, hostname):
        conn = self.computes[hostname].driver._host.get_connection()
        flags = (fakelibvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE |
                 fakelibvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE)
        return {dom.UUIDString() for dom in conn.listAllDomains(flags)}

    def _restart(self, hostname):
        self.restart_compute_service(hostname)
        self.force_down(hostname, False)
        # What the restarted nova-compute does first (a periodic task run
        # immediately), done here explicitly: reap the domains of deleted
        # servers.
        self.computes[hostname].manager._cleanup_running_deleted_instances(
            nova_context.get_admin_context())

    def _boot_down_host(self):
        """Boot on compute1 (one VF only: a second server can only boot if
        the first one's attach handle was released), then take compute1
        down. Returns the flavor, the server and its VF."""
        self.start_accel_compute('compute1', num_vfs=1)
        _name, flavor = self.create_profile_flavor([{'resources:FPGA': '1'}])
        server = self.boot(flavor)
        bdf = self.arq_bdf(self.assert_accelerated(server, 1)[0])
        self.computes['compute1'].stop()
        self.force_down('compute1', True)
        return flavor, server, bdf

    def _assert_released_after_restart(self, flavor, server, bdf):
        """Restart compute1: the domain is reaped, nothing is left, and a
        new server gets the same, only, VF."""
        self._restart('compute1')
        self.assertNotIn(server['id'], self._domain_uuids('compute1'))
        self.assert_nothing_left(server['id'])
        server2 = self.boot(flavor)
        arqs2 = self.assert_accelerated(server2, 1)
        self.assertEqual(bdf, self.arq_bdf(arqs2[0]))
        return server2

    def test_delete_while_compute_down_then_restart(self):
        flavor, server, bdf = self._boot_down_host()

        # A local delete in the API: nova-compute is down.
        self._delete_server(server)
        self.assert_nothing_left(server['id'])
        # The host kept the domain: nobody could tell it.
        self.assertIn(server['id'], self._domain_uuids('compute1'))

        server2 = self._assert_released_after_restart(flavor, server, bdf)
        self._delete_server(server2)
        self.assert_nothing_left(server2['id'])

    def test_cyborg_unreachable_during_local_delete(self):
        # The API could not delete the ARQ (it logs and destroys the
        # server anyway): the restarted nova-compute, reaping the domain,
        # deletes it with its own (token-less) context.
        flavor, server, bdf = self._boot_down_host()
        # Each retry fails the same: a short fixed delay instead of
        # keystoneauth's backoff (31.5 s for the 6 retries of a delete).
        self.flags(endpoint_override='http://127.0.0.1:9',
                   connect_retry_delay=0.1, group='cyborg')
        self._delete_server(server)
        self.flags(endpoint_override=self.cyborg.endpoint, group='cyborg')
        arqs = self.cyborg.list_arqs(server['id'])
        self.assertEqual(['Bound'], [arq['state'] for arq in arqs])
        self.assertEqual({}, self.allocations(server['id']))

        self._assert_released_after_restart(flavor, server, bdf)
