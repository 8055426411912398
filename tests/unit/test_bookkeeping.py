"""The owner of a server's ARQs in Cyborg (nova_cyborg.model.bookkeeping)."""

from unittest import mock

from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.model import bookkeeping


class OwnerTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.instance = objects.Instance(uuid=uuids.inst, system_metadata={})

    def test_alias_is_stable_and_distinct(self):
        alias = bookkeeping.alias(uuids.inst)
        self.assertEqual(alias, bookkeeping.alias(uuids.inst))
        self.assertNotEqual(uuids.inst, alias)
        self.assertNotEqual(alias, bookkeeping.alias(uuids.other))
        # Fixed forever: the same server has the same alias on every host
        # and in every release.
        self.assertEqual('eebb4a9f', bookkeeping.alias(
            '00000000-0000-0000-0000-000000000001')[:8])

    def test_the_server_owns_its_arqs_by_default(self):
        self.assertEqual(uuids.inst, bookkeeping.arq_owner(self.instance))
        self.assertEqual(bookkeeping.alias(uuids.inst),
                         bookkeeping.other_owner(self.instance))

    def test_after_a_live_migration_the_alias_owns_them(self):
        alias = bookkeeping.alias(uuids.inst)
        bookkeeping.set_owner(self.instance, alias)
        self.assertEqual(alias, bookkeeping.arq_owner(self.instance))
        self.assertEqual(uuids.inst, bookkeeping.other_owner(self.instance))
        # Back again: nothing is recorded.
        bookkeeping.set_owner(self.instance, uuids.inst)
        self.assertEqual({}, self.instance.system_metadata)

    def test_only_the_server_or_its_alias_can_own(self):
        self.assertRaises(ValueError, bookkeeping.set_owner, self.instance,
                          uuids.someone_else)
        # A record naming another UUID is not trusted.
        self.instance.system_metadata[bookkeeping.OWNER_KEY] = uuids.other
        self.assertEqual(uuids.inst, bookkeeping.arq_owner(self.instance))

    def test_own_arqs_after_a_bind_under_the_server(self):
        self.assertFalse(bookkeeping.own_arqs(self.instance))
        bookkeeping.set_owner(self.instance, bookkeeping.alias(uuids.inst))
        self.assertTrue(bookkeeping.own_arqs(self.instance))
        self.assertEqual(uuids.inst, bookkeeping.arq_owner(self.instance))

    def test_holders_one_owner_unless_a_live_migration_left_traces(self):
        # Never live-migrated: its own UUID only (one delete).
        self.assertEqual((uuids.inst,), bookkeeping.holders(self.instance))
        alias = bookkeeping.alias(uuids.inst)
        # A live migration under way: the destination's ARQs may be
        # bound under the alias.
        meta = self.instance.system_metadata
        meta[bookkeeping.LIVE_DEST_PREFIX + '0'] = uuids.dest
        self.assertEqual((uuids.inst, alias),
                         bookkeeping.holders(self.instance))
        del meta[bookkeeping.LIVE_DEST_PREFIX + '0']
        # Live-migrated: the alias holds them, the server's own UUID may
        # still hold the source's.
        bookkeeping.set_owner(self.instance, alias)
        self.assertEqual((uuids.inst, alias),
                         bookkeeping.holders(self.instance))
        # A record naming another UUID: both, all the same.
        meta[bookkeeping.OWNER_KEY] = uuids.other
        self.assertEqual((uuids.inst, alias),
                         bookkeeping.holders(self.instance))
        # Migrated back under its own UUID (the record is gone).
        bookkeeping.set_owner(self.instance, uuids.inst)
        self.assertEqual((uuids.inst,), bookkeeping.holders(self.instance))

    def test_unbound_arqs(self):
        meta = self.instance.system_metadata
        meta['nova_cyborg_parked_arq_0'] = '%s %s host1' % (uuids.parked,
                                                            uuids.rp)
        meta['nova_cyborg_retired_arq_0'] = uuids.retired
        meta[bookkeeping.LIVE_DEST_PREFIX + '0'] = uuids.dest
        self.assertEqual([uuids.parked, uuids.retired, uuids.dest],
                         bookkeeping.unbound(self.instance))

    def test_instance_without_system_metadata(self):
        instance = objects.Instance(uuid=uuids.inst)
        self.assertEqual(uuids.inst, bookkeeping.arq_owner(instance))
        self.assertFalse(bookkeeping.own_arqs(instance))

    def test_records_not_loaded_are_read_only_when_asked(self):
        # With load=False an instance whose system metadata is not loaded
        # has no records, and nothing is loaded; by default it is loaded.
        instance = objects.Instance(uuid=uuids.inst, flavor=objects.Flavor(
            extra_specs={}))
        instance._context = mock.sentinel.context
        with mock.patch.object(objects.Instance, 'obj_load_attr') as load:
            self.assertFalse(bookkeeping.has_accelerators(instance,
                                                          load=False))
            self.assertEqual([], bookkeeping.attached(instance, load=False))
            self.assertEqual([], bookkeeping.unbound(instance, load=False))
            load.assert_not_called()
            self.assertRaises(AttributeError, bookkeeping.has_accelerators,
                              instance)
            load.assert_called_once_with('system_metadata')

    def test_loaded_records_are_read_without_loading(self):
        self.instance.flavor = objects.Flavor(extra_specs={})
        self.instance.system_metadata[
            bookkeeping.ATTACHED_PREFIX + '0'] = '%s dp1' % uuids.arq
        self.assertTrue(bookkeeping.has_accelerators(self.instance,
                                                     load=False))

    def test_flavor_profile_loads_nothing(self):
        self.assertEqual('dp1', bookkeeping.flavor_profile(objects.Flavor(
            extra_specs={bookkeeping.DP_EXTRA_SPEC: 'dp1'})))
        self.assertIsNone(bookkeeping.flavor_profile(objects.Flavor()))
        self.assertIsNone(bookkeeping.flavor_profile(None))
        self.assertIsNone(bookkeeping.flavor_profile('m1.small'))
