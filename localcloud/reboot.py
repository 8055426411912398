"""A simulated compute host rebooted (``python -m localcloud host reboot
NAME``).

:func:`localcloud.hosts.reboot` stops the host's process, leaves
:data:`MARKER` in the host's directory and starts it again; the new
process (:mod:`localcloud.compute_host`) finds the marker and, before it
defines its domains again and writes its tree, does what the reboot did
(:func:`apply`):

- every domain the host owns is shut off (a domain does not outlive its
  host: libvirt keeps persistent ones defined, not running; a managed
  save image is a file and stays);
- the host's devices are as a cold boot leaves them
  (:func:`sidecar_simulator.kernel.reboot`: no mdev, no ``vfio-pci``
  binding, every FPGA port back to its card's default function). The
  host's boot then enables SR-IOV and releases the FPGA ports to their VFs
  again, as its configuration says: the description it writes.

The hosts' nova-compute runs with ``resume_guests_state_on_host_boot``
(:func:`localcloud.configs.compute`), as a deployer sets it for guests
that come back by themselves: nova-compute, which starts only once the
sidecar has put the devices back (:mod:`localcloud.boot_order`), finds the
guests of servers that were running shut off and starts them again
(``ComputeManager._init_instance``, a hard reboot with their
accelerators).

:class:`GuestStarts` records, at each guest's start, the devices its
domain names as the host shows them at that moment:
``hosts/<host>/guest-starts.jsonl``, what a user would find in the guest
(the function and its loaded FPGA function, the vGPU type, the mdev).
"""

import glob
import json
import os
import shutil
from xml.etree import ElementTree

import fixtures

MARKER = 'rebooted'
#: libvirt's virDomainState VIR_DOMAIN_RUNNING and VIR_DOMAIN_SHUTOFF
#: (include/libvirt/libvirt-domain.h), the states fakelibvirt restores a
#: domain in.
RUNNING, SHUTOFF = 1, 5


def marker(layout, host):
    return layout.path('hosts', host, MARKER)


def mark(layout, host):
    """Say that ``host``'s next start is a boot."""
    with open(marker(layout, host), 'w') as f:
        f.write('')


def _shut_off(domains):
    """Rewrite the ``.state`` of each domain ``domains`` (a
    :class:`localcloud.compute_host.DomainFiles`) owns: shut off."""
    names = []
    for uuid, (_xml, state) in sorted(domains.saved().items()):
        state = dict(state, state=SHUTOFF)
        domains._replace(os.path.join(domains.directory, uuid + '.state'),
                         json.dumps(state))
        names.append(uuid)
    return names


def _reset_devices(simulated, root):
    """The tree under ``root`` as a cold boot leaves it; ``simulated``: the
    host as it was (its state loaded from that tree).

    Then the boot's configuration runs: it releases each FPGA card's
    ports and enables SR-IOV, which the host's description (written by
    the new process) holds; the ports the kernel enumerated under the PF
    leave it with the release, so the card's devices are left for that
    write to enumerate again."""
    from sidecar_simulator import kernel
    simulated.write(root)
    kernel.reboot(simulated)
    for pf in simulated.fpga_pfs():
        shutil.rmtree(simulated._dir(pf, 'fpga_region'), ignore_errors=True)
    simulated.prune_class_links()


def apply(layout, host, domains, simulated, root):
    """What the reboot of ``host`` did, if it was rebooted (its marker is
    there; it is removed). Returns the domains shut off, or None when the
    host was not rebooted."""
    path = marker(layout, host)
    if not os.path.exists(path):
        return None
    names = _shut_off(domains)
    _reset_devices(simulated, root)
    os.unlink(path)
    return names


class GuestStarts(fixtures.Fixture):
    """Append, before each domain start (``createWithFlags``, how Nova's
    libvirt driver launches a guest), one line to
    ``hosts/<host>/guest-starts.jsonl``: ``{"uuid": ..., "devices":
    {device: what the host shows}, "sidecar_ready": whether the host's
    sidecar had said READY=1}``; a device is a PCI function
    (``0000:81:01.1``: ``present``, ``driver``, the ``afu_id`` of each DFL
    port under it, its ``current_vgpu_type``) or ``mdev <uuid>``
    (``present``). Read before the start: libvirt's managed hostdev then
    takes the function to ``vfio-pci`` and the DFL ports leave the
    host's view (:mod:`tests.functional.harness.guest_kernel`)."""

    def __init__(self, layout, host, simulated):
        super().__init__()
        self.path = layout.path('hosts', host, 'guest-starts.jsonl')
        self.simulated = simulated

    def _setUp(self):
        from nova.tests.fixtures import libvirt as fakelibvirt
        real = fakelibvirt.Domain.createWithFlags
        starts = self

        def create_with_flags(domain, *args, **kwargs):
            starts.record(domain.UUIDString(), domain.XMLDesc(0))
            return real(domain, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.createWithFlags',
            create_with_flags))

    def record(self, uuid, xml):
        devices = {}
        for hostdev in ElementTree.fromstring(xml).findall(
                './devices/hostdev'):
            address = hostdev.find('./source/address')
            if address is None:
                continue
            if hostdev.get('type') == 'mdev':
                mdev = address.get('uuid', '').lower()
                devices['mdev ' + mdev] = {'present': os.path.isdir(
                    os.path.join(self.simulated.root, 'bus', 'mdev',
                                 'devices', mdev))}
            elif hostdev.get('type') == 'pci':
                pci = '%04x:%02x:%02x.%x' % tuple(int(address.get(k), 16)
                                                  for k in ('domain', 'bus',
                                                            'slot',
                                                            'function'))
                devices[pci] = self._function(pci)
        from localcloud import boot_order
        with open(self.path, 'a') as f:
            f.write(json.dumps({
                'uuid': uuid, 'devices': devices,
                'sidecar_ready': boot_order.sidecar_ready.is_set()}) + '\n')

    def _function(self, address):
        """What Documentation/ABI/testing/sysfs-bus-pci (``driver``),
        sysfs-platform-dfl-port (``afu_id``) and NVIDIA's vGPU 17 sysfs
        (``nvidia/current_vgpu_type``) show of the function."""
        base = os.path.join(self.simulated.root, 'bus', 'pci', 'devices',
                            address)
        if not os.path.isdir(base):
            return {'present': False}
        link = os.path.join(base, 'driver')
        found = {'present': True, 'driver': os.path.basename(
            os.readlink(link)) if os.path.islink(link) else None}
        found['afu_ids'] = [_read(p) for p in sorted(glob.glob(
            os.path.join(base, 'fpga_region', 'region*', 'dfl-port.*',
                         'afu_id')))]
        vgpu = os.path.join(base, 'nvidia', 'current_vgpu_type')
        if os.path.exists(vgpu):
            found['current_vgpu_type'] = _read(vgpu)
        return found


def _read(path):
    with open(path) as f:
        return f.read().strip().lower()


def guest_starts(layout, host):
    """The lines :class:`GuestStarts` wrote for ``host``, oldest first."""
    try:
        with open(layout.path('hosts', host, 'guest-starts.jsonl')) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
