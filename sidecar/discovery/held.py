"""DFL cards and ports a guest holds: reported as last seen.

libvirt's managed ``<hostdev>`` (and ``virsh nodedev-detach``) binds the
function a guest gets to ``vfio-pci``. For a DFL card that runs dfl-pci's
``remove`` (torvalds/linux drivers/fpga/dfl-pci.c ``cci_pci_remove`` →
dfl.c ``dfl_fpga_feature_devs_remove``): the function's base
``fpga_region`` and the ``dfl-fme.N`` / ``dfl-port.M`` under it leave
sysfs. A card whose PF a guest has (no SR-IOV) is then not found at all; a
card whose port's VF a guest has is found without that port. Dropping
either from the report makes cyborg-conductor destroy the deployable, its
attach handles and its provider under the running server
(cyborg/conductor/manager.py ``drv_device_make_diff``).

So a card's deployable whose every attach handle is a PCI function still
on the bus but not bound to ``dfl-pci`` stays in the report as it was last
seen (its traits: the ``afu_id`` and ``compat_id`` read before the guest
took it), and a card whose PF is such a function stays whole. When the
guest lets the function go, dfl-pci probes it again and the card is read
from sysfs as before. A function gone from the bus is not held here (the
health monitor reports the device gone).

What was last seen is kept in ``<state_path>/dfl_seen.json``, so that a
sidecar restarted while a guest holds a card still reports it.
"""

import dataclasses
import json
import os

from oslo_log import log as logging

from sidecar import model
from sidecar.discovery import vanished as vanished_mod
from sidecar.state import cache as state_cache

LOG = logging.getLogger(__name__)

FILE = 'dfl_seen.json'
#: drivers/fpga/dfl-pci.c DRV_NAME.
DFL_DRIVER = 'dfl-pci'


def bound_driver(sysfs_root, address):
    """The driver ``address`` is bound to (its ``driver`` link,
    Documentation/ABI/testing/sysfs-bus-pci), or None."""
    try:
        return os.path.basename(os.readlink(os.path.join(
            sysfs_root, 'bus', 'pci', 'devices', address,
            'driver')).rstrip('/'))
    except OSError:
        return None


def taken(sysfs_root, address):
    """Whether ``address`` is on the bus but dfl-pci does not have it (a
    guest's ``vfio-pci``, or unbound on its way there)."""
    return (os.path.lexists(os.path.join(sysfs_root, 'bus', 'pci',
                                         'devices', address)) and
            bound_driver(sysfs_root, address) != DFL_DRIVER)


def _to_json(device):
    return {
        'type': device.type, 'vendor': device.vendor, 'model': device.model,
        'address': device.address, 'driver_name': device.driver_name,
        'std_board_info': [list(p) for p in device.std_board_info],
        'deployables': [{
            'name': dep.name, 'resource_class': dep.resource_class,
            'num_accelerators': dep.num_accelerators,
            'traits': list(dep.traits), 'driver_name': dep.driver_name,
            'attach_handles': [h.address for h in dep.attach_handles
                               if h.attach_type == 'PCI'],
        } for dep in device.deployables]}


def _from_json(data):
    """A :class:`model.Device` from :func:`_to_json`'s output; ValueError,
    TypeError or KeyError when it is not one (the file is read as
    untrusted)."""
    deployables = []
    for dep in data['deployables']:
        handles = tuple(model.AttachHandle('PCI', a)
                        for a in dep['attach_handles'])
        for handle in handles:
            model.parse_bdf(handle.address)
        if not all(isinstance(t, str) for t in dep['traits']):
            raise ValueError('traits')
        deployables.append(model.Deployable(
            name=str(dep['name']), resource_class=str(dep['resource_class']),
            num_accelerators=int(dep['num_accelerators']),
            traits=tuple(dep['traits']), attach_handles=handles,
            driver_name=str(dep['driver_name'])))
    model.parse_bdf(data['address'])
    return model.Device(
        type=str(data['type']), vendor=str(data['vendor']),
        model=str(data['model']), address=data['address'],
        driver_name=str(data['driver_name']),
        std_board_info=tuple((str(k), str(v))
                             for k, v in data['std_board_info']),
        deployables=tuple(deployables))


def _with(device, deployables, last):
    """``device`` with ``deployables`` of ``last`` added, in ``last``'s
    order."""
    order = {d.name: i for i, d in enumerate(last.deployables)}
    return dataclasses.replace(device, deployables=tuple(sorted(
        device.deployables + tuple(deployables),
        key=lambda d: (order.get(d.name, len(order)), d.name))))


