"""Live migration of a server with accelerators: conductor and computes."""

from unittest import mock

import fixtures
from nova.compute import vm_states
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.clients import cyborg as client
from nova_cyborg import exception
from nova_cyborg.flows.live_migration import compute as lmc
from nova_cyborg.flows.live_migration import conductor as lm
from nova_cyborg.model import bookkeeping

DP = 'accel:device_profile'
ALIAS = bookkeeping.alias(uuids.inst)


def _arq(uuid, host='src-host', group=0, state='Bound', bdf=None,
         mdev=None, owner=uuids.inst, dp='dp'):
    arq = {'uuid': uuid, 'state': state, 'device_profile_name': dp,
           'device_profile_group_id': group, 'device_rp_uuid': None,
           'hostname': host, 'instance_uuid': owner if host else None}
    if bdf:
        dom, bus, rest = bdf.split(':')
        slot, func = rest.split('.')
        arq.update(attach_handle_type='MDEV' if mdev else 'PCI',
                   attach_handle_uuid=mdev,
                   attach_handle_info={'domain': dom, 'bus': bus,
                                       'device': slot, 'function': func})
        if mdev:
            arq['attach_handle_info']['asked_type'] = 'nvidia-11'
    return arq


MIGRATION = objects.Migration(uuid=uuids.mig, dest_node='dest-node')


class Base(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.RequestContext('admin', 'other-project',
                                                   is_admin=True)
        self.cyclient = mock.create_autospec(client.CyborgClient,
                                             instance=True)
        self.cyclient.get_arq_device_rp_uuid.side_effect = (
            client.CyborgClient(self.context).get_arq_device_rp_uuid)
        self.cyclient.delete_arqs_by_uuid.return_value = []
        self.arqs = {uuids.inst: [], ALIAS: []}
        self.cyclient.get_arqs_for_instance.side_effect = (
            lambda owner, **kw: self.arqs.get(owner, []))
        self.get_client = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.clients.cyborg.get_client',
            return_value=self.cyclient)).mock
        self.instance = objects.Instance(
            uuid=uuids.inst, vm_state=vm_states.ACTIVE, project_id='owner',
            host='src-host', node='src-host',
            flavor=objects.Flavor(extra_specs={DP: 'dp'}),
            system_metadata={})
        self.save = self.useFixture(fixtures.MockPatchObject(
            self.instance, 'save')).mock

    def no_accelerators(self):
        self.instance.flavor = objects.Flavor(extra_specs={})


