"""Creating and binding ARQs in the conductor, against recorded HTTP."""

import fixtures
from nova import objects
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import conductor
from nova_cyborg import exception
from tests.unit import test_client

ARQS = test_client.ARQS


class CreateAndBindTest(test_client.ClientTestBase):

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
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.report_client_singleton',
            lambda: self))

    def delete_allocation_for_instance(self, context, uuid, force=False):
        self.freed.append((uuid, force))

    def call(self, networks=None):
        return conductor.create_and_bind_arqs(
            self.context, self.instance, 'node1', self.spec, networks)

    def methods(self):
        return [(r.method, r.qs.get('arqs')) for r in
                self.requests.request_history]

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
        self.instance.flavor.extra_specs = {}
        self.assertEqual([], self.call())
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

    def test_failure_keeps_allocation_of_instance_on_a_host(self):
        # Evacuation: the allocation also holds the current host.
        self.instance.host = 'source'
        self.requests.patch(ARQS, status_code=500)
        self.assertRaises(exception.AcceleratorRequestBindingFailed,
                          self.call)
        self.assertEqual([], self.freed)

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
