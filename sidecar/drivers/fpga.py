"""FPGA driver: the FPGA cards the kernel registers, read as it does.

Intel DFL cards (:mod:`sidecar.sources.dfl`: PAC A10, D5005, N3000,
N6000) are read as the kernel registers them: one device per card (its
PF), one deployable per port, named by and attached as the PCI function
the port is under (the PF, or after ``DFL_FPGA_FME_PORT_RELEASE`` and
SR-IOV the VF serving it); the function is the port's ``afu_id``, the
region trait the ``compat_id`` of the port's PR region under the FME.
Their health (:mod:`sidecar.drivers.dfl_health`) reads the FME's and the
ports' ``errors/*``; the DFL manager's ``state`` (always ``unknown``) is
no fault.

Xilinx Alveo cards (:mod:`sidecar.sources.xrt`: U200, U250, U280, U50,
U55C) register no region: the card is its user PF (``xocl``), one
deployable attached as that PF, whose function is the loaded xclbin's
UUID (``xclbinuuid``) and whose region traits are the shell's
``interface_uuids``; the management PF (``xclmgmt``) of the same slot is
named in the device's board info and never offered to a guest.

Any other ``class/fpga_region`` (a SoC's device-tree overlay region, a
vendor's out-of-tree driver) has no ABI saying where its loaded function
or the function serving it is: each is skipped with one WARNING naming
it, as are regions whose ``device`` leads to no PCI function.

Intel N6000/N6001 (OFS) cards, whose one PR slot several VFs serve, are
refused with one ERROR each (:mod:`sidecar.drivers.dfl_refused`).
"""

import dataclasses
import os
import re

import os_resource_classes as orc
import os_traits
from oslo_log import log as logging

from sidecar import exception
from sidecar import model
from sidecar.discovery import held as held_mod
from sidecar.drivers import base
from sidecar.drivers import dfl_health
from sidecar.drivers import dfl_refused
from sidecar.sources import base as sources
from sidecar.sources import dfl
from sidecar.sources import sysfs
from sidecar.sources import xrt

LOG = logging.getLogger(__name__)

#: PCI vendor id -> vendor name (upper-cased in traits, lower-cased as the
#: deployable's driver_name); other vendors are named by their id.
VENDOR_NAMES = {'8086': 'intel', '10ee': 'xilinx', '1bd4': 'inspur'}
FUNCTION_ID_PREFIX = 'CUSTOM_FPGA_FUNCTION_ID'
_ID = re.compile(r'^(?:0x)?([0-9a-f]{32})$')


def vendor_name(vendor_id):
    return VENDOR_NAMES.get(vendor_id, vendor_id)


def function_trait(driver_name, function_id):
    """The trait of a loaded function, as cyborg-conductor writes it.

    ``FPGAExtARQ._update_placement`` (cyborg/objects/extarq/
    fpga_ext_arq.py) adds ``"_".join((FPGA_FUNCTION_ID, driver_name.upper(),
    function_id.upper().replace('-', '_-')))`` after programming; reporting
    the same name keeps the provider's traits stable across a program.
    """
    return '_'.join((FUNCTION_ID_PREFIX, driver_name.upper(),
                     function_id.upper().replace('-', '_-')))


def parse_id(value, what):
    """A 32 hex digit id from sysfs: lower-case, or None when all zero.

    Raises MalformedDevice for anything else.
    """
    match = _ID.match((value or '').strip().lower())
    if not match:
        raise sources.MalformedDevice('%s is %r, not 32 hex digits'
                                      % (what, value))
    return None if int(match.group(1), 16) == 0 else match.group(1)


