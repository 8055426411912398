"""ARQs handed from one step of a request to the next
(nova_cyborg.model.handoff).
"""

from unittest import mock

from nova import context as nova_context
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cyborg.model import handoff


class HandoffTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(handoff._KEPT.clear)
        self.context = nova_context.RequestContext('user', 'project')

    def test_taken_once_by_the_same_request(self):
        handoff.keep(self.context, uuids.inst, [{'uuid': uuids.a0}])
        other = nova_context.RequestContext('user', 'project')
        self.assertIsNone(handoff.take(other, uuids.inst))
        self.assertIsNone(handoff.take(self.context, uuids.other))
        self.assertEqual([{'uuid': uuids.a0}],
                         handoff.take(self.context, uuids.inst))
        self.assertIsNone(handoff.take(self.context, uuids.inst))

    def test_a_later_read_replaces_it(self):
        handoff.keep(self.context, uuids.inst, [{'uuid': uuids.a0}])
        handoff.keep(self.context, uuids.inst, [])
        self.assertEqual([], handoff.take(self.context, uuids.inst))

    def test_no_request_id_nothing_kept(self):
        context = mock.Mock(request_id=None)
        handoff.keep(context, uuids.inst, [{'uuid': uuids.a0}])
        self.assertEqual({}, handoff._KEPT)
        self.assertIsNone(handoff.take(context, uuids.inst))

    def test_too_old_is_read_again(self):
        with mock.patch('time.monotonic', return_value=1000.0):
            handoff.keep(self.context, uuids.inst, [{'uuid': uuids.a0}])
        with mock.patch('time.monotonic',
                        return_value=1001.0 + handoff.MAX_AGE):
            self.assertIsNone(handoff.take(self.context, uuids.inst))

    def test_bounded(self):
        with mock.patch.object(handoff, 'MAX_KEPT', 3):
            for n in range(5):
                handoff.keep(self.context, 'inst-%d' % n, [])
            self.assertEqual(3, len(handoff._KEPT))
            self.assertIsNone(handoff.take(self.context, 'inst-0'))
            self.assertEqual([], handoff.take(self.context, 'inst-4'))
