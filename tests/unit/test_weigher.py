from unittest import mock

from nova import context as nova_context
from nova import objects
from nova.scheduler import weights
from oslo_config import fixture as config_fixture
import testtools

from nova_cyborg import conf
from nova_cyborg import weigher

objects.register_all()

F_A = 'a1a1a1a1b2b2b2b2c3c3c3c3d4d4d4d4'
F_B = 'f0f0f0f01e1e1e1e2d2d2d2d3c3c3c3c'
T_A = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_' + F_A.upper()
T_B = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_' + F_B.upper()


class Resp(object):

    def __init__(self, body, status_code=200):
        self._body = body
        self.status_code = status_code

    def json(self):
        return self._body


class FakePlacement(object):
    """Answers the weigher's GETs from ``traits`` and ``usages`` of
    providers; records the URLs."""

    def __init__(self, traits, usages, fail=()):
        self.traits = traits
        self.usages = usages
        self.fail = fail
        self.urls = []

    def get(self, url, version=None, global_request_id=None):
        self.urls.append(url)
        if any(f in url for f in self.fail):
            return Resp({}, 500)
        if url.startswith('/traits?name=startswith:'):
            prefix = url.split(':', 1)[1]
            return Resp({'traits': sorted(
                {t for ts in self.traits.values() for t in ts
                 if t.startswith(prefix)})})
        if url.startswith('/resource_providers?required=in:'):
            wanted = set(url.split('required=in:', 1)[1].split(','))
            return Resp({'resource_providers': [
                {'uuid': rp} for rp, ts in self.traits.items()
                if ts & wanted]})
        rp = url.split('/')[2]
        return Resp({'usages': self.usages.get(rp, {})})


def host(name, *rps):
    return mock.Mock(
        host=name, nodename=name, aggregates=[],
        allocation_candidates=[
            {'mappings': {'device_profile_0': [rp]}} for rp in rps])


def spec(groups=None, dp='dp'):
    requested = [objects.RequestGroup(
        requester_id='device_profile_0', resources={'FPGA': 1},
        required_traits=set(groups or ()))]
    return objects.RequestSpec(
        instance_uuid='6b2b5e6c-1111-2222-3333-444455556666',
        flavor=objects.Flavor(extra_specs={'accel:device_profile': dp}
                              if dp else {}),
        requested_resources=requested)


class WeigherTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.flags = self.useFixture(config_fixture.Config(conf.CONF))
        self.placement = FakePlacement(
            traits={'rpA': {T_A}, 'rpB': {T_B}, 'rpB2': {T_B},
                    'rpBlank': set(), 'rpBlank2': set()},
            usages={'rpB': {'FPGA': 1}, 'rpBlank2': {'FPGA': 1}})
        self.useFixture_patch(
            'nova.scheduler.client.report.report_client_singleton',
            return_value=self.placement)
        self.cyborg = mock.Mock()
        self.cyborg.get_device_profile_groups.return_value = [
            {'resources:FPGA': '1', 'accel:function_id': F_A}]
        self.useFixture_patch('nova_cyborg.clients.cyborg.get_client',
                              return_value=self.cyborg)
        self.useFixture_patch(
            'oslo_context.context.get_current',
            return_value=nova_context.RequestContext('u', 'p', is_admin=False))

    def useFixture_patch(self, target, **kwargs):
        patcher = mock.patch(target, **kwargs)
        started = patcher.start()
        self.addCleanup(patcher.stop)
        return started

    def weigh(self, hosts, spec_obj=None):
        w = weigher.FunctionAffinityWeigher()
        objs = [weights.WeighedHost(h, 0.0) for h in hosts]
        return w.weigh_objects(objs, spec_obj or spec())

    def test_ranking(self):
        hosts = [host('busy_other', 'rpB'), host('blank_busy', 'rpBlank2'),
                 host('idle_other', 'rpB2'), host('blank', 'rpBlank'),
                 host('holds_a', 'rpA')]
        self.assertEqual([weigher.OTHER_BUSY, weigher.BLANK_BUSY,
                          weigher.IDLE, weigher.IDLE, weigher.WANTED],
                         self.weigh(hosts))
        # Three requests for the traits and their holders, one per card
        # not holding the function for its usages; none for rpA.
        self.assertEqual(3 + 4, len(self.placement.urls))
        self.assertNotIn('/resource_providers/rpA/usages',
                         self.placement.urls)

    def test_through_nova_handler_the_holder_wins(self):
        handler = weights.HostWeightHandler()
        classes = handler.get_matching_classes(
            ['nova.scheduler.weights.ram.RAMWeigher',
             'nova_cyborg.weigher.FunctionAffinityWeigher'])
        hosts = [host('blank', 'rpBlank'), host('holds_a', 'rpA')]
        hosts[0].free_ram_mb, hosts[1].free_ram_mb = 32768, 16384
        weighed = handler.get_weighed_objects(
            [cls() for cls in classes], hosts, spec())
        self.assertEqual('holds_a', weighed[0].obj.host)
        self.flags.config(function_affinity_weight_multiplier=0,
                          group='nova_cyborg')
        weighed = handler.get_weighed_objects(
            [cls() for cls in classes], hosts, spec())
        self.assertEqual('blank', weighed[0].obj.host)

    def test_best_candidate_of_a_host_first(self):
        h = host('two_cards', 'rpB', 'rpBlank', 'rpA')
        self.assertEqual([weigher.WANTED], self.weigh([h]))
        self.assertEqual(
            ['rpA', 'rpBlank', 'rpB'],
            [c['mappings']['device_profile_0'][0]
             for c in h.allocation_candidates])

    def test_bitstream_function_from_glance(self):
        self.cyborg.get_device_profile_groups.return_value = [
            {'resources:FPGA': '1', 'accel:bitstream_id': 'img'}]
        with mock.patch('nova.image.glance.API') as api:
            api.return_value.get.return_value = {
                'properties': {'accel:function_id': F_B}}
            self.assertEqual([weigher.WANTED, weigher.IDLE],
                             self.weigh([host('b', 'rpB2'),
                                         host('a', 'rpA')]))
        api.return_value.get.assert_called_once_with(mock.ANY, 'img')

    def test_wanted_function_computed_once_per_request(self):
        w = weigher.FunctionAffinityWeigher()
        spec_obj = spec()
        hosts = [weights.WeighedHost(host('a', 'rpA'), 0.0),
                 weights.WeighedHost(host('b', 'rpB'), 0.0)]
        w.weigh_objects(hosts, spec_obj)
        w.weigh_objects(hosts, spec_obj)
        self.cyborg.get_device_profile_groups.assert_called_once_with('dp')
        w.weigh_objects(hosts, spec())
        self.assertEqual(2, self.cyborg.get_device_profile_groups.call_count)

    def test_no_profile_no_function_no_calls(self):
        hosts = [host('a', 'rpA'), host('b', 'rpB')]
        self.assertEqual([weigher.NEUTRAL] * 2,
                         self.weigh(hosts, spec(dp=None)))
        self.cyborg.get_device_profile_groups.return_value = [
            {'resources:FPGA': '1'}]
        self.assertEqual([weigher.NEUTRAL] * 2, self.weigh(hosts))
        self.assertEqual([], self.placement.urls)

    def test_required_function_trait_needs_nothing(self):
        hosts = [host('a', 'rpA'), host('b', 'rpB')]
        self.assertEqual([weigher.NEUTRAL] * 2,
                         self.weigh(hosts, spec(groups=[T_A])))
        self.cyborg.get_device_profile_groups.assert_not_called()
        self.assertEqual([], self.placement.urls)

    def test_cyborg_unreadable_is_neutral(self):
        self.cyborg.get_device_profile_groups.side_effect = ValueError('x')
        self.assertEqual([weigher.NEUTRAL] * 2,
                         self.weigh([host('a', 'rpA'), host('b', 'rpB')]))

    def test_placement_unreadable_is_neutral(self):
        self.placement.fail = ('/traits',)
        self.assertEqual([weigher.NEUTRAL] * 2,
                         self.weigh([host('a', 'rpA'), host('b', 'rpB')]))

    def test_usages_unreadable_is_neutral_for_that_host(self):
        self.placement.fail = ('rpB/usages',)
        self.assertEqual([weigher.WANTED, weigher.NEUTRAL, weigher.IDLE],
                         self.weigh([host('a', 'rpA'), host('b', 'rpB'),
                                     host('blank', 'rpBlank')]))

    def test_host_without_candidates_is_neutral(self):
        self.assertEqual([weigher.NEUTRAL, weigher.WANTED],
                         self.weigh([host('none'), host('a', 'rpA')]))

    def test_holds(self):
        self.assertTrue(weigher.holds(T_A, F_A.upper()))
        self.assertFalse(weigher.holds(T_B, F_A.upper()))
        self.assertFalse(weigher.holds('CUSTOM_X_' + F_A.upper(),
                                       F_A.upper()))
