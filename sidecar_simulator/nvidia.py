"""NVIDIA GPUs as the kernel and NVIDIA's host driver show them, written
from the kernel's ABI documents and NVIDIA's own tools, not from what the
sidecar reads.

A card is data (:data:`MODELS`, :class:`Card`); :class:`NvidiaHost` adds
its PCI functions to a :class:`sidecar_simulator.host.SimulatedHost` and
writes, after the host's own tree, what NVIDIA's driver adds. Every path
and value names its source; :data:`SOURCES` maps each kind of path to it
and :func:`source_of` finds the kind of a written path, so a test can check
that nothing lacks a source. Three shapes:

``vfio-vgpu`` (vGPU 17 and later, Ada and Hopper, Linux 6.8 and later)
    The PF and its VFs (enabled by ``sriov-manage -e``) stay bound to
    ``nvidia``; there is no mdev bus. Each VF has ``nvidia/`` with
    ``creatable_vgpu_types`` (``"<id> : <name>"`` lines after an ``ID :
    vGPU Name`` header) and ``current_vgpu_type`` (the type id, ``0``
    when none is set). Writing an id creates the vGPU, ``0`` removes it.
    A VF with a type lists only that type; a free VF lists the types the
    card can still host: all GPUs of a card run one type (homogeneous
    mode), and on a full card every VF, typed or not, lists none
    (:mod:`sidecar_simulator.nvidia_vfio`).
``mdev`` (vGPU 16 and earlier on SR-IOV GPUs: A100, A30, A40, A16)
    Each VF is an mdev parent whose ``mdev_supported_types`` offers every
    type with ``available_instances`` 1 while the card can host one more of
    that type and the VF holds none, 0 otherwise.
``passthrough``
    The whole GPU bound to ``vfio-pci``, alone in its IOMMU group.

Type ids are per card (NVIDIA/kubevirt-gpu-device-plugin
``pkg/device_plugin/vfio_vgpu.go``: "vGPU type ids are only unique within
one physical card"); the ids below are examples in NVIDIA's format, not
NVIDIA's numbers. Type names and how many fit one GPU follow the GPU's
framebuffer (NVIDIA vGPU software user guide: an ``<N>C`` type has N GB).
"""

import dataclasses
import errno
import os
import re
from typing import Optional

from sidecar_simulator import abi_sources
from sidecar_simulator import host as simulator
from sidecar_simulator import nvidia_vfio

#: kind of path -> its source.
SOURCES = {
    'pci': 'Documentation/ABI/testing/sysfs-bus-pci (vendor, device, '
           'class, numa_node, sriov_totalvfs, sriov_numvfs, physfn, '
           'virtfnN); PCI ids: pci.ids (10de:2331 GH100 [H100 PCIe], '
           '10de:20f1 GA100 [A100 PCIe 40GB], 10de:20b5 GA100 [A100 PCIe '
           '80GB], 10de:2230 GA102GL [RTX '
           'A6000] and 10de:1aef its audio, 10b5:8747 PEX 8747 switch); '
           'a VF reports its PF\'s device id, as these profiles assume',
    'driver': 'Documentation/ABI/testing/sysfs-bus-pci and '
              'drivers/base/bus.c (the "driver" link to '
              'bus/pci/drivers/<name>, and its link back); NVIDIA/'
              'vgpu-device-manager pkg/vgpu/vfio/sysfs.go (driver() reads '
              'it; "nvidia" for vGPU 17 PFs and VFs)',
    'iommu': 'Documentation/ABI/testing/sysfs-kernel-iommu_groups; '
             'drivers/iommu/iommu.c (iommu_group link, '
             'kernel/iommu_groups/N/devices/<bdf>)',
    'vendor_vfio': 'NVIDIA/vgpu-device-manager pkg/vgpu/vfio/sysfs.go '
                   '(nvidia/creatable_vgpu_types, nvidia/current_vgpu_type'
                   ', "0" when none, parseCreatableVGPUTypes "<id> : '
                   '<name>", header "ID"); NVIDIA/kubevirt-gpu-device-'
                   'plugin pkg/device_plugin/vfio_vgpu.go (a configured '
                   'VF lists only its active type, or nothing on a full '
                   'card: sidecar_simulator.nvidia_vfio)',
    'mdev': 'Documentation/driver-api/vfio-mediated-device.rst and '
            'Documentation/ABI/testing/sysfs-bus-vfio-mdev '
            '(mdev_supported_types/<type>/{name,device_api,'
            'available_instances,create,devices,description}, '
            'class/mdev_bus, bus/mdev/devices, <uuid>/{mdev_type,'
            'remove}); description is the vendor\'s text, NVIDIA\'s '
            'ending with max_instance=<vGPUs per GPU> (NVIDIA vGPU '
            'software user guide, mdevctl types output)',
}


