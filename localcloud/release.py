"""What differs between the releases the local cloud runs.

The cloud runs Nova 34.0.x with Cyborg 17 (2026.2) or Nova 33.0.x with
Cyborg 16 (2026.1, the SLURP release), and during ``upgrade`` both at
once: each process from the environment (its Python executable) it was
started from. What each release needs is decided here, from what that
environment has installed (its ``nova`` and ``openstack-cyborg``
distributions), never from a version check elsewhere:

=========================  =====================  =======================
                           2026.1 (Nova 33)       2026.2 (Nova 34)
=========================  =====================  =======================
Nova's concurrency         eventlet (its native   native threads
                           threading mode is      (``OS_NOVA_DISABLE_
                           experimental there)    EVENTLET_PATCHING=1``)
a sidecar's                ``cyborg_conductor =   none (the sidecar's
``[upgrade_levels]``       2026.1``: Cyborg 16's  own release)
beside this conductor      conductor reads
                           reports at 2026.1
=========================  =====================  =======================
"""

import dataclasses
import functools
import json
import os
import subprocess
import sys

from sidecar.report import objects


@dataclasses.dataclass(frozen=True)
class Release:
    """One release of the services, as an environment installs it."""

    #: The OpenStack series: '2026.1', '2026.2'.
    name: str
    nova: str
    cyborg: str
    #: Nova's services run on eventlet (monkey-patched), not threads.
    eventlet: bool
    #: ``[upgrade_levels] cyborg_conductor`` of a sidecar whose reports
    #: this release's cyborg-conductor reads; None: no pin.
    conductor_level: str = None

    def environment(self):
        """What a process of this release needs in its environment."""
        return {'OS_NOVA_DISABLE_EVENTLET_PATCHING':
                '' if self.eventlet else '1'}

    def __str__(self):
        return '%s (nova %s, openstack-cyborg %s)' % (
            self.name, self.nova, self.cyborg)


#: Nova's major version: (series, on eventlet). The sidecar's pin comes
#: from the environment's Cyborg (``sidecar.report.objects.conductor_pin``).
SERIES = {33: ('2026.1', True),
          34: ('2026.2', False)}

_QUERY = ('import json; from importlib import metadata as m; '
          'print(json.dumps([m.version("nova"), '
          'm.version("openstack-cyborg")]))')


class UnsupportedRelease(Exception):
    pass


def _release(nova, cyborg):
    major = int(nova.split('.')[0])
    if major not in SERIES:
        raise UnsupportedRelease(
            'nova %s: the local cloud runs Nova %s' % (
                nova, ' or '.join(str(m) for m in sorted(SERIES))))
    name, eventlet = SERIES[major]
    return Release(name, nova, cyborg, eventlet,
                   objects.conductor_pin(cyborg))


def python_of(executable):
    """The Python of the environment a console script or an interpreter
    belongs to."""
    return os.path.join(os.path.dirname(executable), 'python')


def environment_python(executable):
    """The Python of the environment whose console script or interpreter
    ``executable`` is; this interpreter for a program of no such
    environment (MariaDB's)."""
    if executable:
        python = python_of(executable)
        if os.path.exists(os.path.join(os.path.dirname(python),
                                       'nova-manage')):
            return python
    return sys.executable


@functools.lru_cache(maxsize=None)
def of(python=None):
    """The :class:`Release` that the environment of ``python`` (default:
    this interpreter's) has installed."""
    # A virtualenv's python is a link to the base interpreter: compare
    # the environments (their bin directories), not the interpreters.
    if python is None or os.path.dirname(os.path.abspath(python)) == (
            os.path.dirname(os.path.abspath(sys.executable))):
        from importlib import metadata
        return _release(metadata.version('nova'),
                        metadata.version('openstack-cyborg'))
    out = subprocess.run([python, '-c', _QUERY], capture_output=True,
                         text=True, check=True).stdout
    return _release(*json.loads(out))
