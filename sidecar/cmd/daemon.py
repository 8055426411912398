"""``nova-cyborg-sidecar``: the daemon's console script.

Under systemd (``Type=notify``, ``etc/nova-cyborg-sidecar.service``) it
says it is ready once its first cycle has run: the devices a host reboot
reset are put back (vGPU 17 types, mdevs and FPGA functions of Bound
ARQs) and reported. The unit orders nova-compute after it, so that
nova-compute, starting the guests of a rebooted host
(``resume_guests_state_on_host_boot``), finds their devices there.
"""

import signal
import sys

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import systemd

from sidecar import conf as sidecar_conf
from sidecar import exception
from sidecar.daemon import factory

LOG = logging.getLogger(__name__)


def start_and_notify(sidecar):
    """Run the sidecar's first cycle, then send READY=1 to systemd (a
    no-op without NOTIFY_SOCKET; sent once, the variable is removed).
    The local cloud's hosts start their sidecar through this too
    (:mod:`localcloud.boot_order`)."""
    sidecar.start()
    systemd.notify_once()


def main(argv=None):
    conf = cfg.CONF
    sidecar_conf.register_opts(conf)
    logging.register_options(conf)
    conf(sys.argv[1:] if argv is None else argv, project='nova-cyborg',
         prog='nova-cyborg-sidecar')
    logging.setup(conf, 'nova-cyborg-sidecar')
    try:
        sidecar = factory.build(conf)
        start_and_notify(sidecar)
    except exception.SidecarError as exc:
        LOG.error('nova-cyborg-sidecar cannot start: %s', exc)
        return 1

    def _stop(signum, frame):
        LOG.info('Signal %d received; stopping', signum)
        sidecar.stop()

    def _resync(signum, frame):
        sidecar.resync()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGHUP, _resync)
    sidecar.wait()
    return 0


if __name__ == '__main__':
    sys.exit(main())