@dataclasses.dataclass(frozen=True)
class VgpuType:
    """One vGPU type: its id on the card, its name, how many fit one GPU."""
    type_id: str
    name: str
    per_gpu: int


@dataclasses.dataclass(frozen=True)
class GpuModel:
    product_id: str
    class_id: str
    framebuffer_gb: int
    #: vGPU 17+ types (numeric ids) and vGPU <= 16 mdev types.
    vfio_types: tuple = ()
    mdev_types: tuple = ()


def _c_types(prefix, gpu, framebuffer, sizes, ids):
    """``<prefix> <gpu>-<size>C`` types, ``framebuffer // size`` each."""
    return tuple(VgpuType(type_id, '%s %s-%dC' % (prefix, gpu, size),
                          framebuffer // size)
                 for type_id, size in zip(ids, sizes))


#: PCI class 0x0302 "3D controller" (sysfs-bus-pci class; PCI Code and ID
#: Assignment Specification): data-centre GPUs have no VGA.
CLASS_3D = '030200'
MODELS = {
    # A workstation GPU with its HD audio function (pci.ids: 10de:2230
    # GA102GL [RTX A6000], 10de:1aef GA102 High Definition Audio
    # Controller; class 0x0300 VGA, 0x0403 audio).
    'rtx-a6000': GpuModel('2230', '030000', 48),
    'h100-pcie': GpuModel(
        '2331', CLASS_3D, 80,
        vfio_types=_c_types('NVIDIA', 'H100', 80, (4, 5, 8, 10, 16, 20,
                                                   40, 80),
                            [str(1054 + i) for i in range(8)])),
    'a100-pcie-40gb': GpuModel(
        '20f1', CLASS_3D, 40,
        mdev_types=_c_types('GRID', 'A100', 40, (4, 5, 8, 10, 20, 40),
                            ['nvidia-%d' % (471 + i) for i in range(6)])),
    # pci.ids 10de:20b5 GA100 [A100 PCIe 80GB]; NVIDIA's vGPU types of an
    # 80 GB A100 are named A100D (user guide, "NVIDIA A100 PCIe 80GB
    # Virtual GPU Types": A100D-20C, 4 per GPU).
    'a100-pcie-80gb': GpuModel(
        '20b5', CLASS_3D, 80,
        mdev_types=_c_types('GRID', 'A100D', 80, (4, 5, 8, 10, 16, 20, 40,
                                                  80),
                            ['nvidia-%d' % (692 + i) for i in range(8)])),
}
HEADER = 'ID    : vGPU Name'
#: pci.ids: the RTX A6000's audio function; a PLX PEX 8747 switch port
#: (10b5:8747, class 0x0604 PCI bridge, driver pcieport:
#: drivers/pci/pcie/portdrv.c).
AUDIO = ('1aef', '040300')
SWITCH_PORT = ('10b5', '8747', '060400')


@dataclasses.dataclass
class Card:
    model: str
    shape: str  # 'vfio-vgpu', 'mdev' or 'passthrough'
    pf: str
    vfs: list = dataclasses.field(default_factory=list)
    #: vfio-vgpu: VF address -> current type id ('0': none).
    current: dict = dataclasses.field(default_factory=dict)
    #: Other functions of the card (a GPU's audio function).
    functions: list = dataclasses.field(default_factory=list)

    @property
    def gpu(self):
        return MODELS[self.model]


class NvidiaHost:
    """NVIDIA cards on a :class:`SimulatedHost`."""

    def __init__(self, host=None):
        self.host = host or simulator.SimulatedHost()
        if 'nvidia' in self.host.extensions:
            raise ValueError('the host has its NVIDIA cards already')
        self.cards = []
        self.root = None
        self._groups = 0
        # What NVIDIA's driver adds is written with the host's tree, and
        # taken back from it, wherever the host is written or loaded.
        self.host.extensions['nvidia'] = _Extension(self)

    def __getattr__(self, name):
        # Whatever NVIDIA's driver does not change is the host's: an
        # NvidiaHost goes where a SimulatedHost does (the functional
        # harness keeps a host's functions in line with its guests).
        if name == 'host':
            raise AttributeError(name)
        return getattr(self.host, name)

    def _group(self, function, driver, group=None):
        function.driver = driver
        if group is None:
            group, self._groups = self._groups, self._groups + 1
        function.iommu_group = group

    def _card(self, model, shape, num_vfs, address, numa_node, driver):
        gpu = MODELS[model]
        pf = self.host.add_pf('10de', gpu.product_id, gpu.class_id, address,
                              num_vfs, gpu.product_id, numa_node)
        card = Card(model=model, shape=shape, pf=pf.address,
                    vfs=[pf.virtfns[i] for i in sorted(pf.virtfns)])
        for address in [pf.address] + card.vfs:
            self._group(self.host.functions[address], driver)
        self.cards.append(card)
        return card

    def add_vfio_vgpu_card(self, model='h100-pcie', num_vfs=8, types=None,
                           address=None, numa_node=None):
        """A vGPU 17 card: ``types`` maps VF index to a type name."""
        card = self._card(model, 'vfio-vgpu', num_vfs, address, numa_node,
                          'nvidia')
        card.current = {vf: '0' for vf in card.vfs}
        by_name = {t.name: t.type_id for t in card.gpu.vfio_types}
        for index, name in (types or {}).items():
            card.current[card.vfs[index]] = by_name[name]
        return card

    def add_mdev_card(self, model='a100-pcie-40gb', num_vfs=20, address=None,
                      numa_node=None):
        """A vGPU <= 16 card: every VF an mdev parent of every type."""
        card = self._card(model, 'mdev', num_vfs, address, numa_node,
                          'nvidia')
        for vf in card.vfs:
            self.host.functions[vf].mdev_types = [
                simulator.SimMdevType(t.type_id, t.name, 0)
                for t in card.gpu.mdev_types]
        self._mdev_capacity(card)
        return card

    def add_passthrough_gpu(self, model='h100-pcie', address=None,
                            numa_node=None, driver='vfio-pci',
                            audio_driver=None, group_with=None):
        """A whole GPU on ``driver``, alone in its IOMMU group, or in
        ``group_with``'s (a card: two GPUs behind a switch without ACS).
        A model with audio gets its audio function at function 1 of the
        same slot, in the same group, on ``audio_driver`` (None: none).
        """
        card = self._card(model, 'passthrough', 0, address, numa_node,
                          driver)
        pf = self.host.functions[card.pf]
        if group_with is not None:
            pf.iommu_group = self.host.functions[group_with.pf].iommu_group
        if model == 'rtx-a6000':
            audio = self.host.add_pf('10de', AUDIO[0], AUDIO[1],
                                     card.pf[:-1] + '1',
                                     numa_node=numa_node)
            self._group(audio, audio_driver, pf.iommu_group)
            card.vfs = []
            card.functions = [audio.address]
        return card

    def add_switch_port(self, group_with):
        """A PCIe switch port in ``group_with``'s IOMMU group."""
        port = self.host.add_pf(*SWITCH_PORT)
        self._group(port, 'pcieport',
                    self.host.functions[group_with.pf].iommu_group)
        return port.address

    # -- vfio-vgpu --------------------------------------------------------

    def creatable(self, card, vf):
        """The ``(id, name)`` types ``vf`` lists in creatable_vgpu_types
        (:func:`sidecar_simulator.nvidia_vfio.creatable`)."""
        return nvidia_vfio.creatable(card, vf)

    def _write_vfio(self, card):
        for vf in card.vfs:
            text = '\n'.join([HEADER] + ['%s : %s' % item for item in
                                         self.creatable(card, vf)])
            simulator._write_files(self.host._dir(vf, 'nvidia'), {
                'creatable_vgpu_types': text,
                'current_vgpu_type': card.current[vf]})

    def set_vgpu_type(self, card, vf, type_id):
        """What writing ``current_vgpu_type`` does; ValueError (EINVAL)
        for a type the VF does not list."""
        if type_id != '0' and type_id not in dict(self.creatable(card, vf)):
            raise ValueError('%s cannot host vGPU type %s' % (vf, type_id))
        card.current[vf] = type_id
        if self.root is not None:
            self._write_vfio(card)

    def kernel_write(self, path, value):
        """What the driver does when ``value`` is written to the file
        ``path`` under the written root: ``<VF>/nvidia/current_vgpu_type``
        takes a type id its ``creatable_vgpu_types`` lists (or 0), and
        every VF's list follows (NVIDIA vgpu-device-manager
        ``pkg/vgpu/vfio/sysfs.go``: the write creates the vGPU; a type the
        VF does not list fails with EINVAL). Any other file is written."""
        match = re.search(r'/(%s)/nvidia/current_vgpu_type$' % _BDF,
                          os.path.realpath(path))
        card = match and card_of(self.cards, match.group(1))
        if not card or card.shape != 'vfio-vgpu':
            with open(path, 'w') as f:
                f.write(value)
            return
        try:
            self.set_vgpu_type(card, match.group(1), value.strip())
        except ValueError as exc:
            raise OSError(errno.EINVAL, str(exc))

    # -- mdev -------------------------------------------------------------

    def _mdev_capacity(self, card):
        functions = [self.host.functions[vf] for vf in card.vfs]
        used = [(t.type_id, len(t.mdevs)) for f in functions
                for t in f.mdev_types if t.mdevs]
        count = sum(n for _type, n in used)
        for f in functions:
            holds = any(t.mdevs for t in f.mdev_types)
            for t in f.mdev_types:
                spec = next(s for s in card.gpu.mdev_types
                            if s.type_id == t.type_id)
                fits = (not holds and count < spec.per_gpu and
                        all(u == t.type_id for u, _n in used))
                if self.root is None:
                    t.available_instances = int(fits)
                else:
                    self.host.set_available_instances(f.address, t.type_id,
                                                      int(fits))

    def create_mdev(self, card, vf, type_id, uuid=None):
        """Create an mdev on ``vf``; every VF's capacity follows."""
        f = self.host.functions[vf]
        t = next(t for t in f.mdev_types if t.type_id == type_id)
        if not t.available_instances:
            raise ValueError('%s cannot host %s' % (vf, type_id))
        uuid = self.host.create_mdev(vf, type_id, uuid)
        self._mdev_capacity(card)
        return uuid

    # -- writing ----------------------------------------------------------

    def _write_devices(self, root):
        """What NVIDIA's driver adds, after the host's PCI tree."""
        self.root = root
        for card in self.cards:
            if card.shape == 'vfio-vgpu':
                self._write_vfio(card)
            elif card.shape == 'mdev':
                self._write_descriptions(card)
        return root

    def _load_state(self, root):
        """Each vGPU 17 VF's type as a tree written before holds it: the
        driver keeps ``current_vgpu_type`` while the services that use
        the card restart (not across a reboot:
        :func:`sidecar_simulator.kernel.reboot`). A VF missing from the
        tree keeps its description's."""
        for card in self.cards:
            if card.shape != 'vfio-vgpu':
                continue
            for vf in card.vfs:
                path = os.path.join(self.host._dir(vf, 'nvidia'),
                                    'current_vgpu_type')
                current = simulator._read(path)
                if current is not None:
                    card.current[vf] = current.strip()

    def _write_descriptions(self, card):
        """Each mdev type's ``description``, as NVIDIA's driver writes it
        (NVIDIA vGPU software user guide, ``mdevctl types`` output:
        ``num_heads=..., frl_config=..., framebuffer=<MiB>M,
        max_resolution=..., max_instance=<per GPU>``)."""
        for vf in card.vfs:
            for t in card.gpu.mdev_types:
                size = card.gpu.framebuffer_gb // t.per_gpu
                simulator._write_files(
                    self.host._dir(vf, 'mdev_supported_types', t.type_id),
                    {'description': 'num_heads=1, frl_config=60, '
                                    'framebuffer=%dM, max_resolution='
                                    '4096x2400, max_instance=%d'
                                    % (size * 1024, t.per_gpu)})


class _Extension:
    """An :class:`NvidiaHost` as its host's ``nvidia`` extension: the
    host's ``write`` and ``load_state`` call these. Kept apart from the
    NvidiaHost, whose ``write`` and ``load_state`` are the host's own
    (its ``__getattr__``): the whole tree, written or loaded."""

    def __init__(self, cards):
        self.cards = cards

    def write_devices(self, root):
        return self.cards._write_devices(root)

    def load_state(self, root):
        self.cards._load_state(root)


def of(host):
    """The :class:`NvidiaHost` of ``host`` (a SimulatedHost), or None."""
    extension = host.extensions.get('nvidia')
    return extension.cards if extension is not None else None


_BDF = r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]'
_UUID = r'[0-9a-f-]{36}'
#: (pattern of a path relative to the sysfs root, SOURCES key); first match.
_RULES = tuple((re.compile(pattern), kind) for pattern, kind in (
    (r'/%s/nvidia(/(creatable_vgpu_types|current_vgpu_type))?$' % _BDF,
     'vendor_vfio'),
    (r'/%s/mdev_supported_types(/[^/]+(/(name|device_api|description|'
     r'available_instances|create|devices(/%s)?))?)?$' % (_BDF, _UUID),
     'mdev'),
    (r'/%s/%s(/(mdev_type|remove))?$' % (_BDF, _UUID), 'mdev'),
    (r'^(class(/mdev_bus(/%s)?)?|bus/mdev(/devices(/%s)?)?)$' % (_BDF, _UUID),
     'mdev'),
    (r'^devices/pci[0-9a-f]{4}:00/%s/driver$' % _BDF, 'driver'),
    (r'^bus/pci/drivers(/[a-z0-9_-]+(/%s)?)?$' % _BDF, 'driver'),
    (r'^devices/pci[0-9a-f]{4}:00/%s/iommu_group$' % _BDF, 'iommu'),
    (r'^kernel(/iommu_groups(/\d+(/devices(/%s)?)?)?)?$' % _BDF, 'iommu'),
    (r'^(devices(/pci[0-9a-f]{4}:00(/%s(/(vendor|device|class|numa_node|'
     r'sriov_totalvfs|sriov_numvfs|physfn|virtfn\d+))?)?)?|'
     r'bus(/pci(/devices(/%s)?)?)?)$' % (_BDF, _BDF), 'pci'),
))


def source_of(relpath):
    """The :data:`SOURCES` key of a path this module writes, or None."""
    return abi_sources.source_of(_RULES, relpath)


written_paths = abi_sources.written_paths


def card_of(cards, address) -> Optional[Card]:
    """The card one of whose functions is ``address``, or None."""
    return next((c for c in cards if address == c.pf or address in c.vfs),
                None)
