"""``python -m localcloud``: the local cloud's commands.

    up [--keep] [--no-demo] [--computes N] [--pfs N] [--vfs N] [--gpus N]
       [--vgpu17 N] [--unpatched-computes N]
        Start the cloud, boot a server with an accelerator and show it
        (unless --no-demo); print the start time and total memory. Without
        --keep the cloud is torn down at the end. --vfs is per host: its
        FPGAs have N VFs in all, N // --pfs on each PF. --gpus: the
        mdev-capable GPUs of each host (default 1), vGPUs of type
        nvidia-11, 16 a GPU, reported by the sidecar's gpu driver.
        --vgpu17: the NVIDIA vGPU 17 cards of each host (default 1), H100s
        with 4 VFs each typed H100-20C when Cyborg binds it.
        --unpatched-computes adds N hosts (compute-old, compute-old2, ...)
        whose nova-compute is pristine Nova, the series reverted in a copy
        (:mod:`localcloud.pristine`): a mixed cloud.
    down      Stop every process of the cloud; fail if one is left.
    status    Which services run, their memory, where the files are.
    host stop|start|restart [--unpatched] HOST
              Stop one compute host (its nova-compute and sidecar; its
              domains and devices live on, as libvirtd and the kernel
              would) and force its nova-compute service down, as before
              a maintenance or an evacuation; start it again and wait
              until its service is up and its FPGAs are in Placement;
              or both. A failure shows the last lines of the host's log
              and of cyborg-conductor's. --unpatched: start its
              nova-compute from pristine Nova (:mod:`localcloud.pristine`),
              as a compute reverted to unpatched Nova.
    service list
    service stop [--graceful] NAME
    service start [--timeout S] NAME
    service restart [--graceful] [--timeout S] NAME
              Stop one service (SIGKILL; --graceful: SIGTERM), start it
              again and wait until it answers, or both
              (:mod:`localcloud.services`). NAME: mariadb, rabbitmq,
              keystone, placement, neutron, glance, nova-api,
              cyborg-api, nova-conductor, nova-scheduler,
              cyborg-conductor, nova-compute@HOST, sidecar@HOST.
              Services that share a process go together (placement and
              neutron; nova-conductor and nova-scheduler; a host's
              nova-compute and sidecar). ``list``: names, process, pids.
    stress [--rounds N]
              Seed 004's race under load (:mod:`localcloud.stress`): two
              servers asking for two different bitstreams booted at the
              same moment, N rounds (default 20); per round the time,
              where each landed, the function its FPGA holds (Placement
              trait and the card), its reschedules; then a summary. Exit
              status 1 if a server was ACTIVE on a wrong function or not
              ACTIVE.
    tempest [ARGS]
              ``tempest run ARGS`` in the cloud's tempest workspace.

State, logs (``logs/<service>.log``), ``openrc`` and the tempest
workspace live under ``$NOVA_CYBORG_CLOUD_DIR`` (default
/tmp/nova-cyborg-cloud); ports from ``$NOVA_CYBORG_CLOUD_PORT_BASE``
(default 25000) up, on 127.0.0.1 only.
"""

import argparse
import os
import shutil
import sys

from localcloud import access
from localcloud import cloud
from localcloud import demo
from localcloud import hosts
from localcloud import layout as layout_mod
from localcloud import pristine
from localcloud import procs
from localcloud import services
from localcloud import stress
from localcloud import upgrade


def _out(text=''):
    sys.stdout.write(text + '\n')
    sys.stdout.flush()


def cmd_up(args):
    layout = layout_mod.Layout(root=args.dir, computes=args.computes,
                               pfs=args.pfs, vfs=args.vfs, gpus=args.gpus,
                               vgpu17=args.vgpu17,
                               unpatched=args.unpatched_computes)
    # Every process on this environment's release until an upgrade.
    layout.pythons = dict({'control': sys.executable},
                          **{h: sys.executable for h in layout.hosts})
    if os.path.isdir(layout.root) and not procs.running(layout):
        shutil.rmtree(layout.root)
    _out('Starting the local cloud under %s (logs in %s)' % (
        layout.root, layout.path('logs')))
    try:
        seconds, rss = cloud.up(layout, out=_out)
        image, flavor = cloud.prepare(layout)
        access.write_openrc(layout)
        tempest_conf = access.write_tempest(layout, image, flavor)
        _out('Cloud ready: %.1f s from start, %.0f MiB total memory (RSS '
             'of every process)' % (seconds, rss / 2 ** 20))
        if not args.no_demo:
            _out('')
            demo.run(layout, cloud.IMAGE, out=_out)
    except (procs.ServiceError, demo.DemoError) as exc:
        _out('ERROR: %s' % exc)
        if not args.keep:
            cloud.down(layout)
        return 1
    _out('')
    _out('Start time %.1f s; total memory %.0f MiB' % (
        seconds, procs.memory(layout) / 2 ** 20))
    if args.keep:
        _out('The cloud keeps running: ". %s" for the openstack client; '
             'tempest.conf: %s; "python -m localcloud down" stops it.' % (
                 layout.path('openrc'), tempest_conf))
        return 0
    return cmd_down(args)