class ConductorTest(Base):

    def setUp(self):
        super().setUp()
        self.arqs[uuids.inst] = [_arq(uuids.a0, bdf='0000:81:00.1')]
        self.migration = objects.Migration(dest_node='dest-node')
        self.spec = mock.Mock()
        self.spec.get_request_group_mapping.return_value = {
            'device_profile_0': [uuids.dest_rp]}
        self.cyclient.create_arqs.return_value = [
            _arq(uuids.b0, host=None, state='Initial')]

    def bound_after(self, reads):
        """The new ARQ reads Initial ``reads`` times, then Bound."""
        answers = [[_arq(uuids.b0, 'dest-node', state='BindStarted',
                         owner=ALIAS)]] * reads + [
            [_arq(uuids.b0, 'dest-node', bdf='0000:81:00.2', owner=ALIAS)]]

        def read(owner, **kw):
            if owner == ALIAS and self.cyclient.bind_arqs.called:
                return answers.pop(0) if len(answers) > 1 else answers[0]
            return self.arqs.get(owner, [])
        self.cyclient.get_arqs_for_instance.side_effect = read

    def test_forced_destination_refused(self):
        exc = self.assertRaises(nova_exception.MigrationPreCheckError,
                                lm.refuse_forced, self.instance, 'dest')
        self.assertIn('forced destination host (dest)', str(exc))
        lm.refuse_forced(self.instance, None)
        self.no_accelerators()
        lm.refuse_forced(self.instance, 'dest')

    def test_profile_groups_require_live_migratable(self):
        group = objects.RequestGroup(requester_id='device_profile_0',
                                     required_traits={'CUSTOM_X'})
        spec = objects.RequestSpec(requested_resources=[])
        with mock.patch.object(client, 'get_device_profile_request_groups',
                               return_value=[group]) as get:
            lm.add_profile_groups(self.context, spec, self.instance.flavor)
            get.assert_called_once_with(self.context, 'dp')
            self.assertEqual({'CUSTOM_X', 'HW_PCI_LIVE_MIGRATABLE'},
                             spec.requested_resources[0].required_traits)
            lm.add_profile_groups(self.context, spec, objects.Flavor(
                extra_specs={}))
            self.assertEqual(1, get.call_count)

    @mock.patch('time.sleep')
    def test_bind_under_the_other_owner_and_await(self, sleep):
        self.bound_after(2)
        self.assertEqual([uuids.b0], lm.bind_destination(
            self.context, self.instance, self.migration, self.spec))
        # In the server's project, whoever acts.
        self.get_client.assert_any_call(self.context, instance=self.instance)
        self.cyclient.bind_arqs.assert_called_once_with({uuids.b0: {
            'hostname': 'dest-node', 'device_rp_uuid': uuids.dest_rp,
            'instance_uuid': ALIAS}})
        self.assertEqual([uuids.b0], lm.recorded(self.instance))
        self.assertEqual(2, sleep.call_count)
        # The source's are untouched.
        self.cyclient.unbind_arqs.assert_not_called()

    def test_bind_failure_deletes_them(self):
        def read(owner, **kw):
            if owner == ALIAS and self.cyclient.bind_arqs.called:
                return [_arq(uuids.b0, 'dest-node', state='BindFailed',
                             owner=ALIAS)]
            return self.arqs.get(owner, [])
        self.cyclient.get_arqs_for_instance.side_effect = read
        exc = self.assertRaises(
            nova_exception.MigrationPreCheckError, lm.bind_destination,
            self.context, self.instance, self.migration, self.spec)
        self.assertIn('binding the accelerators on dest-node failed', str(exc))
        self.assertIn('BindFailed', str(exc))
        self.cyclient.delete_arqs_by_uuid.assert_called_with([uuids.b0])
        self.assertEqual([], lm.recorded(self.instance))

    def test_bind_timeout(self):
        clock = iter(range(0, 10000, 100)).__next__
        self.arqs[ALIAS] = [_arq(uuids.b0, 'dest-node', state='BindStarted',
                                 owner=ALIAS)]
        self.flags(arq_binding_timeout=300)
        exc = self.assertRaises(
            exception.AcceleratorRequestNotBound, lm.await_bound,
            self.cyclient, ALIAS, [uuids.b0], clock=clock,
            sleep=lambda s: None)
        self.assertIn('after 300 seconds', str(exc))

    def test_attached_accelerators_refused_before_anything(self):
        self.arqs[uuids.inst].append(_arq(uuids.a1, dp='attached',
                                          bdf='0000:81:00.3'))
        exc = self.assertRaises(
            nova_exception.MigrationPreCheckError, lm.bind_destination,
            self.context, self.instance, self.migration, self.spec)
        self.assertIn('not live-migrated', str(exc))
        self.cyclient.create_arqs.assert_not_called()

    def test_without_accelerators_nothing(self):
        self.no_accelerators()
        self.assertEqual([], lm.bind_destination(
            self.context, self.instance, self.migration, self.spec))
        self.get_client.assert_not_called()

    def test_forget_destination(self):
        lm.record(self.instance, [uuids.b0])
        self.arqs[ALIAS] = [_arq(uuids.b1, 'dest-node', owner=ALIAS)]
        self.assertEqual([uuids.b0, uuids.b1],
                         lm.forget_destination(self.context, self.instance))
        self.cyclient.delete_arqs_by_uuid.assert_called_once_with(
            [uuids.b0, uuids.b1])
        self.assertEqual([], lm.recorded(self.instance))


class SourceCheckTest(Base):

    def setUp(self):
        super().setUp()
        self.driver = mock.Mock()
        self.driver._host.has_min_version.return_value = True
        self.data = objects.LibvirtLiveMigrateData()

    def test_post_copy_refused(self):
        self.flags(live_migration_permit_post_copy=True, group='libvirt')
        exc = self.assertRaises(
            nova_exception.MigrationPreCheckError, lmc.source_check,
            self.driver, self.context, self.instance, self.data, {})
        self.assertIn('[libvirt] live_migration_permit_post_copy', str(exc))

    def test_cyborg_mdevs_left_out_of_novas(self):
        self.arqs[uuids.inst] = [_arq(uuids.a0, bdf='0000:82:00.0',
                                      mdev=uuids.mdev)]
        self.assertEqual({uuids.nova_mdev: uuids.inst}, lmc.source_check(
            self.driver, self.context, self.instance, self.data,
            {uuids.mdev: uuids.inst, uuids.nova_mdev: uuids.inst}))
        # Nova's own check of both hosts' versions for mdevs.
        check = self.driver._assert_source_can_live_migrate_mdevs
        check.assert_called_once_with(self.instance, self.data)

    def test_pci_needs_vfio_variant_versions(self):
        self.arqs[uuids.inst] = [_arq(uuids.a0, bdf='0000:81:00.1')]
        self.driver._host.has_min_version.return_value = False
        exc = self.assertRaises(
            nova_exception.MigrationPreCheckError, lmc.source_check,
            self.driver, self.context, self.instance, self.data, {})
        self.assertIn('libvirt 10.0.0 and QEMU 8.2.2', str(exc))

    def test_not_bound_here_refused(self):
        self.arqs[uuids.inst] = [_arq(uuids.a0, host='other',
                                      bdf='0000:81:00.1')]
        self.assertRaises(
            nova_exception.MigrationPreCheckError, lmc.source_check,
            self.driver, self.context, self.instance, self.data, {})


