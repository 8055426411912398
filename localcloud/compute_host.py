"""A simulated compute host: the real nova-compute and the sidecar.

Run by :mod:`localcloud.cloud` as::

    python -m localcloud.compute_host --host compute1 --pfs 1 --vfs 4 \\
        --gpus 1 --domain-xml-dir DIR --sidecar-config FILE \\
        --cloud-dir ROOT --config-file nova.conf --config-file compute1.conf

There is no accelerator and no hypervisor here, so the host is simulated
the way Nova's own functional tests do it: nova-compute is the real service
(``nova.cmd.compute.main``, patched Nova, ``libvirt.LibvirtDriver``) with
libvirt replaced by Nova's fakelibvirt, which shows ``--gpus``
mdev-capable GPUs (vGPUs), then ``--pfs`` FPGA PFs with ``--vfs`` VFs
each; guest disks are not written (Nova's image backend fixture). After
the FPGAs come ``--migratable-pfs`` (default 1) plain PFs whose VFs
support VFIO migration: the devices of live migration tests; then
``--vgpu17`` NVIDIA H100s in vGPU 17's shape, whose VFs the sidecar types
through ``nvidia/current_vgpu_type`` (:class:`localcloud.devices.
NvidiaKernel` makes the driver's reaction). The same
PCI functions are written as a sysfs tree that the real sidecar discovers
and reports to cyborg-conductor (:mod:`localcloud.devices`), and the
sidecar asks the same fakelibvirt connection which devices the domains
use. That is why both run in this one process: on a real host they share
libvirtd. The mdevs the sidecar creates and removes for vGPUs appear in
and leave both the tree and fakelibvirt's node devices, as the kernel and
libvirtd make them (:class:`localcloud.devices.MdevKernel`); the FPGA
functions that running guests hold are on ``vfio-pci`` in the tree, their
DFL devices gone, as libvirt's managed hostdevs leave them
(:mod:`tests.functional.harness.guest_kernel`).

Every domain's XML is written to ``--domain-xml-dir/<uuid>.xml`` whenever
libvirt is given it, and removed when the domain is undefined, so that a
user (and tempest) can read what Nova defined. The hosts share that
directory, and a live migration hands a domain over through it
(:mod:`localcloud.migration`). Each host has its own address and its own
instances path, as separate hosts do; Nova reaches the other's with SSH,
for which :mod:`localcloud.remotefs` stands in.

A restart of this process is a restart of nova-compute and the sidecar on
a real host, where libvirtd, its domains and the devices' state live on:
the host defines and starts its domains again from those files (in the
state they were left in) and takes the FPGA regions' loaded functions and
the mdevs from the sysfs tree it wrote before (the mdevs become libvirt
node devices again), then starts the services.
Nova's ``init_host`` finds its guests running; a domain whose server was
deleted while the host was down is reaped by nova-compute
(``running_deleted_instance_action``), which removes its file. The
sidecar starts first and nova-compute once the sidecar's first cycle is
done, as systemd orders them on a real host (:mod:`localcloud.boot_order`).
Once the sidecar has found Placement matching the host's devices,
``--ready-file`` is written.
"""

import argparse
import glob
import json
import os
import sys
import threading

from nova.cmd import compute as compute_cmd  # noqa: I100 (threading first)

import fixtures  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from oslo_utils import versionutils  # noqa: E402

from nova.tests import fixtures as nova_fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402
from nova.virt.libvirt import driver as libvirt_driver  # noqa: E402

from localcloud import boot_order  # noqa: E402
from localcloud import devices  # noqa: E402
from localcloud import layout as layout_mod  # noqa: E402
from localcloud import migration  # noqa: E402
from localcloud import pristine  # noqa: E402
from localcloud import reboot  # noqa: E402
from localcloud import remotefs  # noqa: E402
from tests.functional.harness import guest_kernel  # noqa: E402

LOG = logging.getLogger('localcloud.compute_host')


