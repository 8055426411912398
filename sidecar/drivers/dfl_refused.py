"""DFL cards the sidecar refuses: Intel N6000 and N6001 (OFS).

An Open FPGA Stack (OFS) card registers its FME (and the PR slot's port
gasket) under PF0's base region like a port-release card, but its PR
slot's AFU is served by several SR-IOV VFs of PF0 at once (the FIM's
PF/VF mux: e.g. HE-MEM, HE-HSSI and HE-MEM-TG, one VF each), not by one
function per port released with ``DFL_FPGA_FME_PORT_RELEASE``. This
release reports one deployable attached as one function per port, so
such a card would be offered as PF0 with its AFU's VFs left out: it is
refused at discovery with one ERROR per card naming it, and nothing of it
(device, deployable, attach handle) is reported.

The ids are those of torvalds/linux drivers/fpga/dfl-pci.c
``cci_pcie_id_tbl``: ``PCI_DEVICE_SUB(PCI_VENDOR_ID_INTEL,
PCIE_DEVICE_ID_INTEL_DFL (0xbcce), PCI_VENDOR_ID_INTEL,
PCIE_SUBDEVICE_ID_INTEL_N6000 (0x1770) / PCIE_SUBDEVICE_ID_INTEL_N6001
(0x1771))``; their VFs are ``PCIE_DEVICE_ID_INTEL_DFL_VF`` (0xbccf) with
the same subsystem ids. The subsystem ids are read from the PF's sysfs
``subsystem_vendor`` and ``subsystem_device``
(Documentation/ABI/testing/sysfs-bus-pci).
"""

import os

from oslo_log import log as logging

from sidecar.sources import base as sources

LOG = logging.getLogger(__name__)

#: (vendor, device, subsystem vendor, subsystem device) -> the card.
REFUSED = {
    ('8086', 'bcce', '8086', '1770'): 'Intel N6000 (OFS)',
    ('8086', 'bcce', '8086', '1771'): 'Intel N6001 (OFS)',
}

_WHY = (
    'Refusing FPGA %(address)s: an %(model)s card serves its one '
    'partial-reconfiguration slot through several SR-IOV VFs of PF0 (one '
    'function per PR slot over several VFs, no DFL port release), which '
    'this release does not support; nothing of it is reported to Cyborg '
    'and the other devices of this host are. Use the card outside Cyborg '
    '(OPAE on the host, or its functions as Nova [pci] passthrough '
    'devices), or take it out of this host, to silence this message.')


def _id(function_dir, name):
    """A sysfs id file (``0x8086``) as 4 lower-case hex digits, or None."""
    value = sources.read_file(os.path.join(function_dir, name))
    if not value:
        return None
    value = value.strip().lower()
    return value[2:] if value.startswith('0x') else value


def refused_model(sysfs_root, address):
    """The name of the refused card whose PF is ``address``, or None."""
    function_dir = os.path.join(sysfs_root, 'bus', 'pci', 'devices',
                                address)
    key = tuple(_id(function_dir, name) for name in (
        'vendor', 'device', 'subsystem_vendor', 'subsystem_device'))
    return REFUSED.get(key)


class Refusals:
    """Which cards were refused; each logged once per process."""

    def __init__(self, log=LOG):
        self._log = log
        self._said = set()
        #: PF address -> card name, as of the last discovery.
        self.current = {}

    def check(self, sysfs_root, address):
        """Whether the card of PF ``address`` is refused (said once)."""
        model = refused_model(sysfs_root, address)
        if model is None:
            return False
        self.current[address] = model
        if (address, model) not in self._said:
            self._said.add((address, model))
            self._log.error(_WHY, {'address': address, 'model': model})
        return True

    def cycle(self):
        """A new discovery: forget which cards were refused (not which
        were said)."""
        self.current = {}
