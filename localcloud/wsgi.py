"""The cloud's WSGI applications, and the server that runs each of them.

``python -m localcloud.wsgi NAME PORT [NAME PORT ...]`` serves the
application NAME on 127.0.0.1:PORT, and the others on theirs, in one
process: werkzeug's threaded HTTP/1.1 server (a
dependency of Keystone's Flask), a thread per connection. A gunicorn per
service cost a master process besides its one worker (26 MiB of RSS
each, six of them) and bought nothing on a loopback cloud of one worker
per service. ``SCRIPT_NAME`` in the environment mounts the application
under that prefix, as gunicorn does.

Some of these applications parse ``sys.argv`` as their own (Keystone,
Cyborg), so the application is loaded with a clean one.
Cyborg also needs oslo.service's threading backend chosen before it is
imported (its own ``cyborg-api`` script fails under that backend), and
reads its config file from ``CYBORG_CONFIG_FILE``.
"""

import errno
import importlib
import logging
import os
import socket
import sys
import threading
import time

#: Seconds to wait for a port that another socket holds.
BIND_TIMEOUT = 60

APPS = {
    'keystone': 'keystone.wsgi.api',
    'placement': 'placement.wsgi.api',
    'glance': 'glance.wsgi.api',
    'nova': 'nova.wsgi.osapi_compute',
    'cyborg': 'cyborg.wsgi.api',
    'neutron': 'localcloud.neutron_standin',
}


def _load(name):
    sys.argv = [name]
    if name == 'cyborg':
        from oslo_service import backend
        backend.init_backend(backend.BackendType.THREADING)
        sys.argv += ['--config-file', os.environ['CYBORG_CONFIG_FILE']]
    return importlib.import_module(APPS[name]).application


def _mounted(app, prefix):
    """``app`` under ``prefix``: the prefix moves from PATH_INFO to
    SCRIPT_NAME; another path is a 404."""
    def mounted(environ, start_response):
        path = environ.get('PATH_INFO', '')
        if path != prefix and not path.startswith(prefix + '/'):
            start_response('404 Not Found', [('Content-Type', 'text/plain'),
                                             ('Content-Length', '0')])
            return [b'']
        environ['SCRIPT_NAME'] = environ.get('SCRIPT_NAME', '') + prefix
        environ['PATH_INFO'] = path[len(prefix):]
        return app(environ, start_response)
    return mounted


def _listen(name, port):
    """A listening socket on 127.0.0.1:``port``.

    The cloud's ports lie in the kernel's ephemeral range: another
    program's connection may hold one for a while (gunicorn retried
    too), so a port in use is waited for, with a deadline.
    """
    deadline = time.monotonic() + BIND_TIMEOUT
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(('127.0.0.1', port))
            sock.listen(128)
            return sock
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            sys.stderr.write('%s: port %d in use, waiting for it\n' % (
                name, port))
            time.sleep(0.5)


def _server(name, sock):
    from werkzeug import serving

    app = _load(name)
    prefix = os.environ.get('SCRIPT_NAME', '').rstrip('/')
    if prefix:
        app = _mounted(app, prefix)
    return serving.make_server('127.0.0.1', sock.getsockname()[1], app,
                               threaded=True, fd=sock.fileno())


def serve(apps):
    """Serve ``[(name, port)]``: one server thread each, in this process
    (the first application's configuration in the environment)."""
    # One line per request on the service's log, as gunicorn's access log.
    log = logging.getLogger('werkzeug')
    log.setLevel(logging.INFO)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter('%(message)s'))
        log.addHandler(handler)
    sockets = [(name, _listen(name, port)) for name, port in apps]
    servers = [_server(name, sock) for name, sock in sockets]
    for server in servers[1:]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    servers[0].serve_forever()


def main(argv=None):
    """``python -m localcloud.wsgi NAME PORT [NAME PORT ...]``"""
    argv = sys.argv[1:] if argv is None else argv
    apps = list(zip(argv[::2], argv[1::2]))
    if (not apps or len(argv) % 2 or
            any(n not in APPS or not p.isdigit() for n, p in apps)):
        sys.exit('usage: python -m localcloud.wsgi NAME PORT [NAME PORT '
                 '...] (NAME: %s)' % '|'.join(APPS))
    serve([(name, int(port)) for name, port in apps])


if __name__ == '__main__':
    main()
