"""Healing the accelerator part of a server's Placement allocation."""

import inspect
import io
import os
import types
from unittest import mock

import fixtures
import requests

from nova.cmd import manage
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.flows import heal
from nova_cyborg_patch import cli as patch_tool
from nova_cyborg_patch import unidiff as _unidiff
from tests.unit import test_client

QUERY = test_client.ARQS + '?instance=' + uuids.inst
FPGA = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]
FLAVOR = {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}


def _instance(extra_specs=None):
    flavor = objects.Flavor(
        vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
        extra_specs={'accel:device_profile': 'dp1'}
        if extra_specs is None else extra_specs)
    return objects.Instance(uuid=uuids.inst, flavor=flavor,
                            project_id='project', user_id='user',
                            task_state=None, node='node1', host='host1')


def bound(uuid, rp=uuids.rp1, group=0, dp_name='dp1', **kw):
    return test_client._arq(uuid, group=group, state='Bound',
                            device_rp_uuid=rp, instance_uuid=uuids.inst,
                            device_profile_name=dp_name, hostname='host1',
                            **kw)


class HealTestBase(test_client.ClientTestBase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.RequestContext(
            'user', 'project', auth_token='user-token')

    def answer(self, arqs, profiles=None):
        self.requests.get(QUERY, json={'arqs': arqs})
        for name, groups in (profiles or {'dp1': FPGA}).items():
            self.requests.get(test_client.PROFILES + '?name=' + name, json={
                'device_profiles': [{'name': name, 'groups': groups}]})

    def accel(self, instance=None):
        return heal.accelerator_allocations(
            self.context, instance or _instance())

    def assertCannotHeal(self, *reasons):
        exc = self.assertRaises(nova_exception.AllocationUpdateFailed,
                                self.accel)
        msg = exc.format_message()
        self.assertIn(uuids.inst, msg)
        self.assertIn('cannot heal the accelerator allocations', msg)
        for reason in reasons:
            self.assertIn(reason, msg)
        return msg


class AcceleratorAllocationsTest(HealTestBase):

    def test_no_device_profile_does_not_ask_cyborg(self):
        self.assertEqual({}, self.accel(_instance({})))
        self.assertEqual(0, self.requests.call_count)

    def test_one_arq(self):
        self.answer([bound(uuids.a0)])
        self.assertEqual({uuids.rp1: {'resources': {'FPGA': 1}}},
                         self.accel())

    def test_sums_per_provider_and_resource_class(self):
        profile = [{'resources:FPGA': '2'}, {'resources:PGPU': '1'}]
        self.answer([bound(uuids.a0), bound(uuids.a1),
                     bound(uuids.a2, rp=uuids.rp2),
                     bound(uuids.a3, rp=uuids.rp2, group=1)],
                    {'dp1': profile})
        self.assertEqual({
            uuids.rp1: {'resources': {'FPGA': 2}},
            uuids.rp2: {'resources': {'FPGA': 1, 'PGPU': 1}},
        }, self.accel())

    def test_each_profile_fetched_once(self):
        # ARQs of a port's device profile are the instance's too.
        profiles = {'dp1': FPGA, 'dp2': [{'resources:CUSTOM_NIC': '1'}]}
        self.answer([bound(uuids.a0), bound(uuids.a1, rp=uuids.rp2),
                     bound(uuids.a2, rp=uuids.rp3, dp_name='dp2')], profiles)
        self.assertEqual({
            uuids.rp1: {'resources': {'FPGA': 1}},
            uuids.rp2: {'resources': {'FPGA': 1}},
            uuids.rp3: {'resources': {'CUSTOM_NIC': 1}},
        }, self.accel())
        profile_calls = [r for r in self.requests.request_history
                         if r.path.endswith('/device_profiles')]
        self.assertEqual(['dp1', 'dp2'],
                         sorted(r.qs['name'][0] for r in profile_calls))

    def test_admin_context_calls_cyborg_as_service_user(self):
        self.enable_service_token()
        self.context = nova_context.get_admin_context()
        self.answer([bound(uuids.a0)])
        self.assertEqual({uuids.rp1: {'resources': {'FPGA': 1}}},
                         self.accel())
        self.assertEqual('service-token',
                         self.requests.last_request.headers['X-Auth-Token'])

    def test_arq_not_bound(self):
        self.answer([bound(uuids.a0),
                     test_client._arq(uuids.a1, state='BindFailed')])
        self.assertCannotHeal(uuids.a1, 'BindFailed, not Bound')

    def test_arq_bound_to_no_provider(self):
        self.answer([bound(uuids.a0, rp=None)])
        self.assertCannotHeal(uuids.a0, 'Bound to no resource provider')

    def test_no_arqs(self):
        self.answer([])
        self.assertCannotHeal('no accelerator request', 'dp1')

    def test_cyborg_unreachable(self):
        self.requests.get(QUERY, exc=requests.exceptions.ConnectionError)
        self.assertCannotHeal('could not reach Cyborg')

    def test_cyborg_error(self):
        self.requests.get(QUERY, status_code=500,
                          json={'error_message': 'database gone'})
        self.assertCannotHeal('HTTP 500', 'database gone')

    def test_profile_gone(self):
        self.requests.get(QUERY, json={'arqs': [bound(uuids.a0)]})
        self.requests.get(test_client.PROFILES,
                          json={'device_profiles': []})
        self.assertCannotHeal('dp1', 'no such device profile')

    def test_group_out_of_range(self):
        self.answer([bound(uuids.a0, group=1)])
        self.assertCannotHeal(uuids.a0, 'group 1', 'which has 1 groups')

    def test_group_with_several_resource_classes(self):
        self.answer([bound(uuids.a0)],
                    {'dp1': [{'resources:FPGA': '1', 'resources:PGPU': '1'}]})
        self.assertCannotHeal('FPGA, PGPU', uuids.a0)


class MissingAllocationsTest(HealTestBase):

    ACCEL = {uuids.rp1: {'resources': {'FPGA': 2}}}

    def missing(self, allocations, accel=None):
        return heal.missing_allocations(uuids.inst, allocations,
                                        accel or self.ACCEL)

    def test_flavor_part_only(self):
        allocations = {uuids.cn: {'resources': dict(FLAVOR)}}
        self.assertEqual(self.ACCEL, self.missing(allocations))

    def test_already_held(self):
        allocations = {uuids.cn: {'resources': dict(FLAVOR)},
                       uuids.rp1: {'resources': {'FPGA': 2},
                                   'generation': 3}}
        self.assertEqual({}, self.missing(allocations))

    def test_partly_held(self):
        allocations = {uuids.rp1: {'resources': {'FPGA': 1}}}
        self.assertEqual({uuids.rp1: {'resources': {'FPGA': 1}}},
                         self.missing(allocations))

    def test_no_accelerators(self):
        self.assertEqual({}, heal.missing_allocations(
            uuids.inst, {uuids.cn: {'resources': dict(FLAVOR)}}, {}))

    def test_device_held_elsewhere_is_refused(self):
        allocations = {uuids.cn: {'resources': dict(FLAVOR)},
                       uuids.rp2: {'resources': {'FPGA': 2}}}
        exc = self.assertRaises(nova_exception.AllocationUpdateFailed,
                                self.missing, allocations)
        self.assertIn(uuids.rp2, exc.format_message())
        self.assertIn('--force', exc.format_message())


# Of the series the patch tool picks for the installed Nova.
PATCH_0008 = os.path.join(
    patch_tool.installed_series(os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
        'patches'))[0],
    '0008-manage-heal-accelerator-allocations.patch')


