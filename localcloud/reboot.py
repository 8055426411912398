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

Nova finds the guests shut off (``resume_guests_state_on_host_boot`` is
off), as after a real host's reboot; starting a server again recreates
what its accelerators need.
"""

import json
import os
import shutil

MARKER = 'rebooted'
#: libvirt's virDomainState VIR_DOMAIN_SHUTOFF (include/libvirt/
#: libvirt-domain.h), the state fakelibvirt restores a domain in.
SHUTOFF = 5


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