def _create_instance_dir(context, instance, *args, **kwargs):
    """Instead of the guest's disks: only its directory, which resize,
    migrate and rescue move and write files into."""
    from nova.virt.libvirt import utils as libvirt_utils
    os.makedirs(libvirt_utils.get_instance_path(instance), exist_ok=True)
    return False, False


_MANAGED_SAVE_REMOVE = fakelibvirt.Domain.managedSaveRemove


def _managed_save_remove(domain, flags=0):
    """fakelibvirt's ``managedSaveRemove`` with libvirt-python's signature
    (``virDomain.managedSaveRemove(flags=0)``): fakelibvirt's own
    ``undefineFlags`` calls it without flags, and deleting a suspended
    server failed with TypeError."""
    return _MANAGED_SAVE_REMOVE(domain, flags)


def _host_fixtures(connection):
    """What Nova's libvirt functional base mocks about the host."""
    mock = fixtures.MockPatch
    driver = 'nova.virt.libvirt.driver.'
    return [
        fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.managedSaveRemove',
            _managed_save_remove),
        nova_fixtures.LibvirtImageBackendFixture(),
        nova_fixtures.CGroupsFixture(),
        nova_fixtures.LibvirtFixture(),
        nova_fixtures.OSBrickFixture(),
        nova_fixtures.PrivsepFixture(),
        mock(driver + 'LibvirtDriver._create_image',
             side_effect=_create_instance_dir),
        mock(driver + 'LibvirtDriver._get_local_gb_info',
             return_value={'total': 512, 'used': 0, 'free': 512}),
        mock(driver + 'LibvirtDriver._get_instance_disk_info_from_config',
             return_value=[]),
        mock(driver + 'libvirt_utils.is_valid_hostname', return_value=True),
        mock(driver + 'libvirt_utils.file_open',
             side_effect=lambda *a, **k: __import__('io').BytesIO(b'')),
        mock('nova.privsep.utils.supports_direct_io', return_value=True),
        mock('nova.virt.libvirt.host.Host.get_online_cpus',
             return_value=set(range(16))),
        mock('nova.virt.libvirt.host.Host.get_connection',
             return_value=connection),
    ]


#: The libvirt and QEMU versions the hosts report: those with which Nova
#: (and nova_cyborg's pre-checks) live-migrate VFIO PCI devices (variant
#: drivers) and mdevs; Nova's functional tests of those start their hosts
#: with them too. fakelibvirt's defaults are Nova's minimum versions.
LIBVIRT_VERSION = versionutils.convert_version_to_int(max(
    libvirt_driver.MIN_VFIO_PCI_VARIANT_LIBVIRT_VERSION,
    libvirt_driver.MIN_MDEV_LIVEMIG_LIBVIRT_VERSION))
QEMU_VERSION = versionutils.convert_version_to_int(max(
    libvirt_driver.MIN_VFIO_PCI_VARIANT_QEMU_VERSION,
    libvirt_driver.MIN_MDEV_LIVEMIG_QEMU_VERSION))

#: Domain methods after which the domain's state is saved.
STATE_CHANGES = ('createWithFlags', 'destroy', 'suspend', 'resume',
                 'shutdown', 'reset', 'managedSave', 'managedSaveRemove')


