"""Simulated compute hosts: a sysfs tree and libvirt node device XML.

Tests, demos and benchmarks describe a host once and get both views::

    host = SimulatedHost.from_description({
        'pfs': [{'vendor_id': '8086', 'product_id': '1528', 'num_vfs': 4,
                 'vf_product_id': '1515', 'numa_node': 0}],
        'fpgas': [{'num_vfs': 2, 'function_id': '<32 hex digits>'}],
        'gpus': [{'mdev_types': [{'type_id': 'nvidia-222',
                                  'name': 'GRID T4-1B',
                                  'available_instances': 16}]}]})
    host.write('/tmp/sys')                        # for SysfsSource
    uri = host.write_node_xml('/tmp/node.xml')    # 'test:///tmp/node.xml'

Entry keys are the arguments of :meth:`SimulatedHost.add_pf`, ``add_fpga``
and ``add_gpu``. An FPGA is an Intel DFL card written by
:mod:`sidecar_simulator.dfl` from the kernel's ABI (the generic
``fpga_region`` holding ``afu_id`` that this module once wrote has no
source in the kernel). An entry without ``address`` gets function 0 of
the next free slot from ``start`` (default ``0000:81:00.0``). VF *i*
(0-based) of a PF is at the PF's routing id + 1 + *i* (SR-IOV offset 1,
stride 1):
``81:00.1`` ... ``81:00.7``, ``81:01.0``, ... and on to the next bus after
slot 1f: the scheme of Nova's fakelibvirt ``HostPCIDevicesInfo``, whose
exact host :func:`from_fakelibvirt` builds.

The tree has the kernel's layout: ``devices/pci<dddd>:00/<bdf>/`` (``vendor``,
``device``, ``class``, ``numa_node``, ``sriov_*``, ``physfn`` and
``virtfn<i>`` links, ``mdev_supported_types/<type>/``, mdevs) linked from
``bus/pci/devices``, ``class/mdev_bus`` and ``bus/mdev/devices``; the
cards of :mod:`sidecar_simulator.dfl` and :mod:`sidecar_simulator.xrt`
added to a host are written with it. After :meth:`SimulatedHost.write`
the mutators change the description and the tree alike; ``write_attr``
and ``remove_attr`` corrupt the tree only.

Writing over a tree written before (a host's process restarts) replaces
it in place. The kernel keeps some state across a restart of the services
that use it: what an FPGA port has loaded, the mdevs created and which
functions a guest has on ``vfio-pci``. :meth:`SimulatedHost.load_state`
takes that state from an existing tree first, so that a restarted host
finds its hardware as it left it::

    host.load_state('/tmp/sys').write('/tmp/sys')
"""

import dataclasses
import os
import shutil
import uuid as uuidlib
from typing import Optional

from sidecar import model
from sidecar_simulator import libvirt_xml as simulator_xml

DEFAULT_START = '0000:81:00.0'
NO_FUNCTION = '0' * 32
#: Directories of links the kernel removes with the device they lead to.
_CLASS_LINKS = ('class/fpga_region', 'class/fpga_manager',
                'class/fpga_bridge', 'bus/platform/devices')
DEFAULT_COMPAT_ID = 'f3c9941350814aadbced07eb84a6d0bb'


@dataclasses.dataclass
class SimMdevType:
    type_id: str
    name: Optional[str] = None
    available_instances: int = 16
    device_api: str = 'vfio-pci'
    mdevs: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SimFunction:
    address: str
    vendor_id: str
    product_id: str
    class_id: str
    numa_node: Optional[int] = None
    physfn: Optional[str] = None
    virtfns: dict = dataclasses.field(default_factory=dict)  # index: addr
    mdev_types: list = dataclasses.field(default_factory=list)
    #: The bound driver's name (``driver`` link) and the IOMMU group number
    #: (``iommu_group`` link); None: no link.
    driver: Optional[str] = None
    iommu_group: Optional[int] = None
    #: SR-IOV capable PF: the VFs it was created with (its
    #: ``sriov_totalvfs``; ``sriov_numvfs`` reads 0 while none is).
    total_vfs: int = 0


def _rid(address):
    domain, bus, slot, function = model.parse_bdf(address)
    return int(domain, 16), (int(bus, 16) << 8 | int(slot, 16) << 3 |
                             int(function, 16))


