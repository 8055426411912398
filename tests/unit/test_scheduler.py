from unittest import mock

from nova import exception as nova_exception
from nova import objects
from oslo_config import fixture as config_fixture
import testtools

from nova_cyborg import conf
from nova_cyborg.flows import scheduling as scheduler

CANDIDATES = [{'mappings': {'device_profile_0': ['rp%d' % i]}}
              for i in range(4)]


class ClaimTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.flags = self.useFixture(config_fixture.Config(conf.CONF))
        patcher = mock.patch('nova.scheduler.utils.claim_resources')
        self.claim_resources = patcher.start()
        self.addCleanup(patcher.stop)

    def _claim(self, spec=None):
        self.spec = spec or mock.Mock(
            flavor=mock.Mock(extra_specs={'accel:device_profile': 'dp'}),
            requested_resources=[])
        return scheduler.claim('ctx', 'placement', self.spec, 'uuid',
                               CANDIDATES, allocation_request_version='1.36')

    def test_first_candidate(self):
        self.claim_resources.return_value = True
        self.assertIs(CANDIDATES[0], self._claim())
        self.claim_resources.assert_called_once_with(
            'ctx', 'placement', self.spec, 'uuid', CANDIDATES[0],
            allocation_request_version='1.36')

    def test_next_candidate_when_the_first_is_taken(self):
        # The previous server of a multi-create took rp0.
        self.claim_resources.side_effect = [False, False, True]
        self.assertIs(CANDIDATES[2], self._claim())
        self.assertEqual(3, self.claim_resources.call_count)

    def test_none_claimable(self):
        self.claim_resources.return_value = False
        self.assertIsNone(self._claim())
        self.assertEqual(4, self.claim_resources.call_count)

    def test_limit(self):
        self.flags.config(claim_candidates_per_host=2, group='nova_cyborg')
        self.claim_resources.return_value = False
        self.assertIsNone(self._claim())
        self.assertEqual(2, self.claim_resources.call_count)

    def test_one_is_upstream_behaviour(self):
        self.flags.config(claim_candidates_per_host=1, group='nova_cyborg')
        self.claim_resources.side_effect = [False, True]
        self.assertIsNone(self._claim())
        self.assertEqual(1, self.claim_resources.call_count)

    def test_server_without_accelerators_first_candidate_only(self):
        # Upstream's behaviour, whatever the option says.
        self.claim_resources.side_effect = [False, True]
        spec = mock.Mock(flavor=mock.Mock(extra_specs={}),
                         requested_resources=[
                             mock.Mock(requester_id='port-uuid')])
        self.assertIsNone(self._claim(spec))
        self.assertEqual(1, self.claim_resources.call_count)

    def test_port_device_profile_tries_more(self):
        self.claim_resources.side_effect = [False, True]
        spec = mock.Mock(flavor=mock.Mock(extra_specs={}),
                         requested_resources=[
                             mock.Mock(requester_id='device_profile_0p1')])
        self.assertIs(CANDIDATES[1], self._claim(spec))


def _spec(root_required):
    return objects.RequestSpec(
        request_level_params=objects.RequestLevelParams(
            root_required=root_required))


class NoValidHostTest(testtools.TestCase):
    """The NoValidHost the scheduler raises for a server with
    accelerators says which hosts were considered."""

    def test_names_the_capability_traits_required(self):
        exc = nova_exception.NoValidHost(
            reason='There are not enough hosts available.')
        raised = scheduler.no_valid_host(
            _spec({'CUSTOM_NOVA_CYBORG_1_1', 'COMPUTE_STATUS_DISABLED'}),
            exc)
        self.assertIsInstance(raised, nova_exception.NoValidHost)
        message = raised.format_message()
        self.assertIn('There are not enough hosts available. Only hosts '
                      'reporting CUSTOM_NOVA_CYBORG_1_1 (the nova-cyborg '
                      'capabilities this server needs) were considered.',
                      message)
        self.assertNotIn('COMPUTE_STATUS_DISABLED', message)

    def test_empty_reason(self):
        raised = scheduler.no_valid_host(
            _spec({'CUSTOM_NOVA_CYBORG_1_0'}),
            nova_exception.NoValidHost(reason=''))
        self.assertIn('No valid host was found. Only hosts reporting '
                      'CUSTOM_NOVA_CYBORG_1_0',
                      raised.format_message())

    def test_upstream_exception_for_other_requests(self):
        for spec in (_spec({'HW_CPU_X86_AVX2'}), _spec(set()),
                     objects.RequestSpec()):
            exc = nova_exception.NoValidHost(reason='')
            self.assertIs(exc, scheduler.no_valid_host(spec, exc))