class DomainFiles:
    """Keep ``<dir>/<uuid>.xml`` in step with the fake libvirt's domains.

    Hosts share the directory: after a resize or a migration the source
    undefines the domain the destination has defined again, so a host
    removes a file only if it wrote it last (``<uuid>.host`` says which),
    and saves the domain's state (``<uuid>.state``: running, paused or
    shut off, and whether it has a managed save image) only for the
    domains it owns. :meth:`restore` defines them again after a restart.
    """

    SUFFIXES = ('.xml', '.host', '.state')

    def __init__(self, directory, host):
        self.directory = directory
        self.host = host
        #: Held while the connection's domains and this host's files
        #: change together (define and write, undefine and remove) and
        #: while :class:`localcloud.migration.Migrations` compares them.
        self.lock = threading.RLock()
        os.makedirs(directory, exist_ok=True)

    def _path(self, domain, suffix='.xml'):
        return os.path.join(self.directory, domain.UUIDString() + suffix)

    def _replace(self, path, text):
        with open(path + '.tmp', 'w') as f:
            f.write(text)
        os.replace(path + '.tmp', path)

    def _owned(self, domain):
        try:
            with open(self._path(domain, '.host')) as f:
                return f.read() == self.host
        except FileNotFoundError:
            return False

    def write(self, domain):
        self._replace(self._path(domain, '.host'), self.host)
        self._replace(self._path(domain), domain.XMLDesc(0))
        self._write_state(domain)

    def _write_state(self, domain):
        self._replace(self._path(domain, '.state'), json.dumps({
            'state': domain.info()[0],
            'managed_save': bool(domain.hasManagedSaveImage(0))}))

    def save_state(self, domain):
        if self._owned(domain):
            self._write_state(domain)

    def remove(self, domain):
        if not self._owned(domain):
            return
        for suffix in self.SUFFIXES:
            try:
                os.unlink(self._path(domain, suffix))
            except FileNotFoundError:
                pass

    def saved(self):
        """``{uuid: (xml, state dict)}`` of the domains this host owns."""
        result = {}
        for path in sorted(glob.glob(os.path.join(self.directory,
                                                  '*.host'))):
            uuid = os.path.basename(path)[:-len('.host')]
            base = path[:-len('.host')]
            try:
                with open(path) as f:
                    if f.read() != self.host:
                        continue
                with open(base + '.xml') as f:
                    xml = f.read()
            except FileNotFoundError:
                continue
            try:
                with open(base + '.state') as f:
                    state = json.load(f)
            except (FileNotFoundError, ValueError):
                state = {}
            result[uuid] = (xml, state)
        return result

    def restore(self, connection):
        """Define this host's domains in ``connection`` again, each in the
        state it was saved in (running when unknown); returns their
        UUIDs. Call it before :meth:`fixtures` are set up: nothing is
        written."""
        saved = self.saved()
        for uuid, (xml, state) in saved.items():
            domain = connection.defineXML(xml)
            power = state.get('state', fakelibvirt.VIR_DOMAIN_RUNNING)
            if power in (fakelibvirt.VIR_DOMAIN_RUNNING,
                         fakelibvirt.VIR_DOMAIN_PAUSED):
                domain.create()
            if power == fakelibvirt.VIR_DOMAIN_PAUSED:
                domain.suspend()
            if state.get('managed_save'):
                domain.managedSave(0)
        return list(saved)

    def fixtures(self):
        """The patches of fakelibvirt that keep the files. A domain
        defined or undefined changes the connection and the files under
        :attr:`lock`: a live migration's take-over never sees one without
        the other (it would define the domain a second time, or bring an
        undefined one back)."""
        files = self

        def after(name, action, locked=False):
            real = getattr(fakelibvirt.Domain, name)

            def wrapper(domain, *args, **kwargs):
                if not locked:
                    result = real(domain, *args, **kwargs)
                    action(domain)
                    return result
                with files.lock:
                    result = real(domain, *args, **kwargs)
                    action(domain)
                    return result
            return fixtures.MonkeyPatch(
                'nova.tests.fixtures.libvirt.Domain.' + name, wrapper)

        def returned(name):
            real = getattr(fakelibvirt.Connection, name)

            def wrapper(conn, *args, **kwargs):
                with files.lock:
                    domain = real(conn, *args, **kwargs)
                    files.write(domain)
                    return domain
            return fixtures.MonkeyPatch(
                'nova.tests.fixtures.libvirt.Connection.' + name, wrapper)

        return [returned('defineXML'), returned('createXML'),
                after('undefine', files.remove, locked=True),
                after('undefineFlags', files.remove, locked=True),
                after('attachDeviceFlags', files.write),
                after('detachDeviceFlags', files.write)] + [
                    after(name, files.save_state) for name in STATE_CHANGES]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--host', required=True)
    parser.add_argument('--pfs', type=int, default=1)
    parser.add_argument('--vfs', type=int, default=4)
    parser.add_argument('--migratable-pfs', type=int, default=1,
                        help='PFs after the FPGAs whose VFs may be live '
                             'migrated (reported by the generic PCI driver)')
    parser.add_argument('--gpus', type=int, default=0,
                        help='mdev-capable GPUs (vGPUs, reported by the '
                             'gpu driver), before the FPGAs')
    parser.add_argument('--vgpu17', type=int, default=0,
                        help='NVIDIA vGPU 17 cards (H100s whose VFs take '
                             'a vGPU type), after the PFs')
    parser.add_argument('--sysfs-root', required=True)
    parser.add_argument('--sidecar-config', required=True)
    parser.add_argument('--domain-xml-dir', required=True)
    parser.add_argument('--ready-file',
                        help='written once Placement matches the devices')
    parser.add_argument('--cloud-dir', required=True,
                        help='the cloud\'s state directory (its layout: '
                             'the other hosts\' addresses and disks)')
    parser.add_argument('--pristine-nova',
                        help='an unpatched host: check that Nova comes '
                             'from this copy (localcloud.pristine)')
    args, nova_args = parser.parse_known_args()
    if args.pristine_nova:
        print(pristine.assert_imported(args.pristine_nova), flush=True)
    layout = layout_mod.Layout.load(args.cloud_dir)
    peers = remotefs.Peers(layout, args.host)

    connection = fakelibvirt.Connection(
        'qemu:///system', version=LIBVIRT_VERSION, hv_version=QEMU_VERSION,
        host_info=fakelibvirt.HostInfo(cpu_nodes=2, cpu_sockets=1,
                                       cpu_cores=2, cpu_threads=2,
                                       kB_mem=32 * 1024 * 1024),
        pci_info=fakelibvirt.HostPCIDevicesInfo(**devices.pci_info(
            args.pfs, args.vfs, args.migratable_pfs, args.gpus,
            args.vgpu17)),
        hostname=args.host)
    domains = DomainFiles(args.domain_xml_dir, args.host)
    booted = reboot.apply(layout, args.host, domains, devices.simulated_host(
        args.pfs, args.vfs, args.migratable_pfs, args.gpus,
        args.vgpu17).load_state(
            args.sysfs_root), args.sysfs_root)
    if booted is not None:
        print('Host rebooted: domains shut off (%s), devices reset' % (
            ', '.join(booted) or 'none'), flush=True)
    restored = domains.restore(connection)
    if restored:
        # Before logging is set up: straight to this host's log.
        print('Domains defined again from %s: %s' % (
            args.domain_xml_dir, ', '.join(restored)), flush=True)
    host = devices.simulated_host(
        args.pfs, args.vfs, args.migratable_pfs, args.gpus,
        args.vgpu17).load_state(
            args.sysfs_root)
    host.write(args.sysfs_root)
    kernel = devices.MdevKernel(host, connection)
    mdevs = kernel.restore()
    if mdevs:
        print('mdevs taken back from %s: %s' % (
            args.sysfs_root, ', '.join(mdevs)), flush=True)
    for fixture in (_host_fixtures(connection) + domains.fixtures() +
                    [reboot.GuestStarts(layout, args.host, host)] +
                    migration.Migrations(domains,
                                         peers.addresses).fixtures() +
                    remotefs.fixtures_for(peers) + kernel.fixtures() +
                    devices.NvidiaKernel(host).fixtures() +
                    # The FPGA functions its guests hold are on vfio-pci.
                    [guest_kernel.GuestKernel(lambda: connection, host)]):
        fixture.setUp()
    sys.argv = ['nova-compute'] + nova_args
    try:
        boot_order.start_in_order(lambda: boot_order.start_sidecar(
            args.sidecar_config, connection, args.ready_file),
            compute_cmd.main, out=lambda line: print(line, flush=True))
    except boot_order.NotReady as exc:
        print('The sidecar is not ready (%s); stopping the host' % exc,
              flush=True)
        os._exit(1)


if __name__ == '__main__':
    sys.exit(main())
