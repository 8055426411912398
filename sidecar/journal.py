"""Small crash-safe JSON state kept under ``[sidecar] state_path``.

``programming.json`` holds the jobs started and not finished: what a
sidecar killed mid-programming must undo when it comes back. Writes are
atomic: a temporary file, fsync, then rename. (The ``leases.json`` of
earlier releases, timed promises, is removed at start: a device is now
promised by its Placement allocations, see :mod:`sidecar.promises`.)
"""

import json
import os
import tempfile
import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class JsonStore:
    """A dict persisted in one JSON file, safe across threads."""

    def __init__(self, path):
        self._path = path
        self._lock = threading.Lock()
        self._data = self._load()

    def _load(self):
        try:
            with open(self._path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            LOG.error('Ignoring unreadable state file %(path)s: %(exc)s',
                      {'path': self._path, 'exc': exc})
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self):
        directory = os.path.dirname(self._path)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-')
        try:
            with os.fdopen(fd, 'w') as f:
                json.dump(self._data, f, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path)
        except BaseException:
            os.unlink(tmp)
            raise

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
