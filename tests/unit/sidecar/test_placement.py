"""The Placement client, against answers recorded by requests-mock."""

from oslo_config import fixture as cfg_fixture
import requests
from requests_mock.contrib import fixture as rm_fixture
import testtools

from sidecar import exception
from sidecar.report import placement
from tests.unit.sidecar import utils

ENDPOINT = 'http://placement.test'
RP = '5d2c1a4e-3b1f-4f7e-9a0d-1c2b3a4d5e6f'
INV_URL = '%s/resource_providers/%s/inventories' % (ENDPOINT, RP)
TRAITS_URL = '%s/resource_providers/%s/traits' % (ENDPOINT, RP)
PREFIX = 'CUSTOM_FPGA_FUNCTION_ID_'


def _inv(total, reserved=0):
    return {'total': total, 'reserved': reserved, 'min_unit': 1,
            'max_unit': total, 'step_size': 1, 'allocation_ratio': 1.0}


def _inventories(generation, **reserved):
    return {'resource_provider_generation': generation,
            'inventories': {'FPGA': _inv(2, reserved.get('FPGA', 0)),
                            'CUSTOM_FPGA_MEM': _inv(8, reserved.get(
                                'CUSTOM_FPGA_MEM', 1))}}


def _conflict(code=placement.CONCURRENT_UPDATE):
    return {'status_code': 409,
            'json': {'errors': [{'status': 409, 'code': code,
                                 'detail': 'resource provider generation '
                                           'conflict' if code ==
                                           placement.CONCURRENT_UPDATE
                                           else 'inventory in use'}]}}


class PlacementClientTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = utils.make_conf()
        self.conf = self.useFixture(cfg_fixture.Config(conf))
        self.conf.config(endpoint_override=ENDPOINT, group='placement')
        self.requests = self.useFixture(rm_fixture.Fixture())
        self.client = placement.PlacementClient(conf)

    def _puts(self, url):
        return [r for r in self.requests.request_history
                if r.method == 'PUT' and r.url == url]

    # providers ------------------------------------------------------------

    def test_find_provider(self):
        self.requests.get(ENDPOINT + '/resource_providers?name=c1_0000%3A5e'
                          '%3A00.0', json={'resource_providers': [
                              {'uuid': RP, 'name': 'c1_0000:5e:00.0'}]})
        self.assertEqual(RP, self.client.find_provider('c1_0000:5e:00.0'))
        request = self.requests.last_request
        self.assertEqual('placement 1.26',
                         request.headers['OpenStack-API-Version'])
        self.assertEqual({'name': ['c1_0000:5e:00.0']}, request.qs)

    def test_find_provider_none(self):
        self.requests.get(ENDPOINT + '/resource_providers',
                          json={'resource_providers': []})
        self.assertIsNone(self.client.find_provider('c1'))

    def test_allocations(self):
        self.requests.get(
            '%s/resource_providers/%s/allocations' % (ENDPOINT, RP),
            json={'resource_provider_generation': 3, 'allocations': {
                'server-1': {'resources': {'FPGA': 1}}}})
        self.assertEqual({'server-1': {'FPGA': 1}},
                         self.client.allocations(RP))

    def test_allocations_unreadable(self):
        url = '%s/resource_providers/%s/allocations' % (ENDPOINT, RP)
        self.requests.get(url, json={'allocations': []})
        self.assertRaises(exception.PlacementError,
                          self.client.allocations, RP)
        self.requests.get(url, status_code=503, text='down')
        self.assertRaises(exception.PlacementError,
                          self.client.allocations, RP)

    def test_unreachable(self):
        self.requests.get(ENDPOINT + '/resource_providers',
                          exc=requests.exceptions.ConnectionError('refused'))
        exc = self.assertRaises(exception.PlacementError,
                                self.client.find_provider, 'c1')
        self.assertIn('Placement is unreachable (GET /resource_providers)',
                      str(exc))

    def test_server_error(self):
        self.requests.get(ENDPOINT + '/resource_providers', status_code=500,
                          json={'errors': [{'status': 500,
                                            'detail': 'database gone'}]})
        exc = self.assertRaises(exception.PlacementError,
                                self.client.find_provider, 'c1')
        self.assertEqual('Placement: GET /resource_providers answered HTTP '
                         '500: database gone', str(exc))

    # inventories ----------------------------------------------------------

    def test_reserve_all(self):
        self.requests.get(INV_URL, json=_inventories(3))
        self.requests.put(INV_URL, json=_inventories(4))
        previous = self.client.reserve_all(RP)
        self.assertEqual({'FPGA': 0, 'CUSTOM_FPGA_MEM': 1}, previous)
        [put] = self._puts(INV_URL)
        self.assertEqual(
            {'resource_provider_generation': 3,
             'inventories': {'FPGA': _inv(2, 2),
                             'CUSTOM_FPGA_MEM': _inv(8, 8)}}, put.json())
        self.assertEqual('placement 1.26',
                         put.headers['OpenStack-API-Version'])

    def test_reserve_all_retries_generation_conflict(self):
        self.requests.get(INV_URL, [{'json': _inventories(3)},
                                    {'json': _inventories(5, FPGA=1)}])
        self.requests.put(INV_URL, [_conflict(), {'json': _inventories(6)}])
        previous = self.client.reserve_all(RP)
        # The values read after the conflict are the ones returned.
        self.assertEqual({'FPGA': 1, 'CUSTOM_FPGA_MEM': 1}, previous)
        puts = self._puts(INV_URL)
        self.assertEqual([3, 5], [p.json()['resource_provider_generation']
                                  for p in puts])

    def test_reserve_all_gives_up(self):
        self.requests.get(INV_URL, json=_inventories(3))
        self.requests.put(INV_URL, **_conflict())
        exc = self.assertRaises(exception.PlacementError,
                                self.client.reserve_all, RP)
        self.assertIn('reserving the inventory of %s: the provider kept '
                      'changing; gave up after 5 generation conflicts' % RP,
                      str(exc))
        self.assertEqual(5, len(self._puts(INV_URL)))

    def test_other_conflict_is_not_retried(self):
        self.requests.get(INV_URL, json=_inventories(3))
        self.requests.put(INV_URL, **_conflict('placement.inventory.inuse'))
        exc = self.assertRaises(exception.PlacementError,
                                self.client.reserve_all, RP)
        self.assertIn('answered HTTP 409: inventory in use', str(exc))
        self.assertEqual(1, len(self._puts(INV_URL)))

    def test_reserve_all_provider_gone(self):
        self.requests.get(INV_URL, status_code=404)
        exc = self.assertRaises(exception.PlacementError,
                                self.client.reserve_all, RP)
        self.assertEqual('Placement: resource provider %s not found' % RP,
                         str(exc))

    def test_reserve_all_unreachable(self):
        self.requests.get(INV_URL, json=_inventories(3))
        self.requests.put(INV_URL, exc=requests.exceptions.ConnectTimeout)
        exc = self.assertRaises(exception.PlacementError,
                                self.client.reserve_all, RP)
        self.assertIn('Placement is unreachable (PUT ', str(exc))

    def test_reserve_all_already_reserved_writes_nothing(self):
        self.requests.get(INV_URL, json=_inventories(
            3, FPGA=2, CUSTOM_FPGA_MEM=8))
        self.assertEqual({'FPGA': 2, 'CUSTOM_FPGA_MEM': 8},
                         self.client.reserve_all(RP))
        self.assertEqual([], self._puts(INV_URL))

    def test_restore_reserved(self):
        self.requests.get(INV_URL, json=_inventories(
            7, FPGA=2, CUSTOM_FPGA_MEM=8))
        self.requests.put(INV_URL, json=_inventories(8))
        self.client.restore_reserved(RP, {'FPGA': 0, 'CUSTOM_FPGA_MEM': 1,
                                          'GONE': 3})
        [put] = self._puts(INV_URL)
        self.assertEqual(
            {'resource_provider_generation': 7,
             'inventories': {'FPGA': _inv(2, 0),
                             'CUSTOM_FPGA_MEM': _inv(8, 1)}}, put.json())

    def test_restore_reserved_caps_at_total(self):
        self.requests.get(INV_URL, json=_inventories(
            7, FPGA=2, CUSTOM_FPGA_MEM=8))
        self.requests.put(INV_URL, json=_inventories(8))
        self.client.restore_reserved(RP, {'FPGA': 5, 'CUSTOM_FPGA_MEM': 1})
        [put] = self._puts(INV_URL)
        self.assertEqual(2, put.json()['inventories']['FPGA']['reserved'])
        self.assertEqual(
            1, put.json()['inventories']['CUSTOM_FPGA_MEM']['reserved'])

    def test_restore_reserved_retries(self):
        self.requests.get(INV_URL, [{'json': _inventories(7, FPGA=2)},
                                    {'json': _inventories(9, FPGA=2)}])
        self.requests.put(INV_URL, [_conflict(), {'json': _inventories(10)}])
        self.client.restore_reserved(RP, {'FPGA': 0})
        puts = self._puts(INV_URL)
        self.assertEqual([7, 9], [p.json()['resource_provider_generation']
                                  for p in puts])
        self.assertEqual(0, puts[-1].json()['inventories']['FPGA'][
            'reserved'])

    # reconciliation -------------------------------------------------------

    def test_providers_in_tree(self):
        tree = [{'uuid': RP, 'name': 'c1', 'generation': 1,
                 'parent_provider_uuid': None}]
        self.requests.get(ENDPOINT + '/resource_providers',
                          json={'resource_providers': tree})
        self.assertEqual(tree, self.client.providers_in_tree(RP))
        self.assertEqual({'in_tree': [RP]}, self.requests.last_request.qs)

    def test_get_provider(self):
        url = ENDPOINT + '/resource_providers/' + RP
        self.requests.get(url, json={'uuid': RP})
        self.assertEqual({'uuid': RP}, self.client.get_provider(RP))
        self.requests.get(url, status_code=404)
        self.assertIsNone(self.client.get_provider(RP))
        self.requests.get(url, status_code=503, text='down')
        self.assertRaises(exception.PlacementError, self.client.get_provider,
                          RP)

    def test_create_provider(self):
        self.requests.post(ENDPOINT + '/resource_providers',
                           json={'uuid': RP})
        self.client.create_provider(RP, 'c1_0000:5e:00.0', 'parent')
        self.assertEqual({'uuid': RP, 'name': 'c1_0000:5e:00.0',
                          'parent_provider_uuid': 'parent'},
                         self.requests.last_request.json())

    def test_create_provider_name_taken(self):
        self.requests.post(ENDPOINT + '/resource_providers', status_code=409,
                           json={'errors': [{'status': 409, 'detail':
                                             'name already exists'}]})
        exc = self.assertRaises(exception.PlacementError,
                                self.client.create_provider, RP, 'n', 'p')
        self.assertIn('HTTP 409: name already exists', str(exc))

    def test_set_parent(self):
        url = ENDPOINT + '/resource_providers/' + RP
        self.requests.put(url, json={'uuid': RP})
        self.client.set_parent(RP, 'n', 'parent')
        request = self.requests.last_request
        self.assertEqual({'name': 'n', 'parent_provider_uuid': 'parent'},
                         request.json())
        self.assertEqual('placement 1.37',
                         request.headers['OpenStack-API-Version'])

    def test_read_provider(self):
        self.requests.get(INV_URL, json=_inventories(3))
        self.requests.get(TRAITS_URL, json={
            'resource_provider_generation': 3, 'traits': ['A', 'B']})
        inventories, traits = self.client.read_provider(RP)
        self.assertEqual(_inventories(3)['inventories'], inventories)
        self.assertEqual({'A', 'B'}, traits)

    def test_set_inventory(self):
        self.requests.get(INV_URL, json=_inventories(3, FPGA=2))
        self.requests.put(INV_URL, json=_inventories(4))
        self.assertTrue(self.client.set_inventory(RP, 'FPGA', 1, 0))
        (put,) = self._puts(INV_URL)
        body = put.json()
        self.assertEqual(3, body['resource_provider_generation'])
        self.assertEqual(dict(_inv(2), total=1, max_unit=1, reserved=0),
                         body['inventories']['FPGA'])
        # Other inventories are kept as they are.
        self.assertEqual(_inv(8, 1), body['inventories']['CUSTOM_FPGA_MEM'])

    def test_set_inventory_creates_class_and_inventory(self):
        rc_url = ENDPOINT + '/resource_classes/CUSTOM_QAT'
        self.requests.put(rc_url, status_code=204)
        self.requests.get(INV_URL, json={'resource_provider_generation': 0,
                                         'inventories': {}})
        self.requests.put(INV_URL, json={})
        self.assertTrue(self.client.set_inventory(RP, 'CUSTOM_QAT', 2, 0))
        self.assertEqual(1, len(self._puts(rc_url)))
        (put,) = self._puts(INV_URL)
        self.assertEqual({'CUSTOM_QAT': {'total': 2, 'max_unit': 2,
                                         'reserved': 0}},
                         put.json()['inventories'])

    def test_set_inventory_unchanged_writes_nothing(self):
        self.requests.get(INV_URL, json=_inventories(3))
        self.assertFalse(self.client.set_inventory(RP, 'FPGA', 2, 0))
        self.assertEqual([], self._puts(INV_URL))

    def test_set_inventory_retries_generation_conflict(self):
        self.requests.get(INV_URL, [{'json': _inventories(3)},
                                    {'json': _inventories(5)}])
        self.requests.put(INV_URL, [_conflict(), {'json': _inventories(6)}])
        self.assertTrue(self.client.set_inventory(RP, 'FPGA', 3, 0))
        self.assertEqual([3, 5], [p.json()['resource_provider_generation']
                                  for p in self._puts(INV_URL)])

    def test_ensure_traits_created_or_there(self):
        # 201 and 204 both mean done: two hosts creating one trait at the
        # same moment both succeed (cyborg-conductor 17 fails on 204).
        self.requests.put(ENDPOINT + '/traits/CUSTOM_A', status_code=201)
        self.requests.put(ENDPOINT + '/traits/CUSTOM_B', status_code=204)
        self.client.ensure_traits(['CUSTOM_B', 'OWNER_CYBORG', 'CUSTOM_A',
                                   'CUSTOM_A'])
        self.assertEqual(
            ['/traits/custom_a', '/traits/custom_b'],
            [r.path for r in self.requests.request_history])

    def test_ensure_traits_refused(self):
        self.requests.put(ENDPOINT + '/traits/CUSTOM_A', status_code=400,
                          json={'errors': [{'status': 400,
                                            'detail': 'bad name'}]})
        self.assertRaises(exception.PlacementError,
                          self.client.ensure_traits, ['CUSTOM_A'])

    # traits ---------------------------------------------------------------

    def _traits(self, generation, *traits):
        return {'resource_provider_generation': generation,
                'traits': list(traits)}

    def test_replace_traits(self):
        self.requests.put(ENDPOINT + '/traits/%sNEW' % PREFIX,
                          status_code=201)
        self.requests.get(TRAITS_URL, json=self._traits(
            4, 'OWNER_CYBORG', PREFIX + 'OLD', 'CUSTOM_FPGA_INTEL'))
        self.requests.put(TRAITS_URL, json=self._traits(5))
        result = self.client.replace_traits_with_prefix(
            RP, PREFIX, [PREFIX + 'NEW'])
        expected = [PREFIX + 'NEW', 'CUSTOM_FPGA_INTEL', 'OWNER_CYBORG']
        self.assertEqual(expected, result)
        [put] = self._puts(TRAITS_URL)
        self.assertEqual({'resource_provider_generation': 4,
                          'traits': expected}, put.json())
        methods = [(r.method, r.path) for r in self.requests.request_history]
        self.assertEqual(('PUT', '/traits/%snew' % PREFIX.lower()),
                         methods[0])  # created before it is used

    def test_replace_traits_with_nothing(self):
        self.requests.get(TRAITS_URL, json=self._traits(
            4, 'OWNER_CYBORG', PREFIX + 'OLD'))
        self.requests.put(TRAITS_URL, json=self._traits(5))
        self.client.replace_traits_with_prefix(RP, PREFIX, [])
        [put] = self._puts(TRAITS_URL)
        self.assertEqual(['OWNER_CYBORG'], put.json()['traits'])

    def test_replace_traits_unchanged_writes_nothing(self):
        self.requests.put(ENDPOINT + '/traits/%sOLD' % PREFIX,
                          status_code=204)
        self.requests.get(TRAITS_URL, json=self._traits(
            4, 'OWNER_CYBORG', PREFIX + 'OLD'))
        self.client.replace_traits_with_prefix(RP, PREFIX, [PREFIX + 'OLD'])
        self.assertEqual([], self._puts(TRAITS_URL))

    def test_replace_traits_retries_generation_conflict(self):
        self.requests.put(ENDPOINT + '/traits/%sNEW' % PREFIX,
                          status_code=204)
        self.requests.get(TRAITS_URL, [
            {'json': self._traits(4, PREFIX + 'OLD')},
            {'json': self._traits(6, PREFIX + 'OLD', 'OWNER_CYBORG')}])
        self.requests.put(TRAITS_URL, [_conflict(),
                                       {'json': self._traits(7)}])
        self.client.replace_traits_with_prefix(RP, PREFIX, [PREFIX + 'NEW'])
        puts = self._puts(TRAITS_URL)
        self.assertEqual(2, len(puts))
        self.assertEqual({'resource_provider_generation': 6,
                          'traits': [PREFIX + 'NEW', 'OWNER_CYBORG']},
                         puts[-1].json())

    def test_replace_traits_gives_up(self):
        self.requests.get(TRAITS_URL, json=self._traits(4, PREFIX + 'OLD'))
        self.requests.put(TRAITS_URL, **_conflict())
        exc = self.assertRaises(exception.PlacementError,
                                self.client.replace_traits_with_prefix,
                                RP, PREFIX, [])
        self.assertIn('gave up after 5 generation conflicts', str(exc))
        self.assertEqual(5, len(self._puts(TRAITS_URL)))

    def test_trait_creation_fails(self):
        self.requests.put(ENDPOINT + '/traits/CUSTOM_BAD-NAME',
                          status_code=400, json={'errors': [
                              {'status': 400, 'detail': 'bad trait name'}]})
        exc = self.assertRaises(exception.PlacementError,
                                self.client.replace_traits_with_prefix,
                                RP, 'CUSTOM_', ['CUSTOM_BAD-NAME'])
        self.assertIn('PUT /traits/CUSTOM_BAD-NAME answered HTTP 400: bad '
                      'trait name', str(exc))
        self.assertEqual([], self._puts(TRAITS_URL))

    def test_replace_traits_empty_prefix(self):
        self.assertRaises(exception.InvalidArgument,
                          self.client.replace_traits_with_prefix, RP, '',
                          ['CUSTOM_X'])
        self.assertFalse(self.requests.called)
