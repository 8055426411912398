"""The cloud's RPC services, without a forked worker each.

Under oslo.service's threading backend, ``nova-conductor``,
``nova-scheduler`` and ``cyborg-conductor`` fork a worker from a master
process even for one worker (cotyledon): two interpreters of 110-130 MiB
each per service. Here they run in the main process (oslo.service's
``no_fork``, which stops them gracefully on SIGTERM)::

    python -m localcloud.rpc nova --config-file nova.conf
        nova-conductor and nova-scheduler in one process (one nova.conf;
        Nova's functional tests run them together too)
    python -m localcloud.rpc cyborg --config-file cyborg.conf
        cyborg-conductor (never in Nova's process: Cyborg and Nova
        register clashing options on the same global configuration)

Each does what its service's console script does (``nova.cmd.conductor``,
``nova.cmd.scheduler``, ``cyborg.cmd.conductor``) but the launch.
"""

import sys


def nova():
    from nova import monkey_patch
    monkey_patch.patch(backend='threading')

    from oslo_log import log as logging
    from oslo_reports import guru_meditation_report as gmr
    from oslo_reports import opts as gmr_opts
    from oslo_service import service as oslo_service

    from nova.conductor import rpcapi as conductor_rpcapi
    import nova.conf
    from nova import config
    from nova import objects
    from nova.scheduler import rpcapi as scheduler_rpcapi
    from nova import service
    from nova import version

    class Together(oslo_service.ServiceBase):
        """Several services started, stopped and waited for as one."""

        def __init__(self, services):
            self.services = services

        def start(self):
            for s in self.services:
                s.start()

        def stop(self):
            for s in self.services:
                s.stop()

        def wait(self):
            for s in self.services:
                s.wait()

        def reset(self):
            for s in self.services:
                s.reset()

    conf = nova.conf.CONF
    config.parse_args(sys.argv)
    logging.setup(conf, 'nova')
    objects.register_all()
    gmr_opts.set_defaults(conf)
    objects.Service.enable_min_version_cache()
    gmr.TextGuruMeditation.setup_autorun(version, conf=conf)
    both = Together([
        service.Service.create(binary='nova-conductor',
                               topic=conductor_rpcapi.RPC_TOPIC),
        service.Service.create(binary='nova-scheduler',
                               topic=scheduler_rpcapi.RPC_TOPIC)])
    service.serve(both, workers=1, no_fork=True)
    service.wait()


def cyborg():
    import cyborg.cmd  # noqa: F401 (oslo.service's threading backend first)

    from oslo_config import cfg
    from oslo_service import service as oslo_service

    from cyborg.common import constants
    from cyborg.common import service as cyborg_service

    cyborg_service.prepare_service(sys.argv)
    manager = cyborg_service.RPCService(
        'cyborg.conductor.manager', 'ConductorManager',
        constants.CONDUCTOR_TOPIC)
    launcher = oslo_service.launch(cfg.CONF, manager, workers=1,
                                   restart_method='mutate', no_fork=True)
    launcher.wait()


MAINS = {'nova': nova, 'cyborg': cyborg}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in MAINS:
        sys.exit('usage: python -m localcloud.rpc nova|cyborg '
                 '--config-file FILE')
    name = sys.argv.pop(1)
    MAINS[name]()


if __name__ == '__main__':
    main()
