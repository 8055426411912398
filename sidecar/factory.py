"""Build a sidecar from its configuration.

Everything the daemon talks to can be handed in instead (a transport, a
libvirt connection factory), which is how the functional tests run one
sidecar per simulated host beside a Nova whose hosts are Nova's
fakelibvirt.
"""

import os

from sidecar import conductor_view
from sidecar import control
from sidecar import cyborg
from sidecar import domains as domains_mod
from sidecar import glance
from sidecar import health
from sidecar import holds as holds_mod
from sidecar import inventory as inventory_mod
from sidecar import journal as journal_mod
from sidecar import mdev
from sidecar import placement as placement_mod
from sidecar import program
from sidecar import programmers
from sidecar import reconcile
from sidecar import report
from sidecar import rpc
from sidecar import service
from sidecar.sources import libvirt as libvirt_source
from sidecar.sources import sysfs


def libvirt_connector(uri):
    """A connection factory opening ``uri`` read-only once, lazily."""
    cache = []

    def connect():
        if not cache:
            cache.append(libvirt_source.open_readonly(uri))
        return cache[0]
    return connect


def build(conf, transport=None, connect=None):
    """Return a :class:`sidecar.service.Sidecar` ready to ``start()``."""
    connect = connect or libvirt_connector(conf.sidecar.libvirt_uri)
    if conf.sidecar.discovery_source == 'libvirt':
        source = libvirt_source.LibvirtSource(
            connect(), sysfs_root=conf.sidecar.sysfs_root)
    else:
        source = sysfs.SysfsSource(conf.sidecar.sysfs_root)
    transport = transport or rpc.get_transport(conf)
    inventory = health.MonitoredInventory(
        inventory_mod.load_drivers(conf, source))
    domains = domains_mod.DomainInspector(connect)
    placement = placement_mod.PlacementClient(conf)
    rp_name = conf.sidecar.resource_provider_name or conf.host
    reporter = report.Reporter(rpc.ConductorClient(conf, transport),
                               conf.host, rp_name,
                               conf.sidecar.resync_interval)
    holds = holds_mod.Holds(
        os.path.join(conf.sidecar.state_path, holds_mod.FILE),
        admit_new=conf.sidecar.admit_new_devices)
    inventory.monitor = health.Monitor(
        conf.host, conf.sidecar.sysfs_root, holds=holds,
        state_path=conf.sidecar.state_path,
        users=health.users_from(placement, domains, conf.sidecar.sysfs_root))
    programs = program.ProgramManager(
        conf.host, inventory, programmers.ByDriver(conf),
        glance.ImageClient(conf), placement, domains,
        journal_mod.Journal(conf.sidecar.state_path),
        cyborg.AcceleratorClient(conf), holds=holds)
    mdevs = mdev.MdevManager(conf.sidecar.sysfs_root, inventory, domains)
    reconciler = reconcile.Reconciler(conf.host, placement,
                                      idle=programs.idle, held=holds.held)
    view = conductor_view.ConductorView(
        conf.host, cyborg.AcceleratorClient(conf), glance.ImageClient(conf),
        placement, programs.idle)
    sidecar = service.Sidecar(conf, transport, inventory, reporter,
                              programs, mdevs, placement, reconciler,
                              view=view, holds=holds)
    sidecar.control = control.ControlServer(conf.sidecar.state_path, sidecar)
    return sidecar
