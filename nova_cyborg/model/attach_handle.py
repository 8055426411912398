"""Validation of the ARQs Cyborg hands to a compute host.

A thin functional facade over
:mod:`nova_cyborg.model.objects.accelerator_request` for callers that hold ARQ
dicts (``accel_info``): the compute manager before spawning, and the libvirt
driver hooks in :mod:`nova_cyborg.virt.libvirt`.
"""

from nova_cyborg import conf
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model.objects import accelerator_request as arq_obj

CONF = conf.CONF


def validate(arq):
    """Return ``arq`` as a validated AcceleratorRequest.

    :param arq: an ARQ dict from Cyborg, or an AcceleratorRequest (returned
        as is: objects are only ever built from validated data).
    :raises: InvalidAttachHandle
    """
    if isinstance(arq, arq_obj.AcceleratorRequest):
        return arq
    return arq_obj.AcceleratorRequest.from_cyborg(arq)


def validate_for_attach(accel_info):
    """Validate every ARQ an instance is about to get, all or nothing.

    Each ARQ must be well formed, have an attach handle, and have an attach
    handle type listed in ``[nova_cyborg] allowed_attach_types``. Nothing is
    returned unless every ARQ passes, so a caller never acts on part of a
    list that contains a hostile entry.

    :param accel_info: list of ARQ dicts (or AcceleratorRequests), or None.
    :returns: list of AcceleratorRequest, in the order given.
    :raises: InvalidAttachHandle
    """
    arqs = [validate(arq) for arq in accel_info or ()]
    allowed = CONF.nova_cyborg.allowed_attach_types
    for arq in arqs:
        if arq.attach_handle is None:
            raise exception.InvalidAttachHandle(
                arq=arq.uuid, reason=_('Cyborg has not given it an attach '
                                       'handle (state %s)') % arq.state)
        if arq.attach_type not in allowed:
            raise exception.InvalidAttachHandle(
                arq=arq.uuid, reason=_(
                    'attach handle type %(type)s is not in [nova_cyborg] '
                    'allowed_attach_types') % {'type': arq.attach_type})
    return arqs
