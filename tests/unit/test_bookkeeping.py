"""The owner of a server's ARQs in Cyborg (nova_cyborg.bookkeeping)."""

from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg import bookkeeping


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
