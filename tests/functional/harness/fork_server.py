"""A fork server for the harness's Cyborg child processes.

Each functional test starts the real Cyborg API and conductor in a child
process (:mod:`tests.functional.harness.cyborg_process`); importing Cyborg
costs about 1.7 s of CPU, the larger part of that child's start, and every
test paid it again. A test process now starts one server, once, which
imports Cyborg and then forks a child per request: each child is a fresh
process as before (own session, environment, output file, database and
configuration; ``main(argv)`` of the requested module runs in it), only
without the imports.

The server is single-threaded (so nothing it holds is half-locked in a
child), reads requests as JSON lines on stdin, answers each with the
child's pid once the child leads its own session (so that ``killpg``
reaches it), and reports each child's exit status as it reaps it. It ends
when its stdin closes (the test process is gone); its children end with it
(:func:`tests.functional.harness.child.exit_with_parent`).

Set ``NOVA_CYBORG_HARNESS_FORK=0`` to start every child with
``subprocess`` as before.
"""

import importlib
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import traceback

#: What the server imports before it forks; requested modules must be
#: this one or import nothing that clashes with it (benchmarks.cyborg_child
#: imports it).
PRELOAD = 'tests.functional.harness.cyborg_process'
DISABLE_ENV = 'NOVA_CYBORG_HARNESS_FORK'
READY_TIMEOUT = 120
#: Where the server runs (``python -m`` finds ``tests`` there).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))


def enabled():
    return os.environ.get(DISABLE_ENV, '1') != '0'


class ForkServerError(Exception):
    """The fork server could not start or answer."""


class ForkedProcess(object):
    """What the fixtures use of :class:`subprocess.Popen`, for a child of
    the fork server: ``pid``, ``returncode``, :meth:`poll` and
    :meth:`wait`."""

    def __init__(self, server, pid):
        self._server = server
        self.pid = pid
        self.returncode = None

    def poll(self):
        self.returncode = self._server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout=None):
        self.returncode = self._server.wait_exit(self.pid, timeout)
        return self.returncode


class _Client(object):
    """The test process's side: starts the server, sends requests, reads
    answers and exit reports on a reader thread."""

    def __init__(self):
        self._log = tempfile.NamedTemporaryFile(
            prefix='nova-cyborg-fork-server-', suffix='.log', delete=False)
        self.process = subprocess.Popen(
            [sys.executable, '-m', __name__], cwd=REPO_ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            start_new_session=True)
        self._cond = threading.Condition()
        self._answers = []
        self._exits = {}
        self._gone = False
        self._request_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self._next_answer(READY_TIMEOUT)

    def _read(self):
        for line in self.process.stdout:
            message = json.loads(line)
            with self._cond:
                if 'exit' in message:
                    self._exits[message['exit']] = message['code']
                else:
                    # The kernel gives pids again (pid_max is 32768 here,
                    # and a suite forks far more): a new child may have
                    # the pid of an earlier one, reaped and reported. That
                    # exit is not the new child's; the server answers a
                    # fork before it reports the child's own exit.
                    self._exits.pop(message.get('pid'), None)
                    self._answers.append(message)
                self._cond.notify_all()
        with self._cond:
            self._gone = True
            self._cond.notify_all()

    def _next_answer(self, timeout):
        with self._cond:
            if not self._cond.wait_for(lambda: self._answers or self._gone,
                                       timeout):
                raise ForkServerError('fork server: no answer in %s s'
                                      % timeout)
            if not self._answers:
                raise ForkServerError('fork server ended:\n%s' % self._tail())
            answer = self._answers.pop(0)
        if 'error' in answer:
            raise ForkServerError('fork server: %s' % answer['error'])
        return answer

    def _tail(self):
        with open(self._log.name, errors='replace') as f:
            return f.read()[-4000:]

    @property
    def alive(self):
        return self.process.poll() is None and not self._gone

    def spawn(self, module, args, env, cwd, output_path):
        request = {'module': module, 'args': list(args), 'env': dict(env),
                   'cwd': cwd, 'output': output_path}
        with self._request_lock:
            self.process.stdin.write(json.dumps(request).encode() + b'\n')
            self.process.stdin.flush()
            return ForkedProcess(self, self._next_answer(READY_TIMEOUT)['pid'])

    def exit_code(self, pid):
        with self._cond:
            if pid in self._exits:
                return self._exits[pid]
            # The server's children end with it (exit_with_parent).
            return -9 if self._gone else None

    def wait_exit(self, pid, timeout=None):
        with self._cond:
            if not self._cond.wait_for(
                    lambda: pid in self._exits or self._gone, timeout):
                raise subprocess.TimeoutExpired(str(pid), timeout)
        return self.exit_code(pid)


_client = None
_client_lock = threading.Lock()


def spawn(module, args, env, cwd, output_path):
    """Start ``module.main(args)`` in a child forked by this process's
    server (started on first use); return a :class:`ForkedProcess`."""
    global _client
    with _client_lock:
        if _client is None or not _client.alive:
            _client = _Client()
        client = _client
    return client.spawn(module, args, env, cwd, output_path)


# The server's side.

def _child(request, ready_w):
    """In the forked child: become the service, never return."""
    code = 1
    try:
        os.setsid()
        os.write(ready_w, b'x')
        os.close(ready_w)
        devnull = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request['output'],
                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(devnull)
        os.close(out)
        os.chdir(request['cwd'])
        os.environ.clear()
        os.environ.update(request['env'])
        sys.argv = [request['module']] + request['args']
        module = importlib.import_module(request['module'])
        code = module.main(request['args']) or 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _send(message):
    sys.stdout.write(json.dumps(message) + '\n')
    sys.stdout.flush()


def _reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        _send({'exit': pid, 'code': os.waitstatus_to_exitcode(status)})


def _fork(request):
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        _child(request, ready_w)
    os.close(ready_w)
    os.read(ready_r, 1)  # the child leads its session
    os.close(ready_r)
    return pid


def serve():
    importlib.import_module(PRELOAD)
    _send({'ready': True})
    stdin = sys.stdin.buffer
    while True:
        readable, _, _ = select.select([stdin], [], [], 0.2)
        _reap()
        if not readable:
            continue
        line = stdin.readline()
        if not line:
            return 0
        try:
            _send({'pid': _fork(json.loads(line))})
        except Exception as e:
            _send({'error': '%s: %s' % (type(e).__name__, e)})


if __name__ == '__main__':
    sys.exit(serve())
