"""Count the requests nova-cyborg sends to Cyborg's API.

Every request of nova-cyborg's (nova-api, the conductor, nova-compute: one
process in the functional tests) goes through ``_call`` of
``nova_cyborg.client.CyborgClient`` (inherited from
``nova_cyborg.cyborg_http.CyborgHTTPClient``), once per HTTP request
Cyborg receives (keystoneauth's retries aside, which a healthy Cyborg never
causes); the harness's own reads of Cyborg (``self.cyborg``) do not.
"""

import threading

import fixtures

from nova_cyborg import client as nc_client
from tests.functional.harness import waits


class CyborgCalls(fixtures.Fixture):
    """``take()`` returns the calls made since the last ``take()``, each
    ``(METHOD, path, params)``, in order."""

    def _setUp(self):
        self._lock = threading.Lock()
        self._calls = []
        # Patched on the class that serves the requests: a fixture of
        # another test that patched CyborgClient._call left the inherited
        # function there as the subclass's own attribute when it restored
        # it, which a patch of the base class would no longer reach.
        real = nc_client.CyborgClient._call
        recorder = self

        def call(client, op, method, url, *args, **kwargs):
            params = kwargs.get('params') or {}
            with recorder._lock:
                recorder._calls.append(
                    (method.upper(), url, tuple(sorted(params.items()))))
            return real(client, op, method, url, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.client.CyborgClient._call', call))

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