def _address(domain, rid):
    if rid > 0xffff:
        raise ValueError('no PCI address left after bus ff')
    return '%04x:%02x:%02x.%x' % (domain, rid >> 8, (rid >> 3) & 0x1f,
                                  rid & 7)


def _write(path, text):
    with open(path, 'w') as f:
        f.write(text)


def _write_files(directory, files):
    """Create ``directory`` and write ``{name: text}`` (None: no file)."""
    os.makedirs(directory, exist_ok=True)
    for name, text in files.items():
        if text is not None:
            _write(os.path.join(directory, name), '%s\n' % text)


def _link(value, link):
    """``os.symlink(value, link)``, replacing a link already there."""
    try:
        os.symlink(value, link)
    except FileExistsError:
        if os.readlink(link) != value:
            os.symlink(value, link + '.new')
            os.replace(link + '.new', link)


def _symlink(target, link):
    """A relative symlink ``link`` -> ``target`` (both absolute)."""
    os.makedirs(os.path.dirname(link), exist_ok=True)
    _link(os.path.relpath(target, os.path.dirname(link)), link)


def _read(path):
    """A sysfs file's value without its newline; None if it is absent."""
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


class SimulatedHost:
    """A host's PCI functions, rendered as sysfs and as libvirt XML."""

    def __init__(self, start=DEFAULT_START):
        self.domain, self._next = _rid(start)
        self.functions = {}  # address: SimFunction, in creation order
        self.root = None
        #: What writes more after this host's own tree (a
        #: :class:`sidecar_simulator.dfl.DflHost`,
        #: :class:`sidecar_simulator.xrt.XrtHost`): ``{kind: extension}``.
        self.extensions = {}
        #: function address: the driver it had before a guest took it
        #: (:mod:`sidecar_simulator.kernel`), until it is given back.
        self.overridden = {}
        #: function address: the PCIe port above it in ``devices/``
        #: (:mod:`sidecar_simulator.pci_health`); none: on the root bus.
        self.ports = {}

    # -- building ---------------------------------------------------------

    @classmethod
    def from_description(cls, description):
        """A host from ``{'start', 'pfs', 'fpgas', 'gpus'}`` (see above)."""
        host = cls(description.get('start', DEFAULT_START))
        for kind in ('pfs', 'fpgas', 'gpus'):
            add = getattr(host, 'add_' + kind[:-1])
            for entry in description.get(kind, ()):
                add(**entry)
        return host

    def _take(self, address, **fields):
        if address is None:
            address = _address(self.domain, self._next)
        else:
            address = address.lower()
            model.parse_bdf(address)
        if address in self.functions:
            raise ValueError('two simulated devices at %s' % address)
        function = SimFunction(address=address, **fields)
        self.functions[address] = function
        # The next automatic address is the next free slot, function 0.
        self._next = max(self._next, (_rid(address)[1] | 7) + 1)
        return function

    def add_pf(self, vendor_id='8086', product_id='1528',
               class_id='020000', address=None, num_vfs=0,
               vf_product_id=None, numa_node=None):
        """A PCI function, with ``num_vfs`` VFs (0: no SR-IOV)."""
        pf = self._take(address, vendor_id=vendor_id, product_id=product_id,
                        class_id=class_id, numa_node=numa_node,
                        total_vfs=num_vfs)
        for index in range(num_vfs):
            self._new_vf(pf, vf_product_id or product_id, index)
        return pf

    def add_fpga(self, profile=None, address=None, num_vfs=0,
                 function_id=None, compat_id=DEFAULT_COMPAT_ID,
                 numa_node=None):
        """An Intel DFL card (:mod:`sidecar_simulator.dfl`) whose ports
        hold ``function_id``; returns its PF.

        With ``num_vfs`` (1 to 4) the card has that many ports, each
        released and served by its VF (VF *i*, port *i*; default profile
        ``n6000``); without, one port on the PF (``d5005``).
        """
        card = self.dfl.add_card(
            profile or ('n6000' if num_vfs else 'd5005'), compat_id,
            function_id, sriov=bool(num_vfs), address=address,
            numa_node=numa_node, ports=num_vfs or 1)
        return self.functions[card.pf]

    @property
    def dfl(self):
        """This host's :class:`sidecar_simulator.dfl.DflHost`."""
        if 'dfl' not in self.extensions:
            from sidecar_simulator import dfl
            dfl.DflHost(self)
            assert 'dfl' in self.extensions
        return self.extensions['dfl']

    def fpga_card(self, address):
        """The DFL card whose PF or port's VF is ``address``, or None."""
        extension = self.extensions.get('dfl')
        return extension and extension.card_of(address)

    def fpga_pfs(self):
        """The PFs of this host's DFL cards, sorted."""
        extension = self.extensions.get('dfl')
        return sorted(c.pf for c in extension.cards) if extension else []

    def add_gpu(self, vendor_id='10de', product_id='1eb8',
                class_id='030200', address=None, mdev_types=(),
                numa_node=None):
        """A GPU offering ``mdev_types`` (dicts or :class:`SimMdevType`)."""
        gpu = self._take(address, vendor_id=vendor_id, product_id=product_id,
                         class_id=class_id, numa_node=numa_node)
        gpu.mdev_types = [t if isinstance(t, SimMdevType) else
                          SimMdevType(**t) for t in mdev_types]
        return gpu

    def _new_vf(self, pf, product_id, index):
        domain, pf_rid = _rid(pf.address)
        vf = self._take(_address(domain, pf_rid + 1 + index),
                        vendor_id=pf.vendor_id, product_id=product_id,
                        class_id=pf.class_id, numa_node=pf.numa_node,
                        physfn=pf.address)
        pf.virtfns[index] = vf.address
        return vf

    # -- sysfs ------------------------------------------------------------

    def _dir(self, address, *parts):
        if self.root is None:
            raise RuntimeError('the sysfs tree of this host is not written '
                               'yet: a path in it needs write(root) first')
        port = self.ports.get(address)
        return os.path.join(self.root, 'devices', 'pci%04x:00' % self.domain,
                            *((port,) if port else ()), address, *parts)

    def write(self, root):
        """Write the whole sysfs tree under ``root``; returns ``root``.

        A tree already there (this host's, written before) is brought to
        this description: writing twice gives the same tree.
        """
        self.root = root
        for function in self.functions.values():
            self._write_function(function)
        for extension in self.extensions.values():
            extension.write_devices(root)
        return root

    def load_state(self, root):
        """Take the hardware's state from a tree written before; returns
        ``self``.

        That is what the kernel keeps while the services that use the
        devices restart: each FPGA port's loaded function (``afu_id``,
        which a programmer writes to the tree directly), each mdev
        type's mdevs and available instances, and the functions on
        ``vfio-pci`` (a port under one has no ``afu_id`` to read: it keeps
        its description's). Functions missing from the tree keep their
        description; nothing is written.
        """
        saved, self.root = self.root, root
        try:
            for f in self.functions.values():
                if not os.path.isdir(self._dir(f.address)):
                    continue
                self._load_driver(f)
                for t in f.mdev_types:
                    type_dir = self._dir(f.address, 'mdev_supported_types',
                                         t.type_id)
                    if not os.path.isdir(type_dir):
                        continue
                    t.mdevs = sorted(os.listdir(
                        os.path.join(type_dir, 'devices')))
                    count = _read(os.path.join(type_dir,
                                               'available_instances'))
                    if count is not None:
                        t.available_instances = int(count)
            for extension in self.extensions.values():
                extension.load_state(root)
        finally:
            self.root = saved
        return self

    def _load_driver(self, f):
        """A function a guest had (its ``driver`` link to ``vfio-pci``,
        :mod:`sidecar_simulator.kernel`) stays on it, its own driver kept
        for when it is given back."""
        try:
            driver = os.path.basename(os.readlink(self._dir(f.address,
                                                            'driver')))
        except OSError:
            return
        if driver == 'vfio-pci' and f.driver != driver:
            self.overridden[f.address] = f.driver
            f.driver = driver

    def _write_function(self, f):
        path = self._dir(f.address)
        _write_files(path, {
            'vendor': '0x' + f.vendor_id, 'device': '0x' + f.product_id,
            'class': '0x' + f.class_id,
            'numa_node': -1 if f.numa_node is None else f.numa_node})
        _symlink(path, os.path.join(self.root, 'bus/pci/devices', f.address))
        if f.physfn:
            _link('../' + f.physfn, os.path.join(path, 'physfn'))
        if f.virtfns or f.total_vfs:
            self._write_sriov(f)
        self._write_links(f, path)
        for index, vf in f.virtfns.items():
            _link('../' + vf, os.path.join(path, 'virtfn%d' % index))
        if f.mdev_types:
            _symlink(path, os.path.join(self.root, 'class/mdev_bus',
                                        f.address))
        for t in f.mdev_types:
            type_dir = self._dir(f.address, 'mdev_supported_types', t.type_id)
            _write_files(os.path.join(type_dir, 'devices'), {})
            _write_files(type_dir, {
                'name': t.name, 'device_api': t.device_api, 'create': '',
                'available_instances': t.available_instances})
            for uuid in os.listdir(os.path.join(type_dir, 'devices')):
                if uuid not in t.mdevs:       # a tree written before
                    self._unlink_mdev(f.address, t.type_id, uuid)
            for uuid in t.mdevs:
                self._write_mdev(f, t, uuid)

    def _write_links(self, f, path):
        """The ``driver`` and ``iommu_group`` links and their other ends
        (Documentation/ABI/testing/sysfs-bus-pci, sysfs-kernel-iommu_groups;
        drivers/base/bus.c, drivers/iommu/iommu.c)."""
        if f.driver:
            driver = os.path.join(self.root, 'bus/pci/drivers', f.driver)
            _symlink(driver, os.path.join(path, 'driver'))
            _symlink(path, os.path.join(driver, f.address))
        if f.iommu_group is not None:
            group = os.path.join(self.root, 'kernel/iommu_groups',
                                 str(f.iommu_group))
            _symlink(group, os.path.join(path, 'iommu_group'))
            _symlink(path, os.path.join(group, 'devices', f.address))

    def _write_sriov(self, pf):
        _write_files(self._dir(pf.address), {
            'sriov_totalvfs': max([len(pf.virtfns), pf.total_vfs] +
                                  [i + 1 for i in pf.virtfns]),
            'sriov_numvfs': len(pf.virtfns)})

    def _write_mdev(self, f, t, uuid):
        path = self._dir(f.address, uuid)
        _write_files(path, {'remove': ''})
        _link('../mdev_supported_types/' + t.type_id,
              os.path.join(path, 'mdev_type'))
        _link('../../../' + uuid, self._dir(
            f.address, 'mdev_supported_types', t.type_id, 'devices', uuid))
        _symlink(path, os.path.join(self.root, 'bus/mdev/devices', uuid))

    def _unlink_mdev(self, address, type_id, uuid):
        os.unlink(self._dir(address, 'mdev_supported_types', type_id,
                            'devices', uuid))
        os.unlink(os.path.join(self.root, 'bus/mdev/devices', uuid))
        shutil.rmtree(self._dir(address, uuid))

    # -- libvirt ----------------------------------------------------------

    def node_xml(self):
        """libvirt test driver XML (``test:///<file>``) for this host."""
        return simulator_xml.node_xml(self.functions.values())

    def write_node_xml(self, path):
        """Write :meth:`node_xml` to ``path``; returns the test:/// URI."""
        _write(path, self.node_xml())
        return 'test://' + os.path.abspath(path)

    # -- mutating ---------------------------------------------------------

    def _mdev_type(self, address, type_id):
        for t in self.functions[address].mdev_types:
            if t.type_id == type_id:
                return t
        raise KeyError('%s offers no mdev type %s' % (address, type_id))

    def remove_function(self, address):
        """Remove a function (a VF is unlinked from its PF)."""
        f = self.functions.pop(address)
        pf = self.functions.get(f.physfn) if f.physfn else None
        index = None
        if pf is not None:
            index = next(i for i, vf in pf.virtfns.items() if vf == address)
            del pf.virtfns[index]
        if self.root is None:
            return
        if index is not None:
            os.unlink(self._dir(pf.address, 'virtfn%d' % index))
            self._write_sriov(pf)
        for path in (os.path.join(self.root, 'bus/pci/devices', address),
                     os.path.join(self.root, 'class/mdev_bus', address)):
            if os.path.lexists(path):
                os.unlink(path)
        shutil.rmtree(self._dir(address))
        self.prune_class_links()

    def prune_class_links(self):
        """The class and platform devices under a removed function go
        with it (drivers/base/core.c device_del): their links leave."""
        for directory in _CLASS_LINKS:
            directory = os.path.join(self.root, directory)
            for name in (os.listdir(directory)
                         if os.path.isdir(directory) else ()):
                link = os.path.join(directory, name)
                if not os.path.exists(link):
                    os.unlink(link)

    def add_vf(self, pf_address, product_id=None):
        """Add a VF at the PF's lowest free index; returns its address."""
        pf = self.functions[pf_address]
        domain, pf_rid = _rid(pf_address)
        index = 0
        while (index in pf.virtfns or
               _address(domain, pf_rid + 1 + index) in self.functions):
            index += 1
        vf = self._new_vf(pf, product_id or next(
            (self.functions[a].product_id for a in pf.virtfns.values()),
            pf.product_id), index)
        if self.root is not None:
            self._write_function(vf)
            _link('../' + vf.address,
                  self._dir(pf_address, 'virtfn%d' % index))
            self._write_sriov(pf)
        return vf.address

    def set_function_id(self, address, function_id):
        """Load ``function_id`` (32 hex, or None) into the FPGA port
        reached through ``address``; a card's PF: into all its ports."""
        card = self.fpga_card(address)
        if card is None:
            raise KeyError('%s is not a simulated FPGA' % address)
        for index, handle in enumerate(card.handles()):
            if address in (handle, card.pf):
                self.dfl.set_afu_id(card, function_id, index)

    def afu_id_path(self, address):
        """The ``afu_id`` file of the FPGA port reached through
        ``address`` (Documentation/ABI/testing/sysfs-platform-dfl-port)."""
        card, index = self.dfl.find_port(address)
        return os.path.join(self.dfl.port_dir(card, index), 'afu_id')

    def set_available_instances(self, address, type_id, count):
        self._mdev_type(address, type_id).available_instances = count
        if self.root is not None:
            self.write_attr(address, 'mdev_supported_types/%s/'
                            'available_instances' % type_id, str(count))

    def create_mdev(self, address, type_id, uuid=None):
        """Create an mdev (one fewer available instance); returns its UUID."""
        t = self._mdev_type(address, type_id)
        uuid = uuid or str(uuidlib.uuid4())
        t.mdevs.append(uuid)
        if self.root is not None:
            self._write_mdev(self.functions[address], t, uuid)
        self.set_available_instances(address, type_id,
                                     max(t.available_instances - 1, 0))
        return uuid

    def remove_mdev(self, address, type_id, uuid):
        t = self._mdev_type(address, type_id)
        t.mdevs.remove(uuid)
        if self.root is not None:
            self._unlink_mdev(address, type_id, uuid)
        self.set_available_instances(address, type_id,
                                     t.available_instances + 1)

    def write_attr(self, address, relpath, value):
        """Write ``value`` (a newline is added) to a function's file."""
        _write(self._dir(address, relpath), value + '\n')

    def remove_attr(self, address, relpath):
        os.unlink(self._dir(address, relpath))