class FpgaDriver(base.DiscoveryDriver):
    """Report FPGA cards (DFL, Alveo) and the function each has loaded."""

    name = 'fpga'

    def __init__(self, conf, source):
        super().__init__(conf, source)
        self.sysfs_root = conf.sidecar.sysfs_root
        self.problems = sources.ProblemLog(LOG)
        self._dfl_ports = {}  # a DFL deployable's name: its DflPort
        self._xrt_cards = {}  # an Alveo user PF's address: its XrtCard
        self._xrt_seen = {}  # an Alveo user PF: the function last read
        self._state_path = conf.sidecar.state_path
        # DFL cards as last reported, and those a guest holds; made at
        # the first discovery, after the inventory set read_only.
        self._dfl_seen = None
        self.refused = dfl_refused.Refusals(LOG)

    def _discover(self):
        if self._dfl_seen is None:
            self._dfl_seen = held_mod.LastSeen(
                self.sysfs_root, self._state_path,
                read_only=getattr(self, 'read_only', False))
        functions = self.source.functions()
        by_address = {f.address: f for f in functions}
        devices = []
        with self.problems.cycle():
            for region in sysfs.fpga_regions(self.sysfs_root):
                self.problems.warning(
                    'Skipping FPGA region %s (PCI function %s): neither an '
                    'Intel DFL card (dfl-pci) nor an Alveo card (xocl); '
                    'no kernel ABI tells its loaded function or the PCI '
                    'function serving it', region.name,
                    region.address or 'none')
            dfl_ports, found = {}, {}
            self.refused.cycle()
            for address, card in sorted(dfl.cards(self.sysfs_root).items()):
                if self.refused.check(self.sysfs_root, address):
                    continue
                try:
                    device = self._dfl_device(by_address, card, dfl_ports)
                except sources.MalformedDevice as exc:
                    self.problems.warning('Skipping FPGA %s (DFL %s): %s',
                                          address, card.fme_name, exc)
                    continue
                if device is None:
                    continue
                found[address] = device
            # A card or port a guest holds (its function on vfio-pci)
            # has left sysfs: reported as last seen (held.py).
            devices.extend(device for _address, device in sorted(
                self._dfl_seen.apply(found).items()))
            devices.extend(self._xrt_devices(by_address))
        self._dfl_ports = dfl_ports
        return devices

    def _xrt_devices(self, by_address):
        """The Devices of Alveo cards: the user PF, one deployable."""
        found, skipped = xrt.cards(self.sysfs_root)
        for address, why in skipped:
            self.problems.warning('Skipping Alveo card %s: %s', address, why)
        devices, cards = [], {}
        for address, card in sorted(found.items()):
            user = by_address.get(address)
            if user is None:
                LOG.debug('FPGA %s: PCI function left out', address)
                continue
            try:
                if card.attached:
                    function_id = card.xclbin_uuid()
                    self._xrt_seen[address] = function_id
                    interfaces = card.interface_uuids()
                else:
                    # A guest has it: xocl's attributes are gone, the
                    # card keeps what it had loaded.
                    function_id = self._xrt_seen.get(address)
                    interfaces = ()
            except sources.MalformedDevice as exc:
                self.problems.warning('Skipping Alveo card %s (user PF, '
                                      '%s): %s', address, card.driver, exc)
                continue
            vendor = vendor_name(user.vendor_id)
            traits = {os_traits.OWNER_CYBORG, 'CUSTOM_FPGA_' + vendor.upper()}
            traits.update('_'.join(('CUSTOM_FPGA_REGION', vendor.upper(),
                                    u.upper())) for u in interfaces)
            if function_id:
                traits.add(function_trait(vendor, function_id))
            cards[address] = card
            devices.append(model.Device(
                type='FPGA', vendor=user.vendor_id, model=user.product_id,
                address=address, std_board_info=(
                    ('class', user.class_id), ('mgmt_pf', card.mgmt),
                    ('product_id', user.product_id)),
                driver_name=vendor, deployables=(model.Deployable(
                    name=address, resource_class=orc.FPGA,
                    num_accelerators=1, traits=tuple(sorted(traits)),
                    attach_handles=(model.AttachHandle('PCI', address),),
                    driver_name=vendor),)))
        self._xrt_cards = cards
        return devices

    def _dfl_device(self, by_address, card, dfl_ports):
        """The Device of a DFL card: a deployable per port."""
        pf = by_address.get(card.address)
        if pf is None:
            if not os.path.lexists(os.path.join(
                    self.sysfs_root, 'bus', 'pci', 'devices', card.address)):
                raise sources.MalformedDevice('no such PCI function')
            LOG.debug('FPGA %s: PCI function left out', card.address)
            return None
        if not card.ports and not self._dfl_seen.holds_a_port(card.address):
            raise sources.MalformedDevice(
                'no port: released (DFL_FPGA_FME_PORT_RELEASE) and no VF '
                'serves it; enable SR-IOV (sriov_numvfs) or assign the '
                'port back')
        deployables, names = [], {}
        for port in card.ports:
            function = by_address.get(port.address)
            if function is None:
                raise sources.MalformedDevice(
                    'the PCI function %s of %s is left out'
                    % (port.address, port.name))
            region = card.pr_region(port)
            deployables.append(self._deployable(
                pf, port.address, [function],
                compat_path=region and os.path.join(region, 'compat_id'),
                afu_path=os.path.join(port.path, 'afu_id')))
            names[port.address] = port
        if len(names) != len(card.ports):
            raise sources.MalformedDevice(
                'several ports on one PCI function (%s)'
                % ', '.join(p.name for p in card.ports))
        dfl_ports.update(names)
        return model.Device(
            type='FPGA', vendor=pf.vendor_id, model=pf.product_id,
            address=card.address, deployables=tuple(deployables),
            std_board_info=(('class', pf.class_id),
                            ('product_id', pf.product_id)),
            driver_name=vendor_name(pf.vendor_id))

    def _deployable(self, pf, name, handles, compat_path, afu_path):
        vendor = vendor_name(pf.vendor_id)
        traits = {os_traits.OWNER_CYBORG, 'CUSTOM_FPGA_' + vendor.upper()}
        compat = compat_path and sources.read_file(compat_path)
        if compat:
            compat = parse_id(compat, 'compat_id')
        if compat:
            traits.add('_'.join(('CUSTOM_FPGA_REGION', vendor.upper(),
                                 compat.upper())))
        function_id = _read_id(afu_path)
        if function_id:
            traits.add(function_trait(vendor, function_id))
        return model.Deployable(
            name=name,
            resource_class=orc.FPGA,
            num_accelerators=len(handles),
            traits=tuple(sorted(traits)),
            attach_handles=tuple(model.AttachHandle('PCI', f.address)
                                 for f in handles),
            driver_name=vendor)

    def health(self, device):
        """Besides the PCI checks: a DFL card's error files and manager
        (:mod:`sidecar.drivers.dfl_health`) for the ports dfl-pci has (not
        those a guest holds), an Alveo card's PFs."""
        observation = super().health(device)
        if observation.gone:
            return observation
        live = tuple(dep for dep in device.deployables
                     if dep.name in self._dfl_ports)
        if live:
            # A port a guest holds has no sysfs of its own to judge.
            return dfl_health.observe(self.sysfs_root, dataclasses.replace(
                device, deployables=live), observation)
        card = self._xrt_cards.get(device.address)
        if card is not None:
            return dataclasses.replace(observation, problems=(
                observation.problems + _xrt_problems(self.sysfs_root, card)))
        return observation

    def loaded_function(self, address):
        """The function id (32 lower-case hex digits) loaded in the FPGA
        ``address``, read now, or None when none is (or it is unreadable).
        """
        card = self._xrt_cards.get(address)
        if card is not None:
            try:
                return card.xclbin_uuid()
            except sources.MalformedDevice as exc:
                LOG.warning('FPGA %s (Alveo user PF): %s', address, exc)
                return None
        port = self._dfl_ports.get(address)
        if (port is None and self._dfl_seen is not None and
                address in self._dfl_seen.held):
            # A guest holds it: what it had loaded when last read.
            prefix = function_trait(self._dfl_seen.deployable(
                address).driver_name, '')
            return next((t[len(prefix):].lower() for t in
                         self._dfl_seen.deployable(address).traits
                         if t.startswith(prefix)), None)
        if port is None:
            raise exception.UnknownDevice(kind='FPGA', address=address)
        try:
            return _read_id(os.path.join(port.path, 'afu_id'))
        except sources.MalformedDevice as exc:
            LOG.warning('FPGA %s (%s): %s', address, port.name, exc)
            return None


def _xrt_problems(sysfs_root, card):
    """The management PF is there; the user PF, while ``xocl`` has it,
    is ``ready`` (its mailbox to ``xclmgmt`` is up: xocl_sysfs.c)."""
    problems = ()
    if not os.path.lexists(os.path.join(sysfs_root, 'bus', 'pci',
                                        'devices', card.mgmt)):
        problems += ('its management PF %s is gone' % card.mgmt,)
    if xrt.bound_driver(card.path) == xrt.USER_DRIVER:
        ready = card.read('ready')
        try:
            up = ready is not None and int(ready, 16) != 0
        except ValueError:
            up = False
        if not up:
            problems += ('its user PF is not ready (xocl ready is %r)'
                         % ready,)
    return problems


def _read_id(path):
    """The ``afu_id`` at ``path`` (:func:`parse_id`), None if absent."""
    value = sources.read_file(path)
    return parse_id(value, 'afu_id') if value else None
