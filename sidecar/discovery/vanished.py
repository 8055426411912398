"""Attach handles whose PCI function left sysfs: kept in the report.

A VF removed from the bus under a running server (``echo 1 >
/sys/bus/pci/devices/<vf>/remove``, a VF reset gone wrong) leaves its PF
and the other VFs in place. Dropping that VF from the device's report
makes cyborg-conductor 17 destroy one attach handle of the deployable,
and it looks the handle up by deployable only (its ``attach_info`` filter
is ignored by ``attach_handle_get_by_filters``): it deletes the newest
handle of the card, a VF that still exists, and keeps the vanished one,
which a later bind then hands out. So a vanished VF that its PF still
declares (its ``virtfnN`` link is there: the VF was hot-removed, SR-IOV
was not reconfigured) is never left out of a report: the device is
reported with it as last seen, and
:class:`sidecar.discovery.health.Monitor` holds it (``device gone``)
until the function is back. Cyborg's handles then equal sysfs again
without any handle having been destroyed. A VF its PF no longer
declares (``sriov_numvfs`` lowered by an operator) is left out, as
before.

The functions each deployable was last reported with are kept in
``<state_path>/functions.json``, so a sidecar restarted while a VF is
gone still reports it.
"""

import dataclasses
import os
import re

from sidecar import model
from sidecar.state import cache as state_cache

FILE = 'functions.json'
#: Handle fields the file keeps beside the address.
_KEPT = ('managed', 'physical_network')
#: A physical network name as [pci] device_spec takes it (drivers/pci.py).
_PHYSNET_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,63}')


def _devices(sysfs_root, *parts):
    return os.path.join(sysfs_root, 'bus', 'pci', 'devices', *parts)


def present(sysfs_root, address):
    return os.path.lexists(_devices(sysfs_root, address))


def declared(sysfs_root, pf):
    """The VFs ``pf`` declares: its ``virtfnN`` links, dangling or not.

    Documentation/ABI/testing/sysfs-bus-pci: the kernel creates them when
    SR-IOV is enabled (``sriov_numvfs``) and removes them only when it is
    disabled; a VF hot-removed alone (its ``remove``) leaves its link."""
    path = _devices(sysfs_root, pf)
    try:
        names = [n for n in os.listdir(path) if n.startswith('virtfn')]
    except OSError:
        return frozenset()
    found = set()
    for name in names:
        try:
            found.add(os.path.basename(os.readlink(os.path.join(
                path, name)).rstrip('/')))
        except OSError:
            continue
    return frozenset(found)


def _merged(last, now, vanished):
    """``last``'s handles still there or vanished (in its order), then
    ``now``'s new ones."""
    handles = [h for h in last if h in now or h in vanished]
    return tuple(handles + [h for h in now if h not in handles])


def _record_of(handle):
    """What the file keeps of a PCI handle: its address, with its managed
    mode and physical network where it has them (a vGPU 17 VF's
    ``managed='no'`` must survive a restart while the VF is gone)."""
    extra = {key: getattr(handle, key) for key in _KEPT
             if getattr(handle, key) is not None}
    return dict(extra, address=handle.address) if extra else handle.address


def _handle(record):
    """The PCI handle of a record of the file, or None if it is not one
    (the file is only this sidecar's, but read as untrusted)."""
    if isinstance(record, str):
        record = {'address': record}
    address = record.get('address')
    try:
        model.parse_bdf(address)
    except (TypeError, ValueError):
        return None
    fields = {}
    if record.get('managed') in ('yes', 'no'):
        fields['managed'] = record['managed']
    network = record.get('physical_network')
    if isinstance(network, str) and _PHYSNET_RE.fullmatch(network):
        fields['physical_network'] = network
    return model.AttachHandle('PCI', address, **fields)


class Vanished:
    """Put back the vanished attach handles of each device found.

    :param state_path: directory of :data:`FILE`, or None (memory only).
    """

    def __init__(self, sysfs_root, state_path=None):
        self.sysfs_root = sysfs_root
        self._file, data = state_cache.open_in(state_path, FILE)
        # device address: {deployable name: [handle records]}; a record
        # is the function's address, or a dict with it and the handle's
        # managed mode and physical network where it has them.
        self._seen = {}
        for address, deps in (data or {}).items():
            if isinstance(deps, dict):
                self._seen[address] = {
                    name: [a for a in handles if isinstance(a, (str, dict))]
                    for name, handles in deps.items()
                    if isinstance(handles, list)}

    def _known(self, device, last):
        """``{deployable name: (handles last reported)}``; without the
        device in memory (a restart), its PCI handles from the file."""
        if last is not None:
            return {dep.name: dep for dep in last.deployables}
        known = {}
        for name, records in self._seen.get(device.address, {}).items():
            handles = [h for h in map(_handle, records) if h is not None]
            known[name] = model.Deployable(
                name=name, resource_class='', num_accelerators=len(handles),
                attach_handles=tuple(handles))
        return known

    def apply(self, device, last=None):
        """``(device, gone)``: ``device`` (a :class:`model.Device` found
        now) with the PCI attach handles of ``last`` (the same device as
        reported before, or None) whose function is not in sysfs while the
        device's PF still declares it put back, and the sorted addresses of
        those functions. A deployable all of
        whose functions vanished is kept whole as last reported."""
        gone = set()
        now = {dep.name: dep for dep in device.deployables}
        merged = {}
        vfs = declared(self.sysfs_root, device.address)
        for name, before in self._known(device, last).items():
            # A vGPU 17 VF's vendor-VFIO MDEV handle is the VF too.
            vanished = [h for h in before.attach_handles
                        if (h.attach_type == 'PCI' or h.vendor_vfio) and
                        h.address in vfs and
                        not present(self.sysfs_root, h.address)]
            current = now.get(name)
            if current is None:
                if (vanished and before.resource_class and
                        len(vanished) == len(before.attach_handles)):
                    merged[name] = before
                    gone.update(h.address for h in vanished)
                continue
            vanished = [h for h in vanished
                        if h not in current.attach_handles]
            if vanished:
                merged[name] = dataclasses.replace(
                    current, attach_handles=_merged(
                        before.attach_handles, current.attach_handles,
                        vanished),
                    num_accelerators=(current.num_accelerators +
                                      len(vanished)))
                gone.update(h.address for h in vanished)
        if gone:
            device = dataclasses.replace(device, deployables=tuple(
                [merged.get(dep.name, dep) for dep in device.deployables] +
                [dep for name, dep in sorted(merged.items())
                 if name not in now]))
        self._record(device)
        return device, tuple(sorted(gone))

    def _record(self, device):
        seen = {dep.name: [_record_of(h) for h in dep.attach_handles
                           if h.attach_type == 'PCI']
                for dep in device.deployables}
        if self._seen.get(device.address) != seen:
            self._seen[device.address] = seen
            self._save()

    def forget(self, address):
        """A device left out of the report on purpose (its control path is
        still there): nothing of it is kept."""
        if self._seen.pop(address, None) is not None:
            self._save()

    def _save(self):
        if self._file is not None:
            self._file.save(self._seen)
