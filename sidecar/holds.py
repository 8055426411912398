"""Which devices are held out of scheduling, and why.

A device (keyed by its PCI address, its control path) is *held* while it
has at least one reason:

- ``disabled``: an operator disabled it (``nova-cyborg-sidecar-manage
  device disable``);
- ``new``: it was discovered after the first start and ``[sidecar]
  admit_new_devices`` is ``disabled``: it waits for an operator's
  ``device enable``;
- ``unhealthy``: a health check found it faulty; the check releases it
  when the device is healthy again.

Every provider of a held device is kept at ``reserved = total`` in
Placement (:mod:`sidecar.reconcile`), and the end of a programming job
never lifts that (:mod:`sidecar.program`). ``disabled`` and ``new`` are
admin state: they are persisted atomically under ``[sidecar] state_path``
(``holds.json``) and survive restarts and cyborg-conductor's rewrites of
the inventory. ``unhealthy`` is observed state, kept in memory only: the
health check finds it again after a restart.

Upgrade: at the first start with no ``holds.json``, a device whose
resource provider already exists in Placement was in service under an
earlier release (or cyborg-agent) and is admitted; the others are new.
"""

import threading

from oslo_log import log as logging

from sidecar import exception
from sidecar import state_cache

LOG = logging.getLogger(__name__)

DISABLED = 'disabled'
UNHEALTHY = 'unhealthy'
NEW = 'new'
REASONS = (DISABLED, UNHEALTHY, NEW)
#: Reasons kept across restarts.
PERSISTENT = (DISABLED, NEW)

FILE = 'holds.json'


class Holds:
    """The hold reasons of every device known to this host.

    :param path: the JSON file persisting admin state (None: memory only,
        for tests).
    :param admit_new: ``'enabled'`` or ``'disabled'``
        (``[sidecar] admit_new_devices``).
    """

    def __init__(self, path=None, admit_new='disabled'):
        if admit_new not in ('enabled', 'disabled'):
            raise exception.InvalidArgument(
                name='[sidecar] admit_new_devices',
                reason='%r is neither enabled nor disabled' % (admit_new,))
        self._admit_new = admit_new
        self._store = state_cache.StateFile(path) if path else None
        self._lock = threading.Lock()
        data = self._store.load() if self._store else None
        self._first_start = data is None
        data = data or {}
        devices = data.get('devices') if isinstance(data, dict) else None
        #: address -> {reason: detail}; an empty dict: known, admitted.
        self._devices = {}
        for key, reasons in (devices or {}).items():
            if isinstance(reasons, dict):
                self._devices[key] = {
                    r: str(d) for r, d in reasons.items() if r in PERSISTENT}
        #: Volatile reasons: address -> {reason: detail}.
        self._volatile = {}
        self._listeners = []

    # -- persistence -----------------------------------------------------

    def _save(self):
        if self._store is not None:
            self._store.save({'version': 1, 'devices': self._devices})

    def add_listener(self, func):
        """``func(device_key)`` is called after a device's reasons
        changed (the service wakes its cycle to write Placement)."""
        self._listeners.append(func)

    def _changed(self, device_key):
        for func in self._listeners:
            try:
                func(device_key)
            except Exception:
                LOG.exception('Hold listener failed for %s', device_key)

    # -- the API ---------------------------------------------------------

    def hold(self, device_key, reason, detail=''):
        """Hold ``device_key`` for ``reason`` (one of :data:`REASONS`).
        Returns True if that reason is new for the device."""
        if reason not in REASONS:
            raise exception.InvalidArgument(
                name='reason', reason='%r is not one of %s' % (
                    reason, ', '.join(REASONS)))
        detail = str(detail or '')
        with self._lock:
            if reason in PERSISTENT:
                reasons = self._devices.setdefault(device_key, {})
            else:
                reasons = self._volatile.setdefault(device_key, {})
            new = reason not in reasons
            if not new and reasons[reason] == detail:
                return False
            reasons[reason] = detail
            if reason in PERSISTENT:
                self._save()
        LOG.warning('Device %(dev)s is held out of scheduling: %(reason)s'
                    '%(detail)s', {'dev': device_key, 'reason': reason,
                                   'detail': ' (%s)' % detail if detail
                                   else ''})
        self._changed(device_key)
        return new

    def release(self, device_key, reason):
        """Drop ``reason`` for ``device_key``. Returns True if it was
        there."""
        with self._lock:
            where = self._devices if reason in PERSISTENT else self._volatile
            reasons = where.get(device_key) or {}
            if reason not in reasons:
                return False
            del reasons[reason]
            if reason in PERSISTENT:
                self._save()
            held = self._reasons_locked(device_key)
        LOG.info('Device %(dev)s: %(reason)s released%(rest)s',
                 {'dev': device_key, 'reason': reason,
                  'rest': '; still held: %s' % ', '.join(sorted(held))
                  if held else '; it is offered for scheduling'})
        self._changed(device_key)
        return True

    def _reasons_locked(self, device_key):
        result = dict(self._devices.get(device_key) or {})
        result.update(self._volatile.get(device_key) or {})
        return result

    def reasons(self, device_key):
        """``{reason: detail}`` of ``device_key``; empty when not held."""
        with self._lock:
            return self._reasons_locked(device_key)

    def held(self, device_key):
        return bool(self.reasons(device_key))

    def known(self, device_key):
        with self._lock:
            return device_key in self._devices

    def enable(self, device_key):
        """An operator's enable: release ``disabled`` and ``new``."""
        released = [self.release(device_key, r) for r in PERSISTENT]
        with self._lock:
            if device_key not in self._devices:
                self._devices[device_key] = {}
                self._save()
        return any(released)

    def disable(self, device_key, detail=''):
        return self.hold(device_key, DISABLED, detail)

    # -- admission -------------------------------------------------------

    def admit(self, device_keys, in_service=()):
        """Record the devices discovered this cycle. A device never seen
        is admitted when ``admit_new_devices`` is ``enabled`` or, at the
        first start (no state file), when it is in ``in_service`` (its
        provider exists in Placement: an upgrade); otherwise it is held
        ``new``. Returns the keys held ``new`` by this call."""
        held = []
        with self._lock:
            unknown = [k for k in device_keys if k not in self._devices]
            if not unknown and not self._first_start:
                return held
            for key in unknown:
                if (self._admit_new == 'enabled' or
                        (self._first_start and key in in_service)):
                    self._devices[key] = {}
                else:
                    self._devices[key] = {NEW: 'discovered, waiting for '
                                               'an operator to enable it'}
                    held.append(key)
            self._first_start = False
            self._save()
        for key in held:
            LOG.warning('New device %s is held out of scheduling until an '
                        'operator enables it (nova-cyborg-sidecar-manage '
                        'device enable %s)', key, key)
            self._changed(key)
        return held

    @property
    def first_start(self):
        """True until the first :meth:`admit` when no state file was
        found (the caller then passes ``in_service``)."""
        return self._first_start

    def snapshot(self):
        """``{device_key: {reason: detail}}`` of every known device."""
        with self._lock:
            keys = set(self._devices) | set(self._volatile)
            return {k: self._reasons_locked(k) for k in sorted(keys)}
