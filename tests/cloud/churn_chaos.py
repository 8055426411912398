"""The churn's chaos mode: one service killed (SIGKILL) and started again.

``NOVA_CYBORG_CHURN_CHAOS=1`` (``tox -e churn-chaos``): right after a
step's request was accepted, half of the steps kill one of the cloud's
services, drawn from ``python -m localcloud service list``, with
``service stop NAME`` (SIGKILL; services of one process go together) and
start it again with ``service start NAME``, which waits until it answers,
while the operation is in flight. The
invariants after the step are the same; only the server of that step may
end rolled back or in ``ERROR``.
"""

import subprocess
import sys

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
    """The names ``service list`` gives (the first column under its
    header)."""
    proc = localcloud(layout, 'service', 'list')
    if proc.returncode != 0:
        raise AssertionError('localcloud service list failed: %s%s' % (
            proc.stdout, proc.stderr))
    return sorted({line.split()[0] for line in proc.stdout.splitlines()[1:]
                   if line.strip()})


class Chaos:
    """Kills one service during some steps; ``struck``: during this one."""

    def __init__(self, layout, rng, log):
        self.layout, self.rng, self.log = layout, rng, log
        self.names = services(layout)
        self.struck = False
        self.kills = []
        log('chaos: services %s' % ', '.join(self.names))

    def _run(self, *args):
        proc = localcloud(self.layout, *args)
        if proc.returncode != 0:
            raise AssertionError('localcloud %s failed: %s%s' % (
                ' '.join(args), proc.stdout, proc.stderr))
        return proc.stdout

    def strike(self):
        """Maybe kill a service now and start it again (drawn from the
        run's seed)."""
        self.struck = self.rng.random() < RATE
        if not self.struck:
            return
        name = self.rng.choice(self.names)
        self.log('  chaos: service stop %s (SIGKILL)' % name)
        self._run('service', 'stop', name)
        self._run('service', 'start', name)
        self.kills.append((self.log.step, name))
        self.log('  chaos: %s started again' % name)
