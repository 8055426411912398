"""Small crash-safe JSON state kept under ``[sidecar] state_path``.

``programming.json`` holds the jobs started and not finished: what a
sidecar killed mid-programming must undo when it comes back. Writes are
atomic (:mod:`sidecar.state_cache`: a temporary file, fsync, rename);
a corrupt file is quarantined with an ERROR, and the reconciler then
gives back whatever the lost jobs left reserved. (The ``leases.json`` of
earlier releases, timed promises, is removed at start: a device is now
promised by its Placement allocations, see :mod:`sidecar.promises`.)
"""

import os
import threading

from oslo_log import log as logging

from sidecar import state_cache

LOG = logging.getLogger(__name__)


class JsonStore:
    """A dict persisted in one JSON file, safe across threads."""

    def __init__(self, path):
        # Atomic writes; a corrupt file is quarantined with an ERROR
        # (:mod:`sidecar.state_cache`), never silently dropped.
        self._file = state_cache.StateFile(path)
        self._lock = threading.Lock()
        self._data = self._file.load() or {}

    def _save(self):
        self._file.save(self._data)

    def get(self, key, default=None):
        with self._lock:
            return self._data.get(key, default)

    def items(self):
        with self._lock:
            return list(self._data.items())

    def put(self, key, value):
        with self._lock:
            self._data[key] = value
            self._save()

    def pop(self, key):
        with self._lock:
            value = self._data.pop(key, None)
            self._save()
            return value


#: Timed promises of earlier releases; ignored and removed.
OLD_LEASES = 'leases.json'


class Journal:
    def __init__(self, state_path):
        os.makedirs(state_path, mode=0o700, exist_ok=True)
        self.jobs = JsonStore(os.path.join(state_path, 'programming.json'))
        self.path = state_path
        old = os.path.join(state_path, OLD_LEASES)
        try:
            os.unlink(old)
        except FileNotFoundError:
            pass
        else:
            LOG.info('Removed %s: devices are promised by their Placement '
                     'allocations, not by timed leases', old)