def _read(state_path):
    """The file's object, read only; None when there is none."""
    try:
        with open(os.path.join(state_path or '', FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class LastSeen:
    """The DFL cards last reported, and those a guest holds now.

    :param state_path: directory of :data:`FILE`, or None (memory only).
    :param read_only: read the file but never write under ``state_path``
        (``nova-cyborg-sidecar-manage discover``).
    """

    def __init__(self, sysfs_root, state_path=None, read_only=False):
        self.sysfs_root = sysfs_root
        if read_only:
            self._file, data = None, _read(state_path)
        else:
            self._file, data = state_cache.open_in(state_path, FILE)
        if not isinstance(data, dict):
            data = {}
        self._seen = {}  # PF address: model.Device as last reported
        for address, record in (data or {}).items():
            try:
                self._seen[address] = _from_json(record)
            except (KeyError, TypeError, ValueError, AttributeError):
                LOG.warning('Ignoring DFL card %s in %s: not a device '
                            'record', address, FILE)
        #: Deployable names reported as last seen by the last apply().
        self.held = frozenset()

    def holds_a_port(self, address):
        """Whether a guest holds a port of card ``address`` now."""
        last = self._seen.get(address)
        return bool(last) and any(self._held(dep)
                                  for dep in last.deployables)

    def deployable(self, name):
        """The deployable ``name`` as last seen, or None."""
        return next((dep for device in self._seen.values()
                     for dep in device.deployables if dep.name == name),
                    None)

    def _same_card(self, last):
        """Whether the PF of ``last`` has its vendor and device ids still
        (not another card put in its slot)."""
        path = os.path.join(self.sysfs_root, 'bus', 'pci', 'devices',
                            last.address)
        ids = []
        for name in ('vendor', 'device'):
            try:
                with open(os.path.join(path, name)) as f:
                    ids.append(f.read().strip().lower())
            except OSError:
                return False
        return ids == ['0x' + last.vendor, '0x' + last.model]

    def _held(self, dep):
        return bool(dep.attach_handles) and all(
            taken(self.sysfs_root, h.address) for h in dep.attach_handles)

    def apply(self, found):
        """``found``: ``{PF address: model.Device}`` read from sysfs now.
        Returns the devices to report: ``found`` with each card's held
        deployables put back as last seen, and each card not found whose
        PF is held, whole as last seen. Records what it returns."""
        result, held, record = {}, set(), {}
        for address, device in found.items():
            last = self._seen.get(address)
            names = {dep.name for dep in device.deployables}
            kept = [dep for dep in (last.deployables if last else ())
                    if dep.name not in names and self._held(dep)]
            if kept:
                LOG.debug('FPGA %s: %s held by a guest, reported as last '
                          'seen', address, ', '.join(d.name for d in kept))
                held.update(dep.name for dep in kept)
                device = _with(device, kept, last)
            result[address] = device
            # A port whose VF left the bus while its PF declares it
            # (vanished.py reports it) is remembered for when it is back.
            vfs = vanished_mod.declared(self.sysfs_root, address)
            gone = [dep for dep in (last.deployables if last else ())
                    if dep.name not in names and dep not in kept and
                    dep.attach_handles and all(
                        h.address in vfs and not vanished_mod.present(
                            self.sysfs_root, h.address)
                        for h in dep.attach_handles)]
            record[address] = _with(device, gone, last) if gone else device
        for address, last in self._seen.items():
            if (address in result or not taken(self.sysfs_root, address)
                    or not self._same_card(last)):
                continue
            LOG.debug('FPGA %s: its PF is held by a guest, reported as '
                      'last seen', address)
            held.update(dep.name for dep in last.deployables)
            result[address] = record[address] = last
        self.held = frozenset(held)
        self._record(record)
        return result

    def _record(self, devices):
        """Keep ``devices``; a card neither found nor held is forgotten
        unless its PF left the bus (the monitor reports it gone)."""
        seen = {a: d for a, d in self._seen.items()
                if a not in devices and not os.path.lexists(os.path.join(
                    self.sysfs_root, 'bus', 'pci', 'devices', a))}
        seen.update(devices)
        if seen != self._seen:
            self._seen = seen
            if self._file is not None:
                try:
                    self._file.save({a: _to_json(d)
                                     for a, d in seen.items()})
                except OSError as exc:
                    LOG.warning('Cannot save %s (%s): a DFL card a guest '
                                'holds when this sidecar restarts is not '
                                'reported', self._file.path, exc)
