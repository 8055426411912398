"""create_vgpu_mdev and remove_vgpu_mdev: mediated devices on reported
GPUs, for the handles this host reported, written through privsep.

cyborg-conductor 17 makes these calls for every MDEV attach handle it
binds and unbinds. Those of a vGPU 17 VF's vendor-VFIO handle
(:attr:`sidecar.model.AttachHandle.vendor_vfio`) create no mdev: they
set the VF's vGPU type and write it back to 0
(:class:`sidecar.program.vgpu_types.VgpuTypeSetter`)."""

import os

from oslo_log import log as logging
from oslo_utils import uuidutils

from sidecar import exception
from sidecar import model
from sidecar import privileged

LOG = logging.getLogger(__name__)


class MdevManager:

    def __init__(self, sysfs_root, inventory, domains, vgpu_types=None):
        self._root = sysfs_root
        self._inventory = inventory
        self._domains = domains
        #: A VgpuTypeSetter, or None (no vGPU 17 VF is offered idle).
        self._vgpu_types = vgpu_types

    def housekeeping(self):
        """Every cycle: close the vGPU 17 type writes a killed sidecar
        left, and write back the types set at bind that a host reboot
        took (:meth:`sidecar.program.vgpu_restore.Restorer.restore`)."""
        if self._vgpu_types is None:
            return
        self._vgpu_types.recover()
        self._vgpu_types.restore()

    def _vendor_vfio(self, pci_addr):
        return (self._vgpu_types is not None and isinstance(pci_addr, str)
                and self._vgpu_types.serves(pci_addr))

    def _validate(self, pci_addr, asked_type, ah_uuid):
        try:
            model.parse_bdf(pci_addr)
        except ValueError:
            raise exception.InvalidArgument(name='pci_addr',
                                            reason='not a PCI address')
        if not uuidutils.is_uuid_like(ah_uuid):
            raise exception.InvalidArgument(name='ah_uuid',
                                            reason='not a UUID')
        ah_uuid = str(ah_uuid).lower()
        types = self._types_at(pci_addr)
        if not types:
            raise exception.UnknownDevice(kind='mdev-capable',
                                          address=pci_addr)
        if asked_type not in types:
            raise exception.InvalidArgument(
                name='asked_type',
                reason='%r is not an mdev type offered by %s' % (
                    asked_type, pci_addr))
        return ah_uuid

    def _types_at(self, pci_addr):
        """The mdev types of the MDEV attach handles this host reported at
        ``pci_addr``: a GPU's own function, or one VF of an SR-IOV GPU
        (vGPU 16 and earlier), whose device is its PF."""
        device = self._inventory.device(pci_addr)
        devices = [device] if device is not None else \
            self._inventory.devices()
        return {h.mdev_type for d in devices for dep in d.deployables
                for h in dep.attach_handles
                if h.attach_type == 'MDEV' and h.address == pci_addr}

    def _exists(self, ah_uuid):
        return os.path.exists(
            os.path.join(self._root, 'bus', 'mdev', 'devices', ah_uuid))

    def create(self, pci_addr, asked_type, ah_uuid):
        """Create the mdev, or set a vGPU 17 VF's type; True for the latter
        (what the card's other VFs are offered for may change)."""
        if self._vendor_vfio(pci_addr):
            self._vgpu_types.bind(pci_addr, asked_type, ah_uuid)
            return True
        ah_uuid = self._validate(pci_addr, asked_type, ah_uuid)
        if self._exists(ah_uuid):
            LOG.info('mdev %s exists already', ah_uuid)
            return
        LOG.info('Creating mdev %(uuid)s of type %(type)s on %(addr)s',
                 {'uuid': ah_uuid, 'type': asked_type, 'addr': pci_addr})
        privileged.create_mdev(self._root, pci_addr, asked_type, ah_uuid)

    def remove(self, pci_addr, asked_type, ah_uuid):
        """Remove the mdev, or a vGPU 17 VF's type; True when a type was
        removed."""
        if self._vendor_vfio(pci_addr):
            return self._vgpu_types.unbind(pci_addr, asked_type, ah_uuid)
        if not uuidutils.is_uuid_like(ah_uuid):
            raise exception.InvalidArgument(name='ah_uuid',
                                            reason='not a UUID')
        if not self._exists(str(ah_uuid).lower()):
            # Nothing to remove, and nothing is touched, so the other
            # arguments need not be valid: Cyborg asks this when it unbinds
            # an ARQ whose mdev was never created, e.g. because create was
            # refused for the same arguments. Refusing again would leave
            # the ARQ undeletable in Cyborg.
            LOG.info('mdev %s does not exist; nothing to remove', ah_uuid)
            return
        ah_uuid = self._validate(pci_addr, asked_type, ah_uuid)
        # As the kernel: a guest that runs holds its mdev open. A shut-off
        # definition does not: Cyborg unbinds its ARQ when the server lets
        # the device go (a cold migration or resize unbinds the source's
        # once the guest is powered off, before the source's definition is
        # undefined at confirm); a revert binds and creates it again.
        users = self._domains.devices_running()
        if ah_uuid in users:
            raise exception.DeviceBusy(
                address=ah_uuid,
                reason='used by running domain %s' % users[ah_uuid])
        stopped = self._domains.devices_in_use()
        if ah_uuid in stopped:
            LOG.info('Removing mdev %s, which the shut-off domain %s still '
                     'names: its ARQ is unbound', ah_uuid, stopped[ah_uuid])
        LOG.info('Removing mdev %s', ah_uuid)
        privileged.remove_mdev(self._root, ah_uuid)
