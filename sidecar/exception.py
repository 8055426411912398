"""Errors the sidecar raises.

Errors raised from an RPC method travel back to cyborg-conductor as a
``RemoteError`` carrying the class name and the message, so every message
here says what was wrong in words an operator can act on.
"""


class SidecarError(Exception):
    msg_fmt = 'Sidecar error'

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        super().__init__(message or self.msg_fmt % kwargs)


class InvalidArgument(SidecarError):
    msg_fmt = 'Invalid %(name)s: %(reason)s'


class UnknownDevice(SidecarError):
    msg_fmt = 'No %(kind)s device %(address)s is reported by this host'


class DeviceBusy(SidecarError):
    msg_fmt = ('Device %(address)s is in use (%(reason)s); it cannot be '
               'reprogrammed now')


class ProgrammingFailed(SidecarError):
    msg_fmt = 'Programming %(address)s failed: %(reason)s'


class BitstreamError(SidecarError):
    msg_fmt = 'Bitstream %(image_id)s cannot be used: %(reason)s'


class MdevError(SidecarError):
    msg_fmt = 'mdev %(uuid)s on %(address)s: %(reason)s'


class PlacementError(SidecarError):
    msg_fmt = 'Placement: %(reason)s'


class CyborgError(SidecarError):
    msg_fmt = 'Cyborg: %(reason)s'
