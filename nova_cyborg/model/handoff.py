"""ARQs one step of a request read, handed to the next step in this
process instead of being read again from Cyborg.

nova-compute reads a server's ARQs when it waits for their binding
(:func:`nova_cyborg.steps.bound_arqs.get_bound_arqs`, in ``_build_resources``)
and, moments later in the same request and the same process, the libvirt
driver's start check (:func:`nova_cyborg.virt.guard.checked_xml`, in
``_create_guest``) needs the very same list: the build, rebuild,
evacuation and unshelve each cross both, with the same request context.
The first step keeps what it read here; the second takes it, once. Any
other start of a guest (reboot, power on, resume, rescue, a move, whose
steps may change the ARQs between a read and the start), a different
request, or a hand-off older than :data:`MAX_AGE` reads Cyborg as
before.

Nothing crosses a process: each service keeps its own hand-offs, and a
restarted service has none.
"""

import threading
import time

#: Seconds a hand-off may wait for the step that takes it (the spawn
#: follows the wait at once, after the image download at most).
MAX_AGE = 3600
#: At most this many hand-offs are kept (builds that failed before their
#: guest was started leave theirs; the oldest go first).
MAX_KEPT = 256

_LOCK = threading.Lock()
#: (instance UUID, request ID) -> (monotonic time, ARQ dicts)
_KEPT = {}


def _key(context, instance_uuid):
    request_id = getattr(context, 'request_id', None)
    return (instance_uuid, request_id) if request_id else None


def keep(context, instance_uuid, arqs):
    """Keep ``arqs``, the instance's ARQs just read from Cyborg (under the
    owner that holds them), for the next step of this request."""
    key = _key(context, instance_uuid)
    if key is None:
        return
    now = time.monotonic()
    with _LOCK:
        for old in [k for k, (at, _a) in _KEPT.items()
                    if now - at > MAX_AGE]:
            del _KEPT[old]
        while len(_KEPT) >= MAX_KEPT:
            del _KEPT[min(_KEPT, key=lambda k: _KEPT[k][0])]
        _KEPT[key] = (now, list(arqs))


def take(context, instance_uuid):
    """The ARQs kept for this request's instance, or None (read them)."""
    key = _key(context, instance_uuid)
    if key is None:
        return None
    with _LOCK:
        at, arqs = _KEPT.pop(key, (None, None))
    if at is None or time.monotonic() - at > MAX_AGE:
        return None
    return arqs
