"""The conductor's word on a bind the build did not wait for.

A first build whose compute serves capability 1.2
(:mod:`nova_cyborg.model.capability`) is cast as soon as its ARQs exist:
Cyborg's answer to the bind (``PATCH /accelerator_requests``) comes to the
conductor's bind thread while nova-compute already builds
(nova_cyborg.flows.boot.early_arqs). Cyborg's ``accelerator-request-bound``
events say that an ARQ is bound, not that the bind the conductor sent
succeeded: when Cyborg answers late (the client gave up) or with an error,
the conductor deletes the ARQs, though Cyborg may have bound them and
sent its events. So nova-compute starts no guest on them before it has
the conductor's word.

* The conductor marks the server it casts early (:func:`mark`: a system
  metadata entry naming the node, sent with the build and removed by the
  compute once it has the word) and, once Cyborg answered, sends the
  compute an ``accelerator-request-bound`` event of its own, tag
  :data:`TAG`, through Nova's ``external_instance_event`` RPC: status
  ``completed``, or ``failed`` with the reason and the ARQs it could not
  delete in its data (:func:`event`).
* nova-compute takes that event before Nova looks for a waiter
  (:func:`offer`, patch 0028; Nova drops an event nobody waits for yet)
  and keeps it here, in-process, until the build asks for it
  (:func:`wait`, from nova_cyborg.steps.bound_arqs), whichever comes
  first.

Nothing here for any other server, or for any other event: Cyborg's own
events (tag: an ARQ UUID) go on to Nova as before.
"""

import threading
import time

from nova import objects

EVENT_NAME = 'accelerator-request-bound'
#: The tag of the conductor's event (Cyborg's carry an ARQ UUID).
TAG = 'nova-cyborg-bind'
#: System metadata entry of a server whose build was cast before its bind
#: answered: the node it was cast to and the request's ID.
KEY = 'nova_cyborg_bind_pending'
COMPLETED = 'completed'
FAILED = 'failed'

#: Seconds an outcome is kept for a build that has not asked for it yet.
MAX_AGE = 3600
#: At most this many kept outcomes (the oldest go first).
MAX_KEPT = 256

_COND = threading.Condition()
#: instance UUID -> (monotonic time, status, data)
_KEPT = {}


def _mark(context, nodename):
    return '%s %s' % (nodename, getattr(context, 'request_id', None))


def mark(context, instance, nodename):
    """Mark ``instance`` (the conductor's, sent with the build; not saved
    here) as cast to ``nodename`` by this request before its bind
    answered."""
    instance.system_metadata[KEY] = _mark(context, nodename)


def pending(context, instance):
    """Whether this compute must have the conductor's word before it uses
    the instance's ARQs: the instance is marked for its node by this
    request (the build's context carries the conductor's request ID).

    The mark is removed (saved with the instance's next save) whatever it
    named: a build rescheduled to another node, or any later operation,
    had its ARQs bound by the conductor before the cast.
    """
    if not instance.obj_attr_is_set('system_metadata'):
        return False
    marked = instance.system_metadata.pop(KEY, None)
    return marked is not None and marked == _mark(context, instance.node)


def event(instance_uuid, status, reason=None, arqs=()):
    """The conductor's event: ``completed``, or ``failed`` with why and
    the ARQs it could not delete."""
    data = {}
    if status == FAILED:
        data = {'reason': (reason or '')[:1000], 'arqs': ','.join(arqs)}
    return objects.InstanceExternalEvent(
        instance_uuid=instance_uuid, name=EVENT_NAME, tag=TAG,
        status=status, data=data)


def offer(event):
    """Keep ``event`` if it is the conductor's word on a bind.

    :returns: True if it was (Nova must not look for a waiter), else
        False.
    """
    if event.name != EVENT_NAME or event.tag != TAG:
        return False
    data = dict(event.data) if event.obj_attr_is_set('data') else {}
    now = time.monotonic()
    with _COND:
        for old in [u for u, (at, _s, _d) in _KEPT.items()
                    if now - at > MAX_AGE]:
            del _KEPT[old]
        while len(_KEPT) >= MAX_KEPT:
            del _KEPT[min(_KEPT, key=lambda u: _KEPT[u][0])]
        _KEPT[event.instance_uuid] = (now, event.status, data)
        _COND.notify_all()
    return True


def wait(instance_uuid, timeout, clock=time.monotonic):
    """The conductor's word on the instance's bind, waiting up to
    ``timeout`` seconds for it.

    :returns: ``(status, data)``, or None if it did not come in time.
    """
    deadline = clock() + timeout
    with _COND:
        while instance_uuid not in _KEPT:
            left = deadline - clock()
            if left <= 0:
                return None
            _COND.wait(left)
        _at, status, data = _KEPT.pop(instance_uuid)
    return status, data
