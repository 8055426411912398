"""Serve a WSGI app on a free loopback port from a daemon thread.

Stdlib only: both the Nova and the Cyborg side of the harness use it.
"""

import socketserver
import threading
from wsgiref import simple_server


class _ThreadingWSGIServer(socketserver.ThreadingMixIn,
                           simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


def serve(app, host='127.0.0.1', port=0):
    """Serve ``app`` on ``host`` and ``port`` (0: a free one); return
    ``(server, url)``.

    ``url`` is ``http://<host>:<port>`` without a trailing slash. A port
    served before by a stopped server can be served again (a restart).
    """
    server = simple_server.make_server(
        host, port, app, server_class=_ThreadingWSGIServer,
        handler_class=_QuietHandler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={'poll_interval': 0.05},
        name='loopback-%d' % server.server_port, daemon=True)
    thread.start()
    return server, 'http://%s:%d' % (host, server.server_port)


def stop(server):
    """Stop a server returned by :func:`serve` and close its socket."""
    server.shutdown()
    server.server_close()
