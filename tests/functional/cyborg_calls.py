"""Count the requests nova-cyborg sends to Cyborg's API.

Every request of nova-cyborg's (nova-api, the conductor, nova-compute: one
process in the functional tests) goes through
``nova_cyborg.clients.cyborg_http.CyborgHTTPClient._call``, once per HTTP
request Cyborg receives (keystoneauth's retries aside, which a healthy Cyborg
never causes); the harness's own reads of Cyborg (``self.cyborg``) do not.
"""

import threading

import fixtures

from nova_cyborg.clients import cyborg_http
from tests.functional.harness import waits


class CyborgCalls(fixtures.Fixture):
    """``take()`` returns the calls made since the last ``take()``, each
    ``(METHOD, path, params)``, in order."""

    def _setUp(self):
        self._lock = threading.Lock()
        self._calls = []
        # The base class's: every fixture patches that one (a patch of
        # the subclass's inherited attribute is restored as an attribute
        # of the subclass, which later patches of the base then miss).
        real = cyborg_http.CyborgHTTPClient._call
        recorder = self

        def call(client, op, method, url, *args, **kwargs):
            params = kwargs.get('params') or {}
            with recorder._lock:
                recorder._calls.append(
                    (method.upper(), url, tuple(sorted(params.items()))))
            return real(client, op, method, url, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg_http.CyborgHTTPClient._call', call))

    def take(self):
        with self._lock:
            calls, self._calls = self._calls, []
        return calls

    def take_deletes(self, count):
        """The DELETEs made since the last ``take()``, waiting until at
        least ``count`` were made: nova-compute deletes a server's ARQs at
        the end of its delete, which the API may show done before."""
        seen = []

        def enough():
            seen.extend(c for c in self.take() if c[0] == 'DELETE')
            return len(seen) >= count
        waits.wait_until(enough, '%d DELETE(s) sent to Cyborg' % count)
        return seen