def cmd_down(args):
    layout = layout_mod.Layout.load(args.dir)
    if layout is None:
        _out('No cloud under %s' % args.dir)
        return 0
    names = cloud.down(layout)
    left = procs.running(layout)
    if left:
        _out('ERROR: processes left: %s' % left)
        return 1
    _out('Stopped %s; no process left.' % (', '.join(names) or 'nothing'))
    return 0


def cmd_status(args):
    layout = layout_mod.Layout.load(args.dir)
    running = procs.running(layout) if layout else {}
    if not running:
        _out('No cloud runs under %s' % args.dir)
        return 1
    for name, pids in sorted(running.items()):
        _out('%-18s %s' % (name, ' '.join(map(str, pids))))
    _out('total memory %.0f MiB; openrc %s; tempest.conf %s' % (
        procs.memory(layout) / 2 ** 20, layout.path('openrc'),
        layout.path('tempest', 'etc', 'tempest.conf')))
    return 0


def _running_layout(args, up):
    """The layout of the cloud running under ``args.dir``, or None after
    saying how to start one (``python -m localcloud up <up>``)."""
    layout = layout_mod.Layout.load(args.dir)
    if layout is None or not procs.running(layout):
        _out('No cloud runs under %s: "python -m localcloud up %s" first'
             % (args.dir, up))
        return None
    return layout


def cmd_host(args):
    layout = _running_layout(args, '--keep')
    if layout is None:
        return 1
    kwargs = {}
    if args.unpatched:
        if args.action == 'stop':
            _out('ERROR: --unpatched is for start, restart and reboot')
            return 2
        kwargs['unpatched'] = True
    try:
        getattr(hosts, args.action)(layout, args.host, out=_out, **kwargs)
    except (ValueError, procs.ServiceError, pristine.NotPristine) as exc:
        _out('ERROR: %s' % exc)
        return 1
    return 0


def cmd_service(args):
    layout = _running_layout(args, '--keep')
    if layout is None:
        return 1
    if args.action == 'list':
        if args.name:
            _out('ERROR: "service list" takes no name')
            return 2
        _out('%-24s %-18s %s' % ('SERVICE', 'PROCESS', 'PIDS'))
        for name, process, pids in services.listing(layout):
            _out('%-24s %-18s %s' % (name, process, ' '.join(
                map(str, pids)) or '(stopped)'))
        return 0
    if not args.name:
        _out('ERROR: "service %s" needs a service name' % args.action)
        return 2
    try:
        if args.action == 'stop':
            services.stop(layout, args.name, graceful=args.graceful,
                          out=_out)
        elif args.action == 'start':
            services.start(layout, args.name, out=_out,
                           timeout=args.timeout)
        else:
            services.restart(layout, args.name, graceful=args.graceful,
                             out=_out, timeout=args.timeout)
    except (ValueError, procs.ServiceError) as exc:
        _out('ERROR: %s' % exc)
        return 1
    return 0


def cmd_stress(args):
    layout = _running_layout(args, '--keep --no-demo')
    if layout is None:
        return 1
    if args.rounds < 1:
        _out('ERROR: --rounds must be at least 1, not %d' % args.rounds)
        return 2
    try:
        return 0 if stress.run(layout, args.rounds, out=_out) else 1
    except stress.StressError as exc:
        _out('ERROR: %s' % exc)
        return 1


def cmd_upgrade(args):
    layout = _running_layout(args, '--keep --no-demo')
    if layout is None:
        return 1
    try:
        seconds = upgrade.run(layout, args.to_env, computes=args.computes,
                              out=_out)
    except (upgrade.UpgradeError, procs.ServiceError) as exc:
        _out('ERROR: %s' % exc)
        return 1
    _out('Upgrade step done in %.1f s' % seconds)
    return 0


