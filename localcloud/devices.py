"""The devices of a simulated compute host (:mod:`localcloud.compute_host`).

fakelibvirt's PCI devices (``HostPCIDevicesInfo``, bus 0x81) in its
order: first ``gpus`` mdev-capable GPUs (NVIDIA ``10de:0ffe``, mdev type
``nvidia-11`` with 16 instances), then ``pfs`` FPGA PFs, then
``migratable_pfs`` plain PFs, each PF with its VFs. :func:`simulated_host`
writes the same functions as the sysfs tree that the real sidecar
discovers: its ``gpu`` driver reports each GPU as a VGPU provider with an
MDEV attach handle per instance (``[gpu]`` options:
``localcloud.configs.gpu_options``), its ``fpga`` driver the FPGAs (Intel DFL
cards), its ``pci`` driver the plain PFs' live-migratable VFs.

When Cyborg binds a VGPU accelerator request, the sidecar creates the
ARQ's mdev (``create_vgpu_mdev``) by writing its UUID to the type's
``create`` attribute, and removes it when the request is unbound (the
server deleted or moved away) by writing ``1`` to the mdev's ``remove``
(the kernel's Documentation/ABI/testing/sysfs-bus-vfio-mdev and
Documentation/driver-api/vfio-mediated-device.rst; a type without an
available instance refuses ``create``).
On a real host the kernel then adds or removes the mdev's directories in
sysfs and libvirtd shows or drops the node device
``mdev_<uuid>_<parent>``, which Nova looks up before it defines the
guest with a ``<hostdev type='mdev'>``. :class:`MdevKernel` does both for
the simulated host: its tree (:class:`sidecar_simulator.host.SimulatedHost`)
and its fakelibvirt connection, which nova-compute and the sidecar share.
A restarted host takes its mdevs back from the tree (``load_state``), and
:meth:`MdevKernel.restore` shows them in the new connection, as libvirtd
(which lives on) would.
"""

import functools
import os
import threading

import fixtures

from nova.tests.fixtures import libvirt as fakelibvirt

from localcloud import layout as layout_mod
from sidecar import exception
from sidecar import privileged
from sidecar_simulator import host as simulator
from sidecar_simulator import nvidia

#: The vendor and product ids of the PFs whose VFs may be live migrated
#: (fakelibvirt's SR-IOV PF and VF); the sidecar's generic PCI driver
#: reports them (``localcloud.configs.MIGRATABLE_SPEC``).
MIGRATABLE_PF = ('8086', '1528', '1515')
#: The vGPU 17 card of the hosts (sidecar_simulator.nvidia.MODELS).
VGPU17_MODEL = 'h100-pcie'