def _patched_manage():
    """nova.cmd.manage as patch 0008 makes it.

    The installed Nova is patched in the functional environments and
    pristine in the unit one (where the patch tool's own tests need it
    so): there, patch 0008 is applied to the module's source in memory.
    """
    source = inspect.getsource(manage)
    if 'nc_heal' in source:
        return manage
    with open(PATCH_0008) as f:
        file_patch, = _unidiff.parse(f.read(), PATCH_0008)
    lines = _unidiff.apply_hunks(_unidiff.split_lines(source), file_patch)
    module = types.ModuleType('nova_cyborg_test_patched_manage')
    module.__file__ = manage.__file__
    exec(compile(''.join(lines), manage.__file__, 'exec'), module.__dict__)
    return module


class PatchedHealAllocationsTest(HealTestBase):
    """``_heal_allocations_for_instance`` as routed by patch 0008."""

    def setUp(self):
        super().setUp()
        self.commands = _patched_manage().PlacementCommands()
        self.placement = mock.Mock()
        self.output = io.StringIO()
        self.useFixture(fixtures.MockPatchObject(
            self.commands, '_get_compute_node_uuid',
            return_value=uuids.cn))
        self.useFixture(fixtures.MockPatch(
            'nova.compute.utils.is_volume_backed_instance',
            return_value=False))

    def heal(self, current, dry_run=False, force=False):
        self.placement.get_allocs_for_consumer.return_value = current
        return self.commands._heal_allocations_for_instance(
            self.context, _instance(), {}, self.output.write,
            self.placement, dry_run, False, None, force)

    def written(self):
        self.placement.put_allocations.assert_called_once()
        payload = self.placement.put_allocations.call_args[0][2]
        return {rp: dict(alloc['resources'])
                for rp, alloc in payload['allocations'].items()}

    def current(self, allocations):
        return {'allocations': allocations, 'consumer_generation': 5,
                'project_id': 'project', 'user_id': 'user'}

    def test_missing_allocations_get_the_device(self):
        self.answer([bound(uuids.a0)])
        self.assertTrue(self.heal({'allocations': {}}))
        self.assertEqual({uuids.cn: FLAVOR, uuids.rp1: {'FPGA': 1}},
                         self.written())
        self.assertIn('Successfully created allocations',
                      self.output.getvalue())

    def test_device_part_missing_is_added(self):
        self.answer([bound(uuids.a0)])
        self.assertTrue(self.heal(self.current(
            {uuids.cn: {'resources': dict(FLAVOR), 'generation': 1}})))
        self.assertEqual({uuids.cn: FLAVOR, uuids.rp1: {'FPGA': 1}},
                         self.written())
        self.assertIn('Successfully updated allocations',
                      self.output.getvalue())

    def test_force_keeps_the_device(self):
        self.answer([bound(uuids.a0)])
        self.assertTrue(self.heal(self.current({
            uuids.cn: {'resources': {'VCPU': 8}},
            uuids.rp1: {'resources': {'FPGA': 1}}}), force=True))
        self.assertEqual({uuids.cn: FLAVOR, uuids.rp1: {'FPGA': 1}},
                         self.written())
        payload = self.placement.put_allocations.call_args[0][2]
        self.assertEqual(5, payload['consumer_generation'])

    def test_up_to_date(self):
        self.answer([bound(uuids.a0)])
        self.assertIsNone(self.heal(self.current({
            uuids.cn: {'resources': dict(FLAVOR)},
            uuids.rp1: {'resources': {'FPGA': 1}}})))
        self.placement.put_allocations.assert_not_called()
        self.assertIn('Nothing to be healed', self.output.getvalue())

    def test_dry_run(self):
        self.answer([bound(uuids.a0)])
        self.assertIsNone(self.heal({'allocations': {}}, dry_run=True))
        self.placement.put_allocations.assert_not_called()
        self.assertIn('[dry-run] Create allocations', self.output.getvalue())
        self.assertIn(uuids.rp1, self.output.getvalue())

    def test_not_bound_writes_nothing(self):
        self.answer([test_client._arq(uuids.a0, state='Unbound')])
        self.assertRaises(nova_exception.AllocationUpdateFailed,
                          self.heal, {'allocations': {}})
        self.placement.get_allocs_for_consumer.assert_not_called()
        self.placement.put_allocations.assert_not_called()