class PreLiveMigrationTest(Base):

    def setUp(self):
        super().setUp()
        self.driver = mock.Mock()
        self.driver._host.has_min_version.return_value = True
        self.allocate = self.useFixture(fixtures.MockPatch(
            'nova_cyborg.virt.libvirt.allocate_mdevs')).mock
        self.data = objects.LibvirtLiveMigrateData(
            pci_dev_map_src_dst={'0000:05:00.1': '0000:05:00.2'})
        self.instance.system_metadata[lm.DEST_PREFIX + '0'] = uuids.b0
        self.instance.system_metadata[lm.DEST_PREFIX + '1'] = uuids.b1

    def test_pci_and_mdev_remapped_and_merged(self):
        self.arqs[uuids.inst] = [
            _arq(uuids.a0, group=0, bdf='0000:81:00.1'),
            _arq(uuids.a1, group=1, bdf='0000:82:00.0', mdev=uuids.src_mdev)]
        self.arqs[ALIAS] = [
            _arq(uuids.b1, 'dest', group=1, bdf='0000:82:00.0',
                 mdev=uuids.dst_mdev, owner=ALIAS),
            _arq(uuids.b0, 'dest', group=0, bdf='0000:81:00.3', owner=ALIAS),
            _arq(uuids.stray, 'dest', group=0, bdf='0000:81:00.4',
                 owner=ALIAS)]
        data = lmc.pre_live_migration(self.driver, self.context,
                                      self.instance, self.data)
        self.assertEqual({'0000:05:00.1': '0000:05:00.2',
                          '0000:81:00.1': '0000:81:00.3'},
                         data.pci_dev_map_src_dst)
        self.assertEqual({uuids.src_mdev: uuids.dst_mdev}, data.target_mdevs)
        created = self.allocate.call_args[0][1]
        self.assertEqual({uuids.b0, uuids.b1}, {a.uuid for a in created})

    def test_destination_arq_gone(self):
        self.arqs[uuids.inst] = [_arq(uuids.a0, bdf='0000:81:00.1')]
        self.arqs[ALIAS] = [_arq(uuids.b0, 'dest', bdf='0000:81:00.3',
                                 owner=ALIAS)]
        exc = self.assertRaises(nova_exception.MigrationError,
                                lmc.pre_live_migration, self.driver,
                                self.context, self.instance, self.data)
        self.assertIn(uuids.b1, str(exc))
        self.allocate.assert_not_called()

    def test_hostile_attach_handle_refused(self):
        self.instance.system_metadata.pop(lm.DEST_PREFIX + '1')
        self.arqs[uuids.inst] = [_arq(uuids.a0, bdf='0000:81:00.1')]
        bad = _arq(uuids.b0, 'dest', bdf='0000:81:00.3', owner=ALIAS)
        bad['attach_handle_info']['bus'] = '81/../x'
        self.arqs[ALIAS] = [bad]
        self.assertRaises(nova_exception.MigrationError,
                          lmc.pre_live_migration, self.driver,
                          self.context, self.instance, self.data)
        self.allocate.assert_not_called()

    def test_ordered_pci_map(self):
        # b is both a destination and a source: b -> c goes first.
        self.assertEqual([('b', 'c'), ('a', 'b')], list(
            lmc.ordered_pci_map({'a': 'b', 'b': 'c'}).items()))
        self.assertRaises(ValueError, lmc.ordered_pci_map,
                          {'a': 'b', 'b': 'a'})


