"""Exceptions raised by nova_cyborg.

Every exception derives from the Nova exception that Nova's own code paths
already handle at the same place, so that routing a call into nova_cyborg
never changes how Nova reacts to a failure (HTTP 400 at the API, reschedule
in the conductor, BuildAbortException in the compute manager); only the
message gets more precise.
"""

from nova import exception as nova_exception

from nova_cyborg.i18n import _


class CyborgError(nova_exception.AcceleratorRequestOpFailed):
    """Cyborg could not be reached or gave an unusable answer."""

    msg_fmt = _("Failed to %(op)s accelerator requests: %(msg)s")

    @property
    def status(self):
        """The HTTP status Cyborg answered, or None if it was not reached."""
        return self.kwargs.get('status')


class DeviceProfileError(nova_exception.DeviceProfileError):
    """A device profile is missing, ambiguous or malformed.

    Nova's API turns this into HTTP 400, so the user sees the message.
    """

    msg_fmt = _("Device profile %(name)s: %(msg)s")


class InvalidAttachHandle(nova_exception.AcceleratorRequestOpFailed):
    """Cyborg returned an attach handle that fails validation.

    attach_handle_info is untrusted input: nothing that fails validation
    may reach the domain XML or sysfs.
    """

    msg_fmt = _("Accelerator request %(arq)s has an invalid attach handle: "
                "%(reason)s")


class AcceleratorRequestNotBound(nova_exception.AcceleratorRequestOpFailed):
    """An ARQ the instance needs is not in the Bound state."""

    msg_fmt = _("Accelerator request %(arq)s is %(state)s, not Bound")


class ProviderMappingError(nova_exception.AcceleratorRequestOpFailed):
    """No resource provider is known for a device profile group."""

    msg_fmt = _("No resource provider was allocated for request group "
                "%(group)s of device profile %(name)s")


class AcceleratorRequestBindingFailed(
        nova_exception.AcceleratorRequestBindingFailed):
    """Creating or binding ARQs failed; ``arqs`` lists what was created.

    The conductor deletes ``arqs`` and reschedules the instance.
    """


class BindFailedBuildAborted(nova_exception.BuildAbortException):
    """A build cast before its bind answered, whose bind failed: aborted
    (no reschedule) with the fault the conductor gave such a build when it
    waited for the bind itself ("Failed to bind accelerator requests:
    <Cyborg's reason>"), not behind Nova's "Build of instance ...
    aborted" (the fault is cut at 255 characters, and Cyborg's reason is
    what the user needs)."""

    msg_fmt = _("%(reason)s")


class RevertNotStarted(nova_exception.NovaException):
    """A resize or cold migration's revert stopped before it changed
    anything; it can be asked for again."""

    msg_fmt = _("The revert did not start: the accelerator requests of the "
                "destination could not be deleted (%(error)s). Nothing was "
                "changed; revert the resize again once Cyborg answers.")


class OperationRefused(nova_exception.ForbiddenWithAccelerators):
    """A server action that this integration refuses for accelerators.

    A subclass of the exception upstream raises there, so Nova's API
    answers HTTP 400 as before, with a message that says why.
    """

    msg_fmt = _("%(reason)s")


class AcceleratorAttachFailed(nova_exception.NovaException):
    """Attaching or detaching accelerators failed; nothing was changed."""

    msg_fmt = _("Attaching or detaching accelerators failed: %(reason)s")


def reason(exc, key=None):
    """The message of a failure for a log, fault or refusal: the string
    its kwargs hold under ``key`` (the innermost message, without the
    prefixes each layer adds), else its formatted message, else its text
    or class name."""
    kwargs = getattr(exc, 'kwargs', None) or {}
    if key and isinstance(kwargs.get(key), str):
        return kwargs[key]
    if hasattr(exc, 'format_message'):
        return exc.format_message()
    return str(exc) or type(exc).__name__
