"""Stopwatches on methods, and a wait for the end of a call.

:class:`Stopwatch` wraps methods (by dotted path) so that each call is
kept as a :class:`Call` (wall clock start and end, name, whether it
raised, its first instance's UUID when it has one); a benchmark waits for
the first call of a name that began after a moment (:meth:`Stopwatch.
wait`), without polling any API. The wrapped methods still do what they
did; the cost is two clock reads and an append per call. Used by
:mod:`benchmarks.attach` (P11) and :mod:`benchmarks.live_migration`
(P12); stdlib and ``fixtures`` only.
"""

import collections
import functools
import threading
import time

import fixtures

Call = collections.namedtuple('Call', 'start end name ok uuid')
#: Seconds a benchmark waits for a call to end before it gives up.
TIMEOUT = 180


def _resolve(path):
    module, cls, attr = path.rsplit('.', 2)
    mod = __import__(module, fromlist=[cls])
    return getattr(getattr(mod, cls), attr)


def _uuid(args, kwargs):
    """The UUID of the first argument that is an instance, if any."""
    for value in list(args) + list(kwargs.values()):
        uuid = getattr(value, 'uuid', None)
        if isinstance(uuid, str) and getattr(value, 'host', None):
            return uuid
    return None


class Stopwatch(fixtures.Fixture):
    """``paths``: ``[(dotted path, name)]``, each a method
    (``pkg.module.Class.method``) or a module's function
    (``pkg.module.function``)."""

    def __init__(self, paths):
        super().__init__()
        self.paths = list(paths)

    def _setUp(self):
        self._cond = threading.Condition()
        self.calls = []
        for path, name in self.paths:
            self.useFixture(fixtures.MonkeyPatch(
                path, self._timed(_resolve(path), name)))

    def _timed(self, func, name):
        watch = self

        @functools.wraps(func)
        def timed(*args, **kwargs):
            start, ok = time.time(), False
            try:
                result = func(*args, **kwargs)
                ok = True
                return result
            finally:
                watch._add(Call(start, time.time(), name, ok,
                                _uuid(args, kwargs)))
        return timed

    def _add(self, call):
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()

    def wait(self, name, after, uuid=None, timeout=TIMEOUT):
        """The first ended call of ``name`` begun at or after ``after``
        (wall clock), of instance ``uuid`` if given."""
        def found():
            for call in self.calls:
                if (call.name == name and call.start >= after and
                        (uuid is None or call.uuid == uuid)):
                    return call
        with self._cond:
            call = self._cond.wait_for(found, timeout)
        if call is None:
            raise AssertionError('no %s ended within %s s' % (name, timeout))
        return call

    def between(self, start, end):
        """The calls begun in ``[start, end]``, oldest first."""
        with self._cond:
            return sorted(c for c in self.calls if start <= c.start <= end)
