"""Every GPU and PCI card family of issue 28 on one host, against the real
sidecar, cyborg-conductor, Placement and Nova.

One simulated host (sidecar_simulator: every sysfs path from the kernel's
ABI documents or the vendor's tools) carries what an operator buying cards
in 2026 has, each at its own PCI address:

=============  ==========================================================
02:00.0        an ASPEED BMC display (1a03:2000): never offered
03:00.0        the host's boot VGA (``boot_vga`` 1): never offered
3b:00.0        a T4 with mdev types on its PF (nvidia-222, 16 per GPU)
5e:00.0        an E810 NIC (8086:1592) with 4 VFs on ``physnet1``
6b:00.0        a QAT 4xxx PF serving ``sym;asym``, 2 VFs
70:00.0        a QAT 4xxx PF serving ``dc``, 2 VFs
81:00.0        an H100 PCIe, whole, on ``vfio-pci``, NUMA node 1
82:00.0        an A100 with 8 VFs, each an mdev parent of nvidia-474
               (A100-10C: 4 fit one GPU)
84:00.0        an RTX A6000 whose audio function (84:00.1, same IOMMU
               group) is on ``vfio-pci``: offered with its group
85:00.0        an RTX A6000 whose audio function is held by
               ``snd_hda_intel``: its group cannot go to a guest
88:00.0 89:00.0 two H100 in one IOMMU group behind a PEX 8747 switch
               without ACS: neither is offered
=============  ==========================================================

An operator checks the providers, inventories and traits in Placement
(and that nothing is there for what must not be offered), then boots
servers: a whole GPU is a ``<hostdev managed='yes'>``, a vGPU of the A100
a ``<hostdev type='mdev'>`` on one of its VFs, a QAT VF asked by its
service trait and an E810 VF asked by its physnet trait are PCI hostdevs
(the VF's attach handle names its ``physical_network``).

The host has NVML (nvidia-ml-py's real ``pynvml`` over a stand-in of the
C library, :mod:`tests.nvml_library`) for the GPUs the ``nvidia`` driver
holds, the T4 and the A100: a critical XID on the T4 fences it within one
cycle, with its reason in ``nova-cyborg-sidecar-manage device list``.

Nova's fakelibvirt shows the same PCI addresses, vendor and product ids
and bound drivers as the simulated sysfs (:func:`fake_pci_info`). It
cannot show a PCI class, an IOMMU group of several functions (each
device's ``iommuGroup`` lists itself) or an mdev type other than its own
M60 ones; the sidecar reads those from sysfs only, so the IOMMU group and
mdev profiles are covered through what the sidecar reports and what
Placement shows.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from xml.etree import ElementTree  # noqa: E402

from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402
import pynvml  # noqa: E402

from sidecar.cmd import manage  # noqa: E402
from sidecar.discovery import health  # noqa: E402
from sidecar_simulator import nvidia  # noqa: E402
from sidecar_simulator import pci_health  # noqa: E402
from tests.functional import test_sidecar  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests import nvml_library  # noqa: E402

HOST = 'compute1'
BMC, BOOT_VGA, T4, E810 = ('0000:02:00.0', '0000:03:00.0', '0000:3b:00.0',
                           '0000:5e:00.0')
QAT_CRYPTO, QAT_DC, H100 = '0000:6b:00.0', '0000:70:00.0', '0000:81:00.0'
A100, A6000, A6000_HELD = '0000:82:00.0', '0000:84:00.0', '0000:85:00.0'
SWITCHED = ('0000:88:00.0', '0000:89:00.0')
A100_TYPE, A100_FITS = 'nvidia-474', 4
QAT_SPEC = {'vendor_id': '8086', 'product_id': '4941',
            'resource_class': 'QAT'}
E810_SPEC = {'vendor_id': '8086', 'product_id': '1889',
             'physical_network': 'physnet1'}
CONFIG = """\
[gpu]
device_selector = 10de:*,1a03:*
mdev_max_instances = %s:%d

