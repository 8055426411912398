"""The AER counts the health monitor first saw of each device (its
baselines), kept across restarts so that a restart forgives no error."""

import os

from sidecar.state import cache as state_cache


class Baselines:
    """``{device address: {function: fatal AER count}}``, persisted in
    ``<state_path>/<name>`` (a corrupt file is quarantined)."""

    def __init__(self, state_path, name):
        self._file = None
        data = None
        if state_path:
            os.makedirs(state_path, mode=0o700, exist_ok=True)
            self._file = state_cache.StateFile(os.path.join(state_path,
                                                            name))
            data = self._file.load()
        self._data = data if isinstance(data, dict) else {}

    def get(self, key):
        value = self._data.get(key)
        return value if isinstance(value, dict) else None

    def put(self, key, value):
        self._data[key] = value
        if self._file is not None:
            self._file.save(self._data)