def cmd_tempest(args):
    layout = _running_layout(args, '--keep --no-demo')
    if layout is None:
        return 1
    workspace = layout.path('tempest')
    os.chdir(workspace)
    argv = [layout.bin('tempest'), 'run', '--config-file',
            os.path.join(workspace, 'etc', 'tempest.conf')] + args.args
    os.execv(argv[0], argv)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m localcloud',
        description='A local cloud that boots an accelerator server.')
    parser.add_argument('--dir', default=layout_mod.DEFAULT_DIR,
                        help='state directory (default %(default)s)')
    sub = parser.add_subparsers(dest='command', required=True)
    up = sub.add_parser('up', help='start the cloud and boot the demo')
    up.add_argument('--keep', action='store_true',
                    help='leave the cloud running (with an openrc)')
    up.add_argument('--no-demo', action='store_true',
                    help='start the cloud only')
    up.add_argument('--computes', type=int, default=2,
                    help='simulated compute hosts (default %(default)s)')
    up.add_argument('--pfs', type=int, default=1,
                    help='FPGA PFs per host (default %(default)s)')
    up.add_argument('--vfs', type=int, default=4,
                    help='FPGA VFs (attach handles) per host, split '
                    'evenly among its --pfs PFs (default %(default)s)')
    up.add_argument('--gpus', type=int, default=1,
                    help='mdev-capable GPUs (vGPUs, nvidia-11) per host '
                    '(default %(default)s)')
    up.add_argument('--vgpu17', type=int, default=1,
                    help='NVIDIA vGPU 17 cards (H100s with 4 VFs, each '
                    'typed H100-20C at bind) per host (default '
                    '%(default)s)')
    up.add_argument('--unpatched-computes', type=int, default=0,
                    help='more hosts whose nova-compute runs unpatched '
                    'Nova (compute-old, ...; default %(default)s)')
    up.set_defaults(func=cmd_up)
    sub.add_parser('down', help='stop the cloud').set_defaults(func=cmd_down)
    sub.add_parser('status', help='show what runs').set_defaults(
        func=cmd_status)
    host = sub.add_parser('host', help='stop, start, restart or reboot '
                          'one compute host (reboot: its domains shut off '
                          'and its devices reset, as a host boot leaves '
                          'them)')
    host.add_argument('action', choices=('stop', 'start', 'restart',
                                         'reboot'))
    host.add_argument('host', help='compute1, compute2, ..., compute-old')
    host.add_argument('--unpatched', action='store_true',
                      help='start its nova-compute from pristine Nova, as '
                      'a compute reverted to unpatched Nova (until its '
                      'next start or restart)')
    host.set_defaults(func=cmd_host)
    service = sub.add_parser('service', help='stop, start or restart one '
                             'service; list them')
    service.add_argument('action', choices=('list', 'stop', 'start',
                                            'restart'))
    service.add_argument('name', nargs='?',
                         help='mariadb, rabbitmq, nova-api, '
                         'nova-compute@compute1, ... ("service list")')
    service.add_argument('--graceful', action='store_true',
                         help='stop with SIGTERM (SIGKILL after 10 s) '
                         'instead of SIGKILL')
    service.add_argument('--timeout', type=int, default=services.TIMEOUT,
                         help='seconds start waits for an answer '
                         '(default %(default)s)')
    service.set_defaults(func=cmd_service)
    stress_cmd = sub.add_parser(
        'stress', help='boot two servers with different bitstreams at '
        'once, round after round (seed 004)')
    stress_cmd.add_argument('--rounds', type=int, default=20,
                            help='rounds (default %(default)s)')
    stress_cmd.set_defaults(func=cmd_stress)
    upgrade_cmd = sub.add_parser(
        'upgrade', help='upgrade the running cloud to the release of '
        'another environment: control plane first, then one compute at '
        'a time')
    upgrade_cmd.add_argument('--to-env', required=True,
                             help='the virtualenv of the new release, '
                             'its Nova patched (e.g. .tox/cloud)')
    upgrade_cmd.add_argument('--computes', type=int,
                             help='upgrade only this many more computes '
                             '(default: all); the others stay on the old '
                             'release (a mixed cloud)')
    upgrade_cmd.set_defaults(func=cmd_upgrade)
    sub.add_parser('tempest', help='run tempest against it (the arguments '
                   'that follow are tempest run\'s)').set_defaults(
                       func=cmd_tempest)
    argv = sys.argv[1:] if argv is None else list(argv)
    tempest_args = []
    if 'tempest' in argv:       # everything after it is tempest's
        at = argv.index('tempest')
        argv, tempest_args = argv[:at + 1], argv[at + 1:]
    args = parser.parse_args(argv)
    if args.func is cmd_up:
        try:
            layout_mod.check_fpgas(args.pfs, args.vfs)
        except ValueError as exc:
            parser.error(str(exc))
        if args.gpus < 0:
            parser.error('--gpus must be 0 or more, not %d' % args.gpus)
        if args.vgpu17 < 0:
            parser.error('--vgpu17 must be 0 or more, not %d' % args.vgpu17)
    args.args = tempest_args
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
