"""Start, watch and stop the cloud's processes.

Every service runs in its own session (process group) with its output in
``<root>/logs/<name>.log`` and its process group id in
``<root>/pids/<name>.pid``, so that ``down`` from another command stops
it and everything it started.
"""

import os
import signal
import socket
import subprocess
import time

import psutil
import requests

from localcloud import layout as layout_mod
from localcloud import release


class ServiceError(Exception):
    """A service failed to start; names the service and its log.

    The message ends with the last lines of that log, then of each log in
    ``also`` (the other services a failure involves).
    """

    def __init__(self, name, reason, log_path, also=()):
        self.name = name
        self.log_path = log_path
        message = '%s: %s (log: %s)\n%s' % (name, reason, log_path,
                                            tail(log_path))
        for path in also:
            if path != log_path:
                message += '\n-- last lines of %s:\n%s' % (path, tail(path))
        super().__init__(message)


def tail(path, lines=25):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-lines:])
    except OSError as exc:
        return '(%s)' % exc


def log_path(layout, name):
    return layout.path('logs', name + '.log')


def _pid_path(layout, name):
    return layout.path('pids', name + '.pid')


def _env(extra, executable=None):
    env = dict(os.environ)
    # Nova 34 runs on native threads (its test fixtures, the simulated
    # hosts, must not monkey-patch eventlet either), Nova 33 on eventlet:
    # as the release of the executable's environment says.
    env.update(release.of(release.environment_python(
        executable)).environment())
    env['PYTHONWARNINGS'] = 'ignore::DeprecationWarning'
    # glibc gives each thread that allocates its own arena (up to 8 per
    # core), which the threaded services fill and never give back: two
    # arenas keep their memory down at no measurable cost in speed here.
    env.setdefault('MALLOC_ARENA_MAX', '2')
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (layout_mod.REPO_ROOT, env.get('PYTHONPATH')) if p)
    env.update(extra or {})
    return env


def run(layout, name, argv, env=None, timeout=300):
    """Run a one-shot command (a DB sync); raise ServiceError if it fails."""
    path = log_path(layout, name)
    with open(path, 'ab') as out:
        try:
            proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL,
                                  env=_env(env, argv[0]),
                                  cwd=layout.root, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ServiceError(name, 'timed out after %d s' % timeout, path)
    if proc.returncode:
        raise ServiceError(name, '%s exited with %d' % (
            os.path.basename(argv[0]), proc.returncode), path)


def start(layout, name, argv, env=None, also=()):
    """Start a long-running service in its own session.

    ``also`` names the other services this process runs: each gets the
    same pid file and its log is a link to this one's.
    """
    path = log_path(layout, name)
    with open(path, 'ab') as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                env=_env(env, argv[0]),
                                cwd=layout.root, start_new_session=True)
    for each in (name,) + tuple(also):
        with open(_pid_path(layout, each), 'w') as f:
            f.write('%d\n' % proc.pid)
        if each != name and not os.path.lexists(log_path(layout, each)):
            os.symlink(os.path.basename(path), log_path(layout, each))
    return proc


def _http_answers(url):
    try:
        return requests.get(url, timeout=2).status_code < 500
    except requests.RequestException:
        return False


def _tcp_answers(port):
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=1):
            return True
    except OSError:
        return False


def wait(layout, name, proc, url=None, port=None, check=None, timeout=120):
    """Wait until ``url`` answers, ``port`` accepts or ``check()`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServiceError(name, 'exited with %d' % proc.returncode,
                               log_path(layout, name))
        if ((url and _http_answers(url)) or (port and _tcp_answers(port))
                or (check and check())):
            return
        time.sleep(0.2)
    raise ServiceError(name, 'not ready after %d s' % timeout,
                       log_path(layout, name))


def _pgids(layout):
    pids = {}
    directory = layout.path('pids')
    for entry in sorted(os.listdir(directory)) if os.path.isdir(
            directory) else ():
        try:
            with open(os.path.join(directory, entry)) as f:
                pids[entry[:-4]] = int(f.read())
        except (OSError, ValueError):
            continue
    return pids


def _group(pgid):
    """Live processes of a process group (zombies are gone already)."""
    return [p for p in psutil.process_iter(['pid', 'status'])
            if p.info['status'] != psutil.STATUS_ZOMBIE and
            _pgid(p) == pgid]


def _pgid(proc):
    try:
        return os.getpgid(proc.pid)
    except (ProcessLookupError, PermissionError):
        return None


def running(layout):
    """``{service: [pids]}`` of the services that still have processes."""
    result = {}
    for name, pgid in _pgids(layout).items():
        members = [p.pid for p in _group(pgid)]
        if members:
            result[name] = members
    return result


def memory(layout):
    """Total RSS (bytes) of every process of the cloud (a process that
    runs several services counted once)."""
    total = 0
    for pid in {pid for pids in running(layout).values() for pid in pids}:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    return total


def _stop_groups(layout, pgids, grace=10, kill=False):
    """SIGTERM every group at once, SIGKILL what is left after ``grace``
    (with ``kill``: SIGKILL at once)."""
    for sig in (signal.SIGKILL,) if kill else (signal.SIGTERM,
                                               signal.SIGKILL):
        for pgid in pgids.values():
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(
                _group(pgid) for pgid in pgids.values()):
            time.sleep(0.1)
    for name in pgids:
        try:
            os.unlink(_pid_path(layout, name))
        except FileNotFoundError:
            pass


def stop(layout, name, grace=10, kill=False, also=()):
    """Stop one service (its whole process group: SIGTERM, SIGKILL after
    ``grace``; with ``kill``, SIGKILL at once); True if it had a pid
    file. The pid files of ``also`` (the other services of its process)
    go too."""
    pgids = _pgids(layout)
    if name not in pgids:
        return False
    _stop_groups(layout, {name: pgids[name]}, grace=grace, kill=kill)
    for each in also:
        try:
            os.unlink(_pid_path(layout, each))
        except FileNotFoundError:
            pass
    return True


def stop_all(layout, order=()):
    """Stop every service, those in ``order`` last (one by one, in that
    order); return their names."""
    pgids = _pgids(layout)
    first = {n: p for n, p in pgids.items() if n not in order}
    _stop_groups(layout, first)
    names = sorted(first)
    for name in order:
        if name in pgids:
            _stop_groups(layout, {name: pgids[name]})
            names.append(name)
    return names
