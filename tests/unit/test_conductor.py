"""Creating and binding ARQs in the conductor, against recorded HTTP."""

from unittest import mock
from urllib import parse

import fixtures
from nova.compute import vm_states
from nova import exception as nova_exception
from nova import objects
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import exception
from nova_cyborg.flows.boot import conductor
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import capability
from tests.unit import test_client

ARQS = test_client.ARQS


class CreateAndBindBase(test_client.ClientTestBase):
    """A conductor with recorded HTTP, Placement and the allocations."""

    def setUp(self):
        super().setUp()
        self.enable_service_token()
        self.instance = objects.Instance(
            uuid=uuids.inst, flavor=objects.Flavor(
                extra_specs={'accel:device_profile': 'dp1'}))
        self.spec = objects.RequestSpec(requested_resources=[
            objects.RequestGroup(requester_id='device_profile_0',
                                 provider_uuids=[uuids.rp0]),
            objects.RequestGroup(requester_id='device_profile_1',
                                 provider_uuids=[uuids.rp1])])
        self.requests.post(ARQS, status_code=201, json={'arqs': [
            test_client._arq(uuids.a0, 0), test_client._arq(uuids.a1, 1)]})
        self.requests.delete(ARQS, status_code=204)
        self.freed = []
        self.delete_failures = 0
        #: The traits of each node's provider, for capability.serves().
        self.node_traits = {}
        self.placement_reads = []
        self.addCleanup(capability._SERVES.clear)
        self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.allocations.FREE_BACKOFF', 0))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.report_client_singleton',
            lambda: self))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.ComputeNode.get_by_nodename',
            lambda *args: objects.ComputeNode(uuid=getattr(uuids, args[-1]))))

    def delete_allocation_for_instance(self, context, uuid, force=False):
        if self.delete_failures:
            self.delete_failures -= 1
            raise nova_exception.AllocationDeleteFailed(
                consumer_uuid=uuid, error='Deadlock found')
        self.freed.append((uuid, force))

    def get(self, url, version=None, global_request_id=None):
        """``GET /resource_providers?name=&required=`` of the report
        client (capability.serves)."""
        self.placement_reads.append(url)
        query = parse.parse_qs(parse.urlsplit(url).query)
        name, required = query['name'][0], query['required'][0]
        found = required in self.node_traits.get(name, ())
        return mock.Mock(__bool__=lambda _self: True, json=lambda: {
            'resource_providers': [{'name': name}] if found else []})

    def remove_provider_tree_from_instance_allocation(self, context, uuid,
                                                      root_rp_uuid):
        self.freed.append((uuid, root_rp_uuid))
        return True

    def call(self, networks=None):
        return conductor.create_and_bind_arqs(
            self.context, self.instance, 'node1', self.spec, networks)

    def methods(self):
        return [(r.method, r.qs.get('arqs')) for r in
                self.requests.request_history]


