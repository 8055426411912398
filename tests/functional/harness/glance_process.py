"""Real Glance API (glance 32 or 33) in a child process, for functional tests.

Run by :class:`tests.functional.harness.glance_fixture.GlanceFixture` as::

    python -m tests.functional.harness.glance_process \\
        --config-dir DIR --port-file port

``DIR`` holds ``glance-api.conf`` and ``glance-api-paste.ini`` (written by
the fixture). The process brings the SQLite database to the latest
migration (what ``glance-manage db_sync`` does, in-process), loads the
application the way ``glance.wsgi.api`` does (``wsgi_app.init_app()``:
native threads, no eventlet) and serves it on 127.0.0.1 with the stdlib
threading WSGI server of :mod:`tests.functional.harness.loopback`.

There is no Keystone: the paste pipeline uses Glance's own
``unauthenticated-context`` filter, so every request acts with an admin
context (``is_admin``, no user, no project).

Never import this module from the test process: it parses Glance's options
on the global CONF.
"""

import argparse
import os
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from tests.functional.harness import child
from tests.functional.harness import loopback

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


class _Deferred:
    """WSGI app set once Glance is loaded (the port is bound before)."""

    app = None

    def __call__(self, environ, start_response):
        if self.app is None:
            start_response('503 Service Unavailable',
                           [('Content-Type', 'text/plain')])
            return [b'glance is starting\n']
        return self.app(environ, start_response)


def _db_sync(config_file):
    """``glance-manage db_sync``: expand, data migrations, contract."""
    from glance.cmd import manage
    from glance.common import config

    config.set_config_defaults()
    CONF([], project='glance', prog='glance-manage',
         default_config_files=[config_file])
    manage.DbCommands().sync()


def main(argv=None):
    start = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-dir', required=True)
    parser.add_argument('--port-file', required=True)
    args = parser.parse_args(argv)
    child.exit_with_parent()

    # Before CONF is parsed: the module registers oslo.log's command-line
    # options as it is imported (glance 32 does so even when they are
    # registered already, which a parsed CONF refuses).
    from glance.common import wsgi_app

    config_file = os.path.join(args.config_dir, 'glance-api.conf')
    _db_sync(config_file)
    synced = time.monotonic()

    # Bind first: the port is only written once the app answers.
    deferred = _Deferred()
    server, url = loopback.serve(deferred)

    os.environ['OS_GLANCE_CONFIG_DIR'] = args.config_dir
    deferred.app = wsgi_app.init_app()

    child.write_port(args.port_file, server.server_port)
    LOG.info('Glance harness serving %s/v2; db sync %.2f s, ready in '
             '%.2f s', url, synced - start, time.monotonic() - start)
    threading.Event().wait()


if __name__ == '__main__':
    sys.exit(main())
