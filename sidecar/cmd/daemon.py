"""``nova-cyborg-sidecar``: the daemon's console script."""

import signal
import sys

from oslo_config import cfg
from oslo_log import log as logging

from sidecar import conf as sidecar_conf
from sidecar import exception
from sidecar.daemon import factory

LOG = logging.getLogger(__name__)


def main(argv=None):
    conf = cfg.CONF
    sidecar_conf.register_opts(conf)
    logging.register_options(conf)
    conf(sys.argv[1:] if argv is None else argv, project='nova-cyborg',
         prog='nova-cyborg-sidecar')
    logging.setup(conf, 'nova-cyborg-sidecar')
    try:
        sidecar = factory.build(conf)
        sidecar.start()
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
