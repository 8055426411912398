"""cyborg-agent (openstack-cyborg 17) with its fake driver, cycle by cycle.

Run by :mod:`benchmarks.steady` as::

    python -m benchmarks.agent_process --config-file agent.conf

It builds the real ``AgentManager`` (the object ``cyborg-agent`` runs)
and runs its periodic task ``update_available_resource`` (discover with
the enabled drivers, send ``report_data`` to cyborg-conductor) once per
line read from standard input, writing ``cycle <n> <seconds>`` to
standard output after each: the parent reads its counters between
cycles. cyborg-agent runs that task every 60 s; here the parent sets the
pace. EOF on standard input ends the process. Like the harness's Cyborg
child, it selects oslo.service's threading backend and never shares a
process with Nova.
"""

import argparse
import sys
import time

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

from cyborg.agent import manager  # noqa: E402
from cyborg.common import constants  # noqa: E402
from cyborg.common import service  # noqa: E402
from cyborg import context  # noqa: E402

from tests.functional.harness import child  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True)
    args = parser.parse_args(argv)
    child.exit_with_parent()
    service.prepare_service(['cyborg-agent', '--config-file',
                             args.config_file])
    agent = manager.AgentManager(constants.AGENT_TOPIC)
    ctxt = context.get_admin_context()
    cycle = 0
    for _line in sys.stdin:
        start = time.monotonic()
        agent.update_available_resource(ctxt)
        cycle += 1
        sys.stdout.write('cycle %d %.6f\n' % (cycle,
                                              time.monotonic() - start))
        sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
