"""The cloud's WSGI applications, and the server that runs each of them.

``python -m localcloud.wsgi NAME PORT`` serves the application NAME on
127.0.0.1:PORT in one process: werkzeug's threaded HTTP/1.1 server (a
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

import importlib
import logging
import os
import sys

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


def serve(name, port):
    from werkzeug import serving

    app = _load(name)
    prefix = os.environ.get('SCRIPT_NAME', '').rstrip('/')
    if prefix:
        app = _mounted(app, prefix)
    # One line per request on the service's log, as gunicorn's access log.
    logging.getLogger('werkzeug').setLevel(logging.INFO)
    if not logging.getLogger('werkzeug').handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter('%(message)s'))
        logging.getLogger('werkzeug').addHandler(handler)
    server = serving.make_server('127.0.0.1', port, app, threaded=True)
    server.serve_forever()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in APPS or not argv[1].isdigit():
        sys.exit('usage: python -m localcloud.wsgi %s PORT' %
                 '|'.join(APPS))
    serve(argv[0], int(argv[1]))


if __name__ == '__main__':
    main()