class CreateAndBindTest(CreateAndBindBase):

    def test_create_and_bind(self):
        self.requests.patch(ARQS, status_code=202)
        self.assertEqual({uuids.a0, uuids.a1}, set(self.call()))
        patch = self.requests.last_request.json()
        self.assertEqual(
            {'path': '/device_rp_uuid', 'op': 'add', 'value': uuids.rp1},
            patch[uuids.a1][0])
        self.assertEqual({'node1'}, {ops[1]['value']
                                     for ops in patch.values()})
        self.assertEqual({uuids.inst}, {ops[2]['value']
                                        for ops in patch.values()})

    def test_no_profile_no_call(self):
        # None: the patched conductor runs upstream's code (patch 0002a).
        self.instance.flavor.extra_specs = {}
        self.assertIsNone(self.call())
        self.assertFalse(self.requests.called)

    def test_bind_failure_deletes_created_arqs(self):
        self.requests.patch(ARQS, status_code=500)
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.call)
        self.assertIn('HTTP 500', exc.format_message())
        # Already deleted: Nova's own cleanup of exc.arqs finds nothing.
        self.assertEqual([], exc.arqs)
        self.assertEqual(1, exc.format_message().count('Failed to bind'))
        # Never on a host: the scheduler's allocation is freed too.
        self.assertEqual([(uuids.inst, True)], self.freed)
        self.assertEqual(
            [('POST', None), ('PATCH', None),
             ('DELETE', ['%s,%s' % (uuids.a0, uuids.a1)])], self.methods())

    def test_bind_failure_allocation_free_retried(self):
        # Placement answers 500 (a database deadlock) twice.
        self.delete_failures = 2
        self.requests.patch(ARQS, status_code=500)
        self.assertRaises(exception.AcceleratorRequestBindingFailed,
                          self.call)
        self.assertEqual([(uuids.inst, True)], self.freed)
        self.assertEqual(0, self.delete_failures)

    def test_arqs_not_deleted_are_kept_with_the_server(self):
        # Cyborg fails the bind, then the cleanup: the ARQs, no longer
        # reachable by a delete by instance, are remembered for deletion
        # with the server (nova_cyborg.flows.cleanup.delete).
        self.instance.system_metadata = {}
        self.requests.patch(ARQS, status_code=500)
        self.requests.delete(ARQS, status_code=503)
        self.useFixture(fixtures.MockPatchObject(objects.Instance, 'save'))
        self.assertRaises(exception.AcceleratorRequestBindingFailed,
                          self.call)
        self.assertEqual(
            {'nova_cyborg_retired_arq_0': uuids.a0,
             'nova_cyborg_retired_arq_1': uuids.a1},
            self.instance.system_metadata)
        objects.Instance.save.assert_called_once_with()

    def test_evacuation_failure_frees_the_destination_only(self):
        # The scheduler merged the destination into the allocation that
        # holds the current host: only the destination's part goes.
        self.instance.host = 'source'
        self.instance.node = 'source'
        self.requests.patch(ARQS, status_code=500)
        self.assertRaises(exception.AcceleratorRequestBindingFailed,
                          self.call)
        self.assertEqual([(uuids.inst, uuids.node1)], self.freed)

    def test_failure_on_the_current_node_frees_nothing(self):
        self.instance.host = 'node1'
        self.instance.node = 'node1'
        self.requests.patch(ARQS, status_code=500)
        self.assertRaises(exception.AcceleratorRequestBindingFailed,
                          self.call)
        self.assertEqual([], self.freed)

    def test_offloaded_instance_loses_its_leftover_arqs_first(self):
        # Left by an unshelve whose bind Cyborg finished after Nova gave
        # up: Cyborg would refuse to bind new ARQs next to them.
        self.instance.vm_state = vm_states.SHELVED_OFFLOADED
        self.requests.patch(ARQS, status_code=202)
        self.call()
        # Under its own UUID only: it never live-migrated, nothing is
        # bound under its alias (nova_cyborg.model.bookkeeping.holders).
        self.assertEqual([('DELETE', None), ('POST', None), ('PATCH', None)],
                         self.methods())
        self.assertEqual([uuids.inst],
                         self.requests.request_history[0].qs['instance'])

    def test_offloaded_live_migrated_instance_both_owners(self):
        self.instance.vm_state = vm_states.SHELVED_OFFLOADED
        self.instance.system_metadata = {}
        bookkeeping.set_owner(self.instance, bookkeeping.alias(uuids.inst))
        self.requests.patch(ARQS, status_code=202)
        with mock.patch.object(self.instance, 'save') as save:
            self.call()
        # Bound under its own UUID now: the record is gone, saved.
        save.assert_called_once_with()
        self.assertEqual(uuids.inst, bookkeeping.arq_owner(self.instance))
        self.assertEqual([('DELETE', None)] * 2, self.methods()[:2])
        self.assertEqual([[uuids.inst], [bookkeeping.alias(uuids.inst)]],
                         [r.qs['instance']
                          for r in self.requests.request_history[:2]])
        self.assertEqual([('POST', None), ('PATCH', None)],
                         self.methods()[2:])

    def test_leftover_delete_failure_fails_the_unshelve(self):
        self.instance.vm_state = vm_states.SHELVED_OFFLOADED
        self.requests.delete(ARQS, status_code=503)
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.call)
        self.assertIn('HTTP 503', exc.format_message())
        self.assertEqual([('DELETE', None)], self.methods())
        self.assertEqual([(uuids.inst, True)], self.freed)

    def test_active_instance_has_no_leftovers_to_delete(self):
        self.instance.vm_state = vm_states.ACTIVE
        self.requests.patch(ARQS, status_code=202)
        self.call()
        self.assertEqual([('POST', None), ('PATCH', None)], self.methods())

    def test_success_keeps_allocation(self):
        self.requests.patch(ARQS, status_code=202)
        self.call()
        self.assertEqual([], self.freed)

    def test_missing_provider_deletes_created_arqs(self):
        self.spec.requested_resources[1].provider_uuids = []
        exc = self.assertRaises(exception.AcceleratorRequestBindingFailed,
                                self.call)
        self.assertIn('device_profile_1', exc.format_message())
        self.assertEqual(
            [('POST', None), ('DELETE', ['%s,%s' % (uuids.a0, uuids.a1)])],
            self.methods())

    def test_create_failure_leaves_nothing_to_delete(self):
        self.requests.post(ARQS, status_code=503)
        self.assertRaises(exception.AcceleratorRequestBindingFailed,
                          self.call)
        self.assertEqual([('POST', None)], self.methods())

    def test_port_profile_must_be_one_device(self):
        self.instance.flavor.extra_specs = {}
        net = objects.NetworkRequest(port_id=uuids.port,
                                     device_profile='dp1')
        exc = self.assertRaises(
            exception.AcceleratorRequestBindingFailed, self.call,
            objects.NetworkRequestList(objects=[net]))
        self.assertIn('a port takes exactly one', exc.format_message())
        self.assertEqual(
            [('POST', None), ('DELETE', ['%s,%s' % (uuids.a0, uuids.a1)])],
            self.methods())