def from_fakelibvirt(num_pci=0, num_pfs=2, num_vfs=8, num_mdevcap=0,
                     numa_node=None, multiple_gpu_types=False,
                     generic_types=False, bus=0x81, product_ids=('1515',)):
    """The host of Nova's ``fakelibvirt.HostPCIDevicesInfo`` (same args).

    Same addresses, vendor and product ids, VF to PF links, NUMA nodes and
    mdev types as ``nova/tests/fixtures/libvirt.py``; fakelibvirt gives no
    PCI class, so network functions get ``020000`` and the mdev capable
    GPUs ``030000``.
    """
    host = SimulatedHost('0000:%02x:00.0' % bus)
    if num_vfs and not num_pfs:
        raise ValueError('Cannot create VFs without PFs')
    if num_pfs and num_vfs % num_pfs:
        raise ValueError('num_vfs must be a factor of num_pfs')

    def numa(dev):
        value = dev % 2 if numa_node is None else numa_node
        return None if value == -1 else value

    for dev in range(num_pci):
        host.add_pf('8086', '1533', numa_node=numa(dev))
    types = [('nvidia-11', 16)]
    if multiple_gpu_types:
        types.append(('nvidia-12', 8))
    if generic_types:
        types = [('mlx5_core', 16), ('nvidia-12', 8)]
    for dev in range(num_mdevcap):
        host.add_gpu('10de', '0ffe', '030000', numa_node=numa(dev),
                     mdev_types=[SimMdevType(type_id, 'GRID M60-0B', count)
                                 for type_id, count in types])
    ratio = num_vfs // num_pfs if num_pfs else 0
    for product_id in product_ids:
        for dev in range(num_pfs):
            host.add_pf('8086', '1528', num_vfs=ratio,
                        vf_product_id=product_id, numa_node=numa(dev))
    return host
