"""create_vgpu_mdev and remove_vgpu_mdev: mediated devices on reported
GPUs, for the handles this host reported, written through privsep.

cyborg-conductor 17 makes these calls for every MDEV attach handle it
binds and unbinds. Those of a vGPU 17 VF's vendor-VFIO handle
(:attr:`sidecar.model.AttachHandle.vendor_vfio`) create no mdev: they
set the VF's vGPU type and write it back to 0
(:class:`sidecar.program.vgpu_types.VgpuTypeSetter`).

No mdev survives a host reboot (Documentation/driver-api/
vfio-mediated-device.rst: an mdev exists from a write to its type's
``create`` until its ``remove`` or the parent's driver goes), while the
server's ARQ stays Bound to its handle and its guest's definition names
the mdev: :meth:`MdevManager.restore_bound` creates them again, before
the sidecar's first report and so before Nova starts the guests."""

import os

from oslo_log import log as logging
from oslo_utils import uuidutils

from sidecar import exception
from sidecar import model
from sidecar import privileged
from sidecar.program import cyborg as cyborg_api

LOG = logging.getLogger(__name__)


class MdevManager:

    def __init__(self, sysfs_root, inventory, domains, vgpu_types=None,
                 host=None, cyborg=None):
        self._root = sysfs_root
        self._inventory = inventory
        self._domains = domains
        #: A VgpuTypeSetter, or None (no vGPU 17 VF is offered idle).
        self._vgpu_types = vgpu_types
        #: This host's name as its ARQs give it, and a client of Cyborg's
        #: API (``all_arqs``): without them no mdev is restored.
        self._host = host
        self._cyborg = cyborg
        #: Whether :meth:`restore_bound` is still to succeed once.
        self._restore_pending = cyborg is not None

    def housekeeping(self):
        """Every cycle: close the vGPU 17 type writes a killed sidecar
        left, and write back the types set at bind that a host reboot
        took (:meth:`sidecar.program.vgpu_restore.Restorer.restore`);
        until it has succeeded once since the sidecar started, create
        again the mdevs of this host's Bound ARQs that a host reboot took
        (:meth:`restore_bound`)."""
        if self._vgpu_types is not None:
            self._vgpu_types.recover()
            self._vgpu_types.restore()
        if self._restore_pending:
            self._restore_pending = not self.restore_bound()

    def restore_bound(self):
        """Create the mdev of each MDEV attach handle a Bound ARQ of this
        host holds and that does not exist (a host reboot removes every
        mdev; the ARQ, and the guest's ``<hostdev type='mdev'>``, still
        name it), as cyborg-conductor asked at bind: on the handle's
        parent, of its ``asked_type``, with the handle's UUID. vGPU 17
        handles (vendor VFIO) are the type restorer's. Returns True when
        nothing is left to create; an mdev the kernel refuses now is
        logged and tried again next cycle."""
        try:
            arqs = cyborg_api.bound_arqs(self._cyborg, self._host)
        except exception.SidecarError as exc:
            LOG.warning('Cannot read the ARQs (%s): the mdevs of Bound '
                        'ARQs are restored next cycle', exc)
            return False
        done = True
        for arq in arqs:
            if arq.get('attach_handle_type') != 'MDEV':
                continue
            info = arq.get('attach_handle_info') or {}
            ah_uuid = str(arq.get('attach_handle_uuid')).lower()
            try:
                pci_addr = '%s:%s:%s.%s' % (info['domain'], info['bus'],
                                            info['device'], info['function'])
                asked_type = info['asked_type']
            except (KeyError, TypeError):
                LOG.warning('ARQ %s: its MDEV handle names no parent and '
                            'type: %s', arq.get('uuid'), info)
                continue
            if self._vendor_vfio(pci_addr) or self._exists(ah_uuid):
                continue
            LOG.warning('mdev %(uuid)s of ARQ %(arq)s is gone (host reboot '
                        'or driver reload); creating it again: %(type)s on '
                        '%(addr)s', {'uuid': ah_uuid, 'arq': arq.get('uuid'),
                                     'type': asked_type, 'addr': pci_addr})
            try:
                privileged.create_mdev(self._root, pci_addr, asked_type,
                                       ah_uuid)
            except exception.SidecarError as exc:
                LOG.error('Restoring mdev %(uuid)s failed: %(exc)s; tried '
                          'again next cycle', {'uuid': ah_uuid, 'exc': exc})
                done = False
        return done

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