class EndTest(Base):

    def setUp(self):
        super().setUp()
        self.arqs[uuids.inst] = [_arq(uuids.a0, bdf='0000:81:00.1')]
        self.arqs[ALIAS] = [_arq(uuids.b0, 'dest', bdf='0000:81:00.3',
                                 owner=ALIAS)]
        lm.record(self.instance, [uuids.b0])
        self.save.reset_mock()

    def test_success_deletes_source_and_flips_owner(self):
        lmc.succeeded(self.context, self.instance)
        self.cyclient.delete_arqs_strictly.assert_called_once_with(
            [uuids.a0])
        self.assertEqual(ALIAS, bookkeeping.arq_owner(self.instance))
        self.assertEqual([], lm.recorded(self.instance))
        self.save.assert_called()
        # Back again: the server's own UUID holds them.
        lmc.succeeded(self.context, self.instance)
        self.assertEqual(uuids.inst, bookkeeping.arq_owner(self.instance))

    def test_success_remembers_what_cyborg_kept(self):
        self.cyclient.delete_arqs_strictly.side_effect = (
            exception.CyborgError(op='delete', msg='down'))
        lmc.succeeded(self.context, self.instance)
        self.assertEqual([uuids.a0], bookkeeping.entries(
            self.instance, bookkeeping.RETIRED_PREFIX))
        self.assertEqual(ALIAS, bookkeeping.arq_owner(self.instance))

    @mock.patch('nova.compute.utils.add_instance_fault_from_exc')
    def test_rollback_deletes_destination_keeps_owner(self, fault):
        lmc.rolled_back(self.context, self.instance)
        self.cyclient.delete_arqs_by_uuid.assert_called_once_with([uuids.b0])
        self.assertEqual(uuids.inst, bookkeeping.arq_owner(self.instance))
        self.assertEqual([], lm.recorded(self.instance))
        fault.assert_not_called()

    @mock.patch('nova.compute.utils.add_instance_fault_from_exc')
    def test_rollback_source_not_bound_recorded(self, fault):
        self.arqs[uuids.inst] = [_arq(uuids.a0, state='Unbound', host=None,
                                      bdf='0000:81:00.1')]
        lmc.rolled_back(self.context, self.instance)
        self.assertIn(uuids.a0, str(fault.call_args[0][2]))


class BindEventTest(ConductorTest):

    def test_other_bind_failures_are(self):
        self.cyclient.bind_arqs.side_effect = (
            exception.AcceleratorRequestBindingFailed(
                arqs=[uuids.b0], msg='Unexpected event code 404 for '
                'instance %s' % uuids.inst))
        self.assertRaises(
            nova_exception.MigrationPreCheckError, lm.bind_destination,
            self.context, self.instance, self.migration, self.spec)
        self.cyclient.delete_arqs_by_uuid.assert_called_with([uuids.b0])


class HooksWithoutAcceleratorsTest(Base):
    """A server without accelerators runs upstream's code: every live
    migration hook returns what it was given and asks Cyborg nothing."""

    def test_nothing_asked(self):
        from nova_cyborg.hooks import compute as compute_hooks
        from nova_cyborg.hooks import conductor as conductor_hooks
        from nova_cyborg.hooks import libvirt as libvirt_hooks
        self.no_accelerators()
        mdevs = {uuids.mdev: uuids.inst}
        data = objects.LibvirtLiveMigrateData()
        self.assertIs(mdevs, libvirt_hooks.live_migration_source_mdevs(
            mock.sentinel.driver, self.context, self.instance, data, mdevs))
        self.assertIs(data, libvirt_hooks.pre_live_migration(
            mock.sentinel.driver, self.context, self.instance, data))
        compute_hooks.live_migration_succeeded(self.context, self.instance)
        compute_hooks.live_migration_rolled_back(self.context, self.instance)
        manager = mock.Mock()
        compute_hooks.live_migration_reset(manager, self.context,
                                           self.instance, MIGRATION)
        self.assertEqual([], manager.mock_calls)
        conductor_hooks.refuse_forced_live_migration(self.instance, 'host')
        conductor_hooks.live_migration_task_rollback(self.context,
                                                     self.instance)
        spec = objects.RequestSpec(requested_resources=[])
        conductor_hooks.add_live_migration_profile_groups(
            self.context, spec, self.instance)
        self.assertEqual([], spec.requested_resources)
        self.assertEqual([], conductor_hooks.bind_live_migration_arqs(
            self.context, self.instance, mock.sentinel.migration, spec))
        self.get_client.assert_not_called()
        self.save.assert_not_called()
        self.assertEqual({}, self.instance.system_metadata)