def pci_info(pfs, vfs, migratable_pfs=0, gpus=0, vgpu17=0):
    """fakelibvirt's PCI devices: ``gpus`` mdev-capable GPUs, ``pfs``
    FPGA PFs, ``migratable_pfs`` PFs whose VFs support VFIO migration
    (:data:`MIGRATABLE_PF`) then ``vgpu17`` vGPU 17 cards (their VFs), each
    PF with ``vfs // pfs`` VFs (``vfs`` VFs in all on the FPGAs)."""
    total = pfs + migratable_pfs + vgpu17
    return dict(num_pci=0, num_pfs=total, num_mdevcap=gpus,
                num_vfs=(vfs // pfs if pfs else vfs) * total)


def simulated_host(pfs, vfs, migratable_pfs=0, gpus=0, vgpu17=0):
    """The sysfs view of fakelibvirt's PCI devices: the GPUs, each offering
    its mdev types; the first ``pfs`` PFs are FPGAs (Intel DFL cards,
    each port released to a VF: 1 to 4 VFs a PF; without VFs one port on
    the PF), the next ``migratable_pfs`` plain PFs whose VFs may be live
    migrated, the last ``vgpu17`` NVIDIA H100s in vGPU 17's shape
    (:data:`VGPU17_MODEL`: the PF and its VFs on ``nvidia``, each VF
    typed by a write to its ``nvidia/current_vgpu_type``;
    :class:`sidecar_simulator.nvidia.NvidiaHost`, the host's ``nvidia``
    extension, whose :class:`NvidiaKernel` takes the sidecar's writes).

    Written with ``load_state(root).write(root)``: a restarted host keeps
    what its devices had loaded, the mdevs it had and its VFs' vGPU
    types."""
    layout_mod.check_fpgas(pfs, vfs)
    layout = simulator.from_fakelibvirt(
        **pci_info(pfs, vfs, migratable_pfs, gpus, vgpu17))
    host = simulator.SimulatedHost()
    nvidia_cards = nvidia.NvidiaHost(host) if vgpu17 else None
    fpgas = plain = 0
    for f in layout.functions.values():
        if f.mdev_types:
            host.add_gpu(f.vendor_id, f.product_id, f.class_id,
                         address=f.address, mdev_types=f.mdev_types,
                         numa_node=f.numa_node)
        elif f.physfn is not None:
            continue
        elif fpgas < pfs:
            host.add_fpga(address=f.address, num_vfs=len(f.virtfns))
            fpgas += 1
        elif plain < migratable_pfs:
            vendor, product, vf_product = MIGRATABLE_PF
            host.add_pf(vendor_id=vendor, product_id=product,
                        address=f.address, num_vfs=len(f.virtfns),
                        vf_product_id=vf_product)
            plain += 1
        else:
            nvidia_cards.add_vfio_vgpu_card(
                VGPU17_MODEL, num_vfs=len(f.virtfns), address=f.address,
                numa_node=f.numa_node)
    return host


def node_name(mdev_uuid, parent):
    """libvirt's node device name of an mdev:
    ``mdev_<uuid>_<parent address>``, ``-``, ``:`` and ``.`` made ``_``."""
    return 'mdev_%s_%s' % (mdev_uuid.replace('-', '_'),
                           parent.replace(':', '_').replace('.', '_'))


class MdevKernel:
    """What the kernel and libvirtd do with the sidecar's mdev writes.

    :param host: the :class:`~sidecar_simulator.host.SimulatedHost`, its
        tree written (``host.root``).
    :param connection: the host's fakelibvirt connection.
    """

    def __init__(self, host, connection):
        self.host = host
        self.connection = connection
        self._lock = threading.Lock()

    def mdevs(self):
        """``{mdev uuid: (parent address, type)}`` of the host's mdevs."""
        return {uuid: (f.address, t.type_id)
                for f in self.host.functions.values()
                for t in f.mdev_types for uuid in t.mdevs}

    def _show(self, parent, mdev_type, mdev_uuid):
        name = node_name(mdev_uuid, parent)
        self.connection.mdev_info.devices[name] = fakelibvirt.FakeMdevDevice(
            name, mdev_type, 'pci_' + parent.replace(':', '_')
            .replace('.', '_'))

    def restore(self):
        """Show the mdevs of the tree as node devices of the connection;
        returns their UUIDs."""
        mdevs = self.mdevs()
        for mdev_uuid, (parent, mdev_type) in mdevs.items():
            self._show(parent, mdev_type, mdev_uuid)
        return sorted(mdevs)

    def create(self, real, root, parent, mdev_type, mdev_uuid):
        with self._lock:
            try:
                t = self.host._mdev_type(parent, mdev_type)
            except KeyError:
                t = None    # the real write says why
            if t is not None and not t.available_instances:
                # The kernel refuses the write (-ENOSPC).
                raise exception.MdevError(
                    uuid=mdev_uuid, address=parent,
                    reason='no instance of %s available' % mdev_type)
            real(root, parent, mdev_type, mdev_uuid)
            self.host.create_mdev(parent, mdev_type, mdev_uuid)
            self._show(parent, mdev_type, mdev_uuid)

    def remove(self, real, root, mdev_uuid):
        with self._lock:
            real(root, mdev_uuid)
            parent, mdev_type = self.mdevs().get(mdev_uuid, (None, None))
            if parent is not None:
                self.host.remove_mdev(parent, mdev_type, mdev_uuid)
                self.connection.mdev_info.devices.pop(
                    node_name(mdev_uuid, parent), None)

    def fixtures(self):
        """The patches of the sidecar's privileged mdev calls."""
        return [
            fixtures.MonkeyPatch(
                'sidecar.privileged.create_mdev',
                functools.partial(self.create, privileged.create_mdev)),
            fixtures.MonkeyPatch(
                'sidecar.privileged.remove_mdev',
                functools.partial(self.remove, privileged.remove_mdev)),
        ]


class NvidiaKernel:
    """What NVIDIA's vGPU 17 driver does with the sidecar's writes to a
    VF's ``nvidia/current_vgpu_type`` (``sidecar.privileged.set_vgpu_type``
    and ``clear_vgpu_type``): a type id creates the VF's vGPU, 0 removes
    it, and every VF's ``creatable_vgpu_types`` follows; a type the VF
    does not list fails with EINVAL
    (:meth:`sidecar_simulator.nvidia.NvidiaHost.kernel_write`, after
    NVIDIA vgpu-device-manager ``pkg/vgpu/vfio/sysfs.go``). Every other
    write goes to the tree as the privileged helper makes it.

    :param host: the :class:`~sidecar_simulator.host.SimulatedHost`, its
        tree written; without an ``nvidia`` extension there is nothing to
        patch.
    """

    def __init__(self, host):
        self.nvidia = nvidia.of(host)
        self._lock = threading.Lock()

    def write(self, real, root, relpath, value):
        target = privileged._resolve_under(root, relpath)
        if not target.endswith(os.path.join('nvidia', 'current_vgpu_type')):
            return real(root, relpath, value)
        # The helper's own checks of the value, then the driver's.
        privileged._check_sysfs_value(value)
        with self._lock:
            self.nvidia.kernel_write(target, value)

    def fixtures(self):
        """The patch of the sidecar's privileged sysfs write."""
        if self.nvidia is None:
            return []
        return [fixtures.MonkeyPatch(
            'sidecar.privileged._write_sysfs',
            functools.partial(self.write, privileged._write_sysfs))]
