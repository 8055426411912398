"""Count the requests nova-cyborg sends to Cyborg's API.

Every request of nova-cyborg's (nova-api, the conductor, nova-compute: one
process in the functional tests) goes through
``nova_cyborg.cyborg_http.CyborgHTTPClient._call``, once per HTTP request
Cyborg receives (keystoneauth's retries aside, which a healthy Cyborg never
causes); the harness's own reads of Cyborg (``self.cyborg``) do not.
"""

import threading

import fixtures

from nova_cyborg import cyborg_http


class CyborgCalls(fixtures.Fixture):
    """``take()`` returns the calls made since the last ``take()``, each
    ``(METHOD, path, params)``, in order."""

    def _setUp(self):
        self._lock = threading.Lock()
        self._calls = []
        real = cyborg_http.CyborgHTTPClient._call
        recorder = self

        def call(client, op, method, url, *args, **kwargs):
            params = kwargs.get('params') or {}
            with recorder._lock:
                recorder._calls.append(
                    (method.upper(), url, tuple(sorted(params.items()))))
            return real(client, op, method, url, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.cyborg_http.CyborgHTTPClient._call', call))

    def take(self):
        with self._lock:
            calls, self._calls = self._calls, []
        return calls
