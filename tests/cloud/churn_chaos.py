"""The churn's chaos mode: one service killed (SIGKILL) and started again.

``NOVA_CYBORG_CHURN_CHAOS=1`` (``tox -e churn-chaos``): right after a
step's request was accepted, half of the steps kill one of the cloud's
services, drawn from ``python -m localcloud service list``, with
``service kill NAME`` and start it with ``service start NAME`` (which
waits until it serves again), while the operation is in flight. The
invariants after the step are the same; only the server of that step may
end in ``ERROR`` (see doc/source/faults.rst).
"""

import subprocess
import sys

#: The share of steps during which a service is killed.
RATE = 0.5
#: Seconds a ``service`` command may take (a host's start waits until it
#: is ready: at most 300 s).
TIMEOUT = 600


class Unavailable(Exception):
    """The local cloud has no ``service`` command yet."""


def localcloud(layout, *args):
    return subprocess.run(
        [sys.executable, '-m', 'localcloud', '--dir', layout.root] +
        list(args), capture_output=True, text=True, timeout=TIMEOUT)


def services(layout):
    """The names ``service list`` gives (its lines' first words)."""
    proc = localcloud(layout, 'service', 'list')
    if proc.returncode != 0:
        raise Unavailable('python -m localcloud service list: %s%s' % (
            proc.stdout, proc.stderr))
    return sorted({line.split()[0] for line in proc.stdout.splitlines()
                   if line.strip() and not line.startswith(' ')})


class Chaos:
    """Kills one service during some steps; ``struck``: during this one."""

    def __init__(self, layout, rng, log):
        self.layout, self.rng, self.log = layout, rng, log
        self.names = services(layout)
        self.struck = False
        self.kills = []
        log('chaos: services %s' % ', '.join(self.names))

    def strike(self):
        """Maybe kill a service now and start it again (drawn from the
        run's seed)."""
        self.struck = self.rng.random() < RATE
        if not self.struck:
            return
        name = self.rng.choice(self.names)
        self.log('  chaos: SIGKILL %s' % name)
        proc = localcloud(self.layout, 'service', 'kill', name)
        if proc.returncode != 0:
            raise AssertionError('service kill %s failed: %s%s' % (
                name, proc.stdout, proc.stderr))
        proc = localcloud(self.layout, 'service', 'start', name)
        if proc.returncode != 0:
            raise AssertionError('service start %s failed: %s%s' % (
                name, proc.stdout, proc.stderr))
        self.kills.append((self.log.step, name))
        self.log('  chaos: %s started again' % name)
