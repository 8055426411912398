"""The harness's Cyborg child process, counting what reaches it.

Run instead of :mod:`tests.functional.harness.cyborg_process` (same
arguments) by :class:`CountingCyborgFixture`. It is that very process (the
real Cyborg API and conductor) plus two counters:

* every request to the Cyborg API (``/accelerator/...``), by method and
  normalized path (:mod:`benchmarks.counting`): what Nova costs Cyborg;
* every ``report_data`` RPC the conductor serves, by host name: what an
  agent (cyborg-agent or the sidecar) costs it.

``GET /_bench/counts`` answers ``{"api": {call: n}, "report_data":
{host: n}, "timeline": [[start, end, call], ...]}`` (the last 200 API
requests, wall clock); it is not counted. Never import this module in a process
that has imported Nova (see cyborg_process).
"""

import collections
import sys
import threading
import time

from oslo_serialization import jsonutils

from benchmarks import counting
from tests.functional.harness import cyborg_process

from cyborg.conductor import manager as conductor_manager  # noqa: E402

COUNTS_PATH = '/_bench/counts'
API = counting.Counter()
REPORTS = counting.Counter()
#: (start, end, call) of the last API requests, wall clock seconds.
TIMELINE = collections.deque(maxlen=200)
_TIMELINE_LOCK = threading.Lock()


class CountingHarnessApp(cyborg_process.HarnessApp):

    def __call__(self, environ, start_response):
        path = environ.get('PATH_INFO') or '/'
        if path == COUNTS_PATH:
            with _TIMELINE_LOCK:
                timeline = list(TIMELINE)
            body = jsonutils.dump_as_bytes(
                {'api': API.snapshot(), 'report_data': REPORTS.snapshot(),
                 'timeline': timeline})
            start_response('200 OK', [('Content-Type', 'application/json'),
                                      ('Content-Length', str(len(body)))])
            return [body]
        if not path.startswith(cyborg_process.API_PREFIX + '/'):
            return super().__call__(environ, start_response)
        name = counting.call_name(environ['REQUEST_METHOD'],
                                  path[len(cyborg_process.API_PREFIX):],
                                  environ.get('QUERY_STRING', ''))
        API.add(name)
        start = time.time()
        try:
            return super().__call__(environ, start_response)
        finally:
            with _TIMELINE_LOCK:
                TIMELINE.append((start, time.time(), name))


def _count_reports():
    real = conductor_manager.ConductorManager.report_data

    def report_data(self, context, hostname, driver_device_list):
        REPORTS.add(hostname)
        return real(self, context, hostname, driver_device_list)
    conductor_manager.ConductorManager.report_data = report_data


def main(argv=None):
    _count_reports()
    cyborg_process.HarnessApp = CountingHarnessApp
    return cyborg_process.main(argv)


if __name__ == '__main__':
    sys.exit(main())
