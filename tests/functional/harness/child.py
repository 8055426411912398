"""Services of the harness that run in child processes (Cyborg, Glance).

Parent side: :class:`ChildServiceFixture` starts ``python -m <module>`` in
its own session, waits for the port file the child writes once it serves,
shows the child's output and log when it fails, and kills it at cleanup.
Child side: :func:`exit_with_parent` and :func:`write_port`.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import fixtures

from localcloud import procs
from tests.functional.harness import fork_server

REPO_ROOT = fork_server.REPO_ROOT


class ChildServiceFixture(fixtures.Fixture):
    """Base of the fixtures that run a service in a child process.

    Subclasses set ``NAME`` and ``ERROR`` (the exception class) and call
    :meth:`start_child` from ``_setUp`` with ``output_path`` and
    ``log_path`` set.
    """

    NAME = 'child'
    ERROR = RuntimeError
    START_TIMEOUT = 60
    #: Fork the child from :mod:`~tests.functional.harness.fork_server`
    #: (modules that import no more than its preload) instead of
    #: starting a new interpreter.
    FORK = False

    def start_child(self, module, args, port_file, env=None):
        """Start ``python -m module args``; return the port it serves."""
        start = time.monotonic()
        args = list(args) + ['--port-file', port_file]
        if self.FORK and fork_server.enabled():
            self.process = fork_server.spawn(
                module, args, os.environ if env is None else env,
                REPO_ROOT, self.output_path)
        else:
            with open(self.output_path, 'wb') as out:
                self.process = subprocess.Popen(
                    [sys.executable, '-m', module] + args,
                    cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                    stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True)
        self.addCleanup(self.stop)
        while time.monotonic() - start < self.START_TIMEOUT:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    port = int(f.read())
                self.startup_time = time.monotonic() - start
                return port
            if self.process.poll() is not None:
                self.fail_with_logs('%s process exited with %s' % (
                    self.NAME, self.process.returncode))
            time.sleep(0.05)
        self.fail_with_logs('%s process not ready after %s s' % (
            self.NAME, self.START_TIMEOUT))

    def fail_with_logs(self, reason):
        raise self.ERROR('%s\n--- %s ---\n%s\n--- %s ---\n%s' % (
            reason, self.output_path, procs.tail(self.output_path, 40),
            self.log_path, procs.tail(self.log_path, 40)))

    def stop(self):
        """Kill the service now (as a crash would); idempotent."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()


def _watch_parent():
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)


def exit_with_parent():
    """End this child when the test process that started it is gone."""
    threading.Thread(target=_watch_parent, daemon=True).start()


def write_port(port_file, port):
    tmp = port_file + '.tmp'
    with open(tmp, 'w') as f:
        f.write('%d\n' % port)
    os.replace(tmp, port_file)
