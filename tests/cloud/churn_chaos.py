"""The churn's chaos mode: one service killed (SIGKILL) and started again.

``NOVA_CYBORG_CHURN_CHAOS=1`` (``tox -e churn-chaos``): right after a
step's request was accepted, half of the steps kill one of the cloud's
services, drawn from ``python -m localcloud service list``, and start it
again with ``service start NAME`` (which waits until it serves again),
while the operation is in flight. The kill is ``service kill NAME`` where
the local cloud has it, else SIGKILL to the process group its pid file
names (``<state>/pids/<name>.pid``; ``<what>@<host>`` runs in the host's
process). Without a ``service`` command at all the compute hosts are the
services (``host start``). The invariants after the step are the same;
only the server of that step may end in ``ERROR``.
"""

import os
import signal
import subprocess
import sys

from localcloud import procs
from tests import waiting

#: The share of steps during which a service is killed.
RATE = 0.5
#: Seconds a ``service`` command may take (a host's start waits until it
#: is ready: at most 300 s).
TIMEOUT = 600


def localcloud(layout, *args):
    return subprocess.run(
        [sys.executable, '-m', 'localcloud', '--dir', layout.root] +
        list(args), capture_output=True, text=True, timeout=TIMEOUT)


def services(layout):
    """The names ``service list`` gives (its lines' first words), or
    None if the local cloud has no such command."""
    proc = localcloud(layout, 'service', 'list')
    if proc.returncode != 0:
        return None
    return sorted({line.split()[0] for line in proc.stdout.splitlines()
                   if line.strip() and not line.startswith(' ')})


def _process(name):
    """The pid file's name of a service: its host's for ``x@host``."""
    return name.split('@', 1)[1] if '@' in name else name


class Chaos:
    """Kills one service during some steps; ``struck``: during this one."""

    def __init__(self, layout, rng, log):
        self.layout, self.rng, self.log = layout, rng, log
        self.names = services(layout)
        self.hosts_only = self.names is None
        if self.hosts_only:
            self.names = list(layout.hosts)
        self.struck = False
        self.kills = []
        log('chaos: services %s%s' % (', '.join(self.names), (
            ' (no "service" command: hosts only)' if self.hosts_only
            else '')))

    def _run(self, *args):
        proc = localcloud(self.layout, *args)
        if proc.returncode != 0:
            raise AssertionError('localcloud %s failed: %s%s' % (
                ' '.join(args), proc.stdout, proc.stderr))

    def kill(self, name):
        if not self.hosts_only and localcloud(
                self.layout, 'service', 'kill', name).returncode == 0:
            return
        process = _process(name)
        with open(self.layout.path('pids', process + '.pid')) as f:
            os.killpg(int(f.read()), signal.SIGKILL)
        waiting.wait_until(
            lambda: process not in procs.running(self.layout),
            '%s killed' % process, timeout=60, poll=0.2)

    def strike(self):
        """Maybe kill a service now and start it again (drawn from the
        run's seed)."""
        self.struck = self.rng.random() < RATE
        if not self.struck:
            return
        name = self.rng.choice(self.names)
        self.log('  chaos: SIGKILL %s' % name)
        self.kill(name)
        if self.hosts_only:
            self._run('host', 'start', name)
        else:
            self._run('service', 'start', name)
        self.kills.append((self.log.step, name))
        self.log('  chaos: %s started again' % name)
