import testtools

from nova_cyborg import exception


class ReasonTest(testtools.TestCase):

    def test_innermost_message_under_the_key(self):
        e = exception.CyborgError(op='bind', msg='no device left')
        self.assertEqual('no device left', exception.reason(e, 'msg'))

    def test_formatted_message_without_a_key_or_its_string(self):
        e = exception.CyborgError(op='bind', msg='no device left')
        message = 'Failed to bind accelerator requests: no device left'
        self.assertEqual(message, exception.reason(e))
        self.assertEqual(message, exception.reason(e, 'reason'))

    def test_any_exception(self):
        self.assertEqual('boom', exception.reason(RuntimeError('boom')))
        self.assertEqual('KeyError', exception.reason(KeyError()))