[pci]
device_spec = %s
device_spec = %s
""" % (A100_TYPE, A100_FITS, json.dumps(QAT_SPEC), json.dumps(E810_SPEC))


class ProfilesHost(object):
    """The simulated host; :meth:`write` is what the sidecar fixture calls.

    What the kernel writes after the PCI tree is written here too: the
    QAT PFs' ``qat/state``, ``cfg_services`` and heartbeat, and the boot
    VGA's ``boot_vga``.
    """

    def __init__(self):
        self.cards = nvidia.NvidiaHost()
        self.host = self.cards.host
        self.host.add_gpu('1a03', '2000', '030000', address=BMC)
        self.host.add_gpu('10de', '2230', '030000', address=BOOT_VGA)
        self.host.add_gpu(address=T4, mdev_types=[
            {'type_id': 'nvidia-222', 'name': 'GRID T4-1B',
             'available_instances': 16},
            {'type_id': 'nvidia-223', 'name': 'GRID T4-2B',
             'available_instances': 8}])
        self.host.add_pf('8086', '1592', address=E810, num_vfs=4,
                         vf_product_id='1889', numa_node=0)
        self.qat = {}
        for address, services in ((QAT_CRYPTO, 'sym;asym'),
                                  (QAT_DC, 'dc')):
            self.qat[pci_health.add_qat(self.host, address, services,
                                        num_vfs=2)] = services
        self.cards.add_passthrough_gpu(address=H100, numa_node=1)
        self.a100 = self.cards.add_mdev_card(num_vfs=8, address=A100)
        for address, audio in ((A6000, 'vfio-pci'),
                               (A6000_HELD, 'snd_hda_intel')):
            self.cards.add_passthrough_gpu('rtx-a6000', address=address,
                                           audio_driver=audio)
        first = self.cards.add_passthrough_gpu(address=SWITCHED[0])
        self.cards.add_passthrough_gpu(address=SWITCHED[1], group_with=first)
        self.switch_port = self.cards.add_switch_port(first)

    def write(self, root):
        self.cards.write(root)
        for address, services in self.qat.items():
            pci_health.set_qat(self.host, address, 'up', services,
                               heartbeat='0')
        self.host.write_attr(BOOT_VGA, 'boot_vga', '1')
        return root


def _parts(address):
    _domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    return int(bus, 16), int(slot, 16), int(function, 16)


def fake_pci_info(host):
    """fakelibvirt's node devices for the functions of ``host`` (a
    :class:`sidecar_simulator.host.SimulatedHost`): same addresses, ids,
    NUMA nodes, drivers, PF and VF links."""
    info = fakelibvirt.HostPCIDevicesInfo(num_pci=0, num_pfs=0, num_vfs=0)
    for index, f in enumerate(host.functions.values()):
        bus, slot, function = _parts(f.address)
        kind, ratio, parent = 'PCI', None, None
        if f.virtfns:
            kind, ratio = 'PF', len(f.virtfns)
        elif f.physfn:
            kind, parent = 'VF', _parts(f.physfn)
            ratio = len(host.functions[f.physfn].virtfns)
        group = f.iommu_group if f.iommu_group is not None else 100 + index
        info.add_device(
            dev_type=kind, bus=bus, slot=slot, function=function,
            iommu_group=group,
            numa_node=-1 if f.numa_node is None else f.numa_node,
            vf_ratio=ratio, parent=parent, vend_id=f.vendor_id,
            prod_id=f.product_id, driver_name=f.driver or 'none')
    return info


class PciProfilesTest(test_sidecar.SidecarTestBase):

    def setUp(self):
        super().setUp()
        self.sim = ProfilesHost()
        self.start_compute(
            hostname=HOST, pci_info=fake_pci_info(self.sim.host),
            host_info=fakelibvirt.HostInfo(cpu_nodes=2, cpu_sockets=1,
                                           cpu_cores=2, cpu_threads=2,
                                           kB_mem=16 * 1024 * 1024))
        self.hosts[HOST] = self.sim.host
        conn = self.computes[HOST].driver._host.get_connection()
        # The mdevs the sidecar creates show in this host's libvirt.
        self._kernels[HOST] = conn
        # NVML sees the GPUs on nvidia (not those on vfio-pci).
        self.nvml = self.useFixture(nvml_library.NvmlLibrary({
            address: {'supported': pynvml.nvmlEventTypeXidCriticalError,
                      'ecc': 0} for address in (T4, A100)})).lib
        self.sidecar = self.sidecars[HOST] = self.useFixture(
            sidecar_fixture.SidecarFixture(
                HOST, self.sim, self.broker.transport_url,
                self.placement_url, lambda: conn, drivers=('gpu', 'pci'),
                mdev_types=(A100_TYPE, 'nvidia-222'), extra=CONFIG,
                cyborg_url=self.cyborg.endpoint))

    def device_providers(self):
        """{provider name: uuid} of the host's device providers."""
        return self.device_rp_uuids(HOST)

    def offered(self, address):
        """(inventory {rc: (total, reserved)}, traits) of ``address``."""
        name = '%s_%s' % (HOST, address)
        return ({rc: (inv['total'], inv['reserved'])
                 for rc, inv in self.inventory(name).items()},
                self.traits(name))

    def test_placement_offers_what_each_card_can_host(self):
        providers = self.device_providers()
        self.assertEqual(
            {'%s_%s' % (HOST, a) for a in (T4, E810, QAT_CRYPTO, QAT_DC,
                                           H100, A100, A6000)},
            set(providers))
        # Never offered: the host's displays, a GPU whose group holds a
        # function on a host driver, two GPUs sharing one group.
        for address in (BMC, BOOT_VGA, A6000_HELD, A6000[:-1] + '1',
                        A6000_HELD[:-1] + '1', self.sim.switch_port) + \
                SWITCHED:
            self.assertNotIn('%s_%s' % (HOST, address), providers)
        owner = 'OWNER_CYBORG'
        inv, traits = self.offered(H100)
        self.assertEqual({'PGPU': (1, 0)}, inv)
        self.assertEqual({owner, 'CUSTOM_NVIDIA_2331',
                          'CUSTOM_PCI_NUMA_NODE_1'}, traits)
        inv, traits = self.offered(A6000)
        self.assertEqual({'PGPU': (1, 0)}, inv)
        self.assertEqual({owner, 'CUSTOM_NVIDIA_2230'}, traits)
        # What the A100 can host, not one per VF.
        inv, traits = self.offered(A100)
        self.assertEqual({'VGPU': (A100_FITS, 0)}, inv)
        self.assertEqual({owner, 'CUSTOM_NVIDIA_20F1_A100_10C'}, traits)
        inv, t4_traits = self.offered(T4)
        self.assertEqual({'VGPU': (16, 0)}, inv)
        self.assertEqual({owner, 'CUSTOM_NVIDIA_1EB8_T4_1B'}, t4_traits)
        qat = {owner, 'CUSTOM_PCI_8086', 'CUSTOM_PCI_PRODUCT_ID_4941'}
        inv, traits = self.offered(QAT_CRYPTO)
        self.assertEqual({'CUSTOM_QAT': (2, 0)}, inv)
        self.assertEqual(qat | {'CUSTOM_QAT_SERVICE_SYM_ASYM'}, traits)
        inv, traits = self.offered(QAT_DC)
        self.assertEqual({'CUSTOM_QAT': (2, 0)}, inv)
        self.assertEqual(qat | {'CUSTOM_QAT_SERVICE_DC'}, traits)
        inv, traits = self.offered(E810)
        self.assertEqual({'CUSTOM_PCI': (4, 0)}, inv)
        self.assertEqual({owner, 'CUSTOM_PCI_8086', 'CUSTOM_PHYSNET1',
                          'CUSTOM_PCI_PRODUCT_ID_1889'}, traits)
        # An unchanged host sends nothing more.
        self.assertFalse(self.sidecar.cycle())

        # NVML reports XID 79 on the T4: fenced within one cycle.
        self.nvml.events.append(
            (T4, pynvml.nvmlEventTypeXidCriticalError, 79))
        self.assertTrue(self.sidecar.cycle())
        waits.wait_until(
            lambda: self.offered(T4) == (
                {'VGPU': (16, 16)}, t4_traits | {health.UNHEALTHY_TRAIT}),
            'the T4 held with the unhealthy trait in Placement')
        row = self.listed(T4)
        self.assertEqual('unhealthy', row['health'])
        self.assertTrue(row['held']['unhealthy'].startswith(
            'NVIDIA XID 79 (GPU has fallen off the bus) at '), row)
        # The other GPU NVML watches, and the rest, stay offered.
        self.assertEqual((A100_FITS, 0), self.offered(A100)[0]['VGPU'])
        self.assertEqual('ok', self.listed(H100)['health'])

    def listed(self, address):
        """The row of ``address`` in ``nova-cyborg-sidecar-manage device
        list``."""
        out, err = io.StringIO(), io.StringIO()
        code = manage.main(
            ['--config-file', self.sidecar.config_path, 'device', 'list',
             '-f', 'json'], stdout=out, stderr=err)
        self.assertEqual(0, code, err.getvalue())
        (row,) = [r for r in json.loads(out.getvalue())
                  if r['device'] == address]
        return row

    def _boot_one(self, groups):
        _name, flavor = self.create_profile_flavor(groups)
        server = self.boot(flavor)
        (arq,) = self.cyborg.list_arqs(server['id'])
        self.assertEqual(('Bound', HOST), (arq['state'], arq['hostname']))
        return server, arq, ElementTree.fromstring(self.domain_xml(server))

    def _pci_hostdev(self, root):
        (hostdev,) = root.findall('./devices/hostdev[@type="pci"]')
        addr = hostdev.find('./source/address')
        return hostdev.get('managed'), base.canonical_bdf(*(
            addr.get(k) for k in ('domain', 'bus', 'slot', 'function')))

    def test_servers_get_the_right_devices(self):
        # A whole H100: its own function, managed by libvirt.
        whole, arq, root = self._boot_one([{
            'resources:PGPU': '1', 'trait:CUSTOM_NVIDIA_2331': 'required'}])
        self.assertEqual('PCI', arq['attach_handle_type'])
        self.assertEqual(('yes', H100), self._pci_hostdev(root))

        # A vGPU of the A100: an mdev on one of its VFs.
        vgpu, arq, root = self._boot_one([{
            'resources:VGPU': '1',
            'trait:CUSTOM_NVIDIA_20F1_A100_10C': 'required'}])
        self.assertEqual(('MDEV', A100_TYPE), (
            arq['attach_handle_type'],
            arq['attach_handle_info'].get('asked_type')))
        vf = self.arq_bdf(arq)
        self.assertIn(vf, self.sim.a100.vfs)
        uuids = [a.get('uuid') for a in root.findall(
            './devices/hostdev[@type="mdev"]/source/address')]
        self.assertEqual([arq['attach_handle_uuid']], uuids)
        self.assertEqual([], root.findall('./devices/hostdev[@type="pci"]'))
        # The sidecar wrote the mdev the ARQ names on that VF.
        create = os.path.join(
            self.sidecar.sysfs_root, 'class', 'mdev_bus', vf,
            'mdev_supported_types', A100_TYPE, 'create')
        with open(create) as f:
            self.assertEqual(arq['attach_handle_uuid'], f.read().strip())
        # The card fills: the kernel makes that mdev, and the three other
        # vGPUs the card fits are made out of band; its free VFs then
        # offer none (available_instances 0). The provider stays, with
        # its inventory.
        cards, a100 = self.sim.cards, self.sim.a100
        cards.create_mdev(a100, vf, A100_TYPE, arq['attach_handle_uuid'])
        for other in [v for v in a100.vfs if v != vf][:A100_FITS - 1]:
            cards.create_mdev(a100, other, A100_TYPE)
        name = '%s_%s' % (HOST, A100)
        provider = self.device_providers()[name]
        self.sidecar.cycle()
        self.assertEqual(provider, self.device_providers()[name])
        self.assertEqual(A100_FITS, self.offered(A100)[0]['VGPU'][0])

        # A compression VF, asked by its service.
        qat, arq, root = self._boot_one([{
            'resources:CUSTOM_QAT': '1',
            'trait:CUSTOM_QAT_SERVICE_DC': 'required'}])
        managed, address = self._pci_hostdev(root)
        self.assertEqual('yes', managed)
        self.assertEqual(QAT_DC, self.sim.host.functions[address].physfn)

        # An E810 VF on physnet1: its attach handle names the network.
        nic, arq, root = self._boot_one([{
            'resources:CUSTOM_PCI': '1', 'trait:CUSTOM_PHYSNET1': 'required'}])
        self.assertEqual('physnet1',
                         arq['attach_handle_info']['physical_network'])
        managed, address = self._pci_hostdev(root)
        self.assertEqual(E810, self.sim.host.functions[address].physfn)
        self.assertEqual(address, self.arq_bdf(arq))
