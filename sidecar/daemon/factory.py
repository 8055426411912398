"""Build a sidecar from its configuration.

Everything the daemon talks to can be handed in instead (a transport, a
libvirt connection factory), which is how the functional tests run one
sidecar per simulated host beside a Nova whose hosts are Nova's
fakelibvirt.
"""

import os

from sidecar.daemon import control
from sidecar.daemon import rpc
from sidecar.daemon import service
from sidecar.discovery import domains as domains_mod
from sidecar.discovery import guests
from sidecar.discovery import health
from sidecar.discovery import health_wiring
from sidecar.discovery import inventory as inventory_mod
from sidecar.discovery import nvml_health
from sidecar.drivers import gpu_vfio
from sidecar.program import conductor_view
from sidecar.program import cyborg
from sidecar.program import glance
from sidecar.program import journal as journal_mod
from sidecar.program import manager as program
from sidecar.program import mdev
from sidecar.program import programmers
from sidecar.program import vgpu_types
from sidecar.report import placement as placement_mod
from sidecar.report import reconcile
from sidecar.report import reporter as report
from sidecar.sources import libvirt as libvirt_source
from sidecar.sources import sysfs
from sidecar.state import holds as holds_mod


def libvirt_connector(uri):
    """A connection factory opening ``uri`` read-only once, lazily."""
    cache = []

    def connect():
        if not cache:
            cache.append(libvirt_source.open_readonly(uri))
        return cache[0]
    return connect


def build(conf, transport=None, connect=None):
    """Return a :class:`sidecar.daemon.service.Sidecar` ready to
    ``start()``."""
    # First: a configuration error in the programmers (a removed one, a
    # command without its template) stops the daemon before it connects
    # anywhere.
    by_driver = programmers.ByDriver(conf)
    connect = connect or libvirt_connector(conf.sidecar.libvirt_uri)
    if conf.sidecar.discovery_source == 'libvirt':
        source = libvirt_source.LibvirtSource(
            connect(), sysfs_root=conf.sidecar.sysfs_root)
    else:
        source = sysfs.SysfsSource(conf.sidecar.sysfs_root)
    transport = transport or rpc.get_transport(conf)
    drivers = inventory_mod.load_drivers(conf, source)
    for driver in drivers:
        if hasattr(driver, 'keep_names'):
            driver.keep_names()  # vGPU 17 type names outlive full cards
    inventory = health_wiring.MonitoredInventory(drivers)
    domains = domains_mod.DomainInspector(connect)
    placement = placement_mod.PlacementClient(conf)
    rp_name = conf.sidecar.resource_provider_name or conf.host
    reporter = report.Reporter(rpc.ConductorClient(conf, transport),
                               conf.host, rp_name,
                               conf.sidecar.resync_interval,
                               pin=conf.upgrade_levels.cyborg_conductor)
    holds = holds_mod.Holds(
        os.path.join(conf.sidecar.state_path, holds_mod.FILE),
        admit_new=conf.sidecar.admit_new_devices)
    inventory.monitor = health.Monitor(
        conf.host, conf.sidecar.sysfs_root, holds=holds,
        state_path=conf.sidecar.state_path,
        users=health_wiring.users_from(placement, domains,
                                       conf.sidecar.sysfs_root),
        unknown_after=conf.health.unknown_after)
    inventory.nvml = nvml_health.NvmlHealth.from_conf(conf)
    programs = program.ProgramManager(
        conf.host, inventory, by_driver,
        glance.ImageClient(conf), placement, domains,
        journal_mod.Journal(conf.sidecar.state_path),
        cyborg.AcceleratorClient(conf), holds=holds)
    # vGPU 17 types set at bind: one lock per card with programming, so no
    # report runs while a type is written.
    vgpu = vgpu_types.VgpuTypeSetter(
        conf.host, conf.sidecar.sysfs_root, inventory, placement, domains,
        journal_mod.Journal(conf.sidecar.state_path),
        cyborg.AcceleratorClient(conf),
        gpu_vfio.parse_offers(conf.gpu.vfio_vgpu_types),
        lock_for=programs.lock_for, held=programs.held)
    mdevs = mdev.MdevManager(conf.sidecar.sysfs_root, inventory, domains,
                             vgpu_types=vgpu, host=conf.host,
                             cyborg=cyborg.AcceleratorClient(conf))
    reconciler = reconcile.Reconciler(conf.host, placement,
                                      idle=programs.idle, held=holds.held)
    view = conductor_view.ConductorView(
        conf.host, cyborg.AcceleratorClient(conf), glance.ImageClient(conf),
        placement, programs.idle)
    sidecar = service.Sidecar(conf, transport, inventory, reporter,
                              programs, mdevs, placement, reconciler,
                              view=view, holds=holds)
    sidecar.watch = guests.GuestWatch(
        conf.host, conf.sidecar.sysfs_root, domains,
        cyborg.AcceleratorClient(conf).arqs_of,
        state_path=conf.sidecar.state_path)
    sidecar.control = control.ControlServer(conf.sidecar.state_path, sidecar)
    return sidecar
