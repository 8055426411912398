"""Count the HTTP requests a WSGI app receives, by method and path.

Stdlib only: it wraps the Cyborg API in the harness's Cyborg child and the
Placement app the harness serves on loopback to Cyborg and the sidecar.
Paths are normalized (UUIDs become ``{uuid}``, query values are dropped,
keys kept) so that the calls of different boots add up.
"""

import collections
import re
import threading

_UUID = re.compile(
    r'[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}')
#: Methods that change something (Placement "writes").
WRITES = frozenset(('PUT', 'POST', 'PATCH', 'DELETE'))


def call_name(method, path, query=''):
    """``'GET /v2/accelerator_requests?instance'`` for a request."""
    name = '%s %s' % (method, _UUID.sub('{uuid}', path))
    keys = sorted({part.split('=', 1)[0] for part in query.split('&')
                   if part})
    if keys:
        name += '?' + '&'.join(keys)
    return name


class Counter:
    """Thread-safe counts of call names."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts = collections.Counter()

    def add(self, name):
        with self._lock:
            self._counts[name] += 1

    def snapshot(self):
        with self._lock:
            return dict(self._counts)


def difference(after, before):
    """Calls counted in ``after`` and not in ``before`` (two snapshots)."""
    diff = {name: count - before.get(name, 0)
            for name, count in after.items()}
    return {name: count for name, count in diff.items() if count}


def writes(calls):
    """How many of ``calls`` (a snapshot or difference) are writes."""
    return sum(count for name, count in calls.items()
               if name.split(' ', 1)[0] in WRITES)


class CountingMiddleware:
    """Count every request, then pass it to ``app``."""

    def __init__(self, app, counter=None):
        self.app = app
        self.counter = counter or Counter()

    def __call__(self, environ, start_response):
        self.counter.add(call_name(environ['REQUEST_METHOD'],
                                   environ.get('PATH_INFO') or '/',
                                   environ.get('QUERY_STRING', '')))
        return self.app(environ, start_response)
