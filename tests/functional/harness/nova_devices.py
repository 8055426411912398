"""Nova's own devices on patched computes: configuration, steps, checks.

Nova gives guests devices itself, without Cyborg: PCI devices of a flavor's
``pci_passthrough:alias`` (``[pci] device_spec`` and ``alias``), the VFs
and PFs of SR-IOV ports, vGPUs (``[devices] enabled_mdev_types``, a
flavor's ``resources:VGPU``) and generic mediated devices (``[mdev_<type>]
mdev_class = CUSTOM_*``, a flavor's ``resources:CUSTOM_*``). They are
configured here as Nova's own functional tests configure them
(nova/tests/functional/libvirt/test_pci_sriov_servers.py ``SRIOVServersTest``,
test_vgpu.py ``VGPUTestBase`` and ``DifferentMdevClassesTests``), over the
same fakelibvirt devices (``HostPCIDevicesInfo``).

A patched compute must leave them as upstream Nova does: whatever the
server goes through, its guest holds the device Nova claimed for it, and
the guest-device guard (:mod:`nova_cyborg.virt.guard`) neither removes nor
adds anything (no ``nova_cyborg_*_devices`` instance action event).
"""

import os
from xml.etree import ElementTree

import fixtures
from nova import context as nova_context
import nova.conf
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt.libvirt import utils as libvirt_utils
from oslo_serialization import jsonutils
from oslo_utils import uuidutils

from nova_cyborg.virt import guard
from tests.functional import base

CONF = nova.conf.CONF

#: The physical network of LibvirtNeutronFixture's network_4 (its SR-IOV
#: ports).
PHYSNET = 'physnet4'
#: The flavor aliases of the plain PCI device (fakelibvirt's type-PCI one)
#: and of a live-migratable VF (upstream's test_live_migrate_VF_success).
ALIAS, VF_ALIAS = 'plain', 'lm-vf'
DEVICE_SPEC = [jsonutils.dumps(spec) for spec in (
    {'vendor_id': fakelibvirt.PCI_VEND_ID,
     'product_id': fakelibvirt.PCI_PROD_ID},
    {'vendor_id': fakelibvirt.PCI_VEND_ID,
     'product_id': fakelibvirt.PF_PROD_ID, 'physical_network': PHYSNET},
    {'vendor_id': fakelibvirt.PCI_VEND_ID,
     'product_id': fakelibvirt.VF_PROD_ID, 'physical_network': PHYSNET,
     'live_migratable': 'yes'},
)]
PCI_ALIAS = [jsonutils.dumps(alias) for alias in (
    {'vendor_id': fakelibvirt.PCI_VEND_ID,
     'product_id': fakelibvirt.PCI_PROD_ID,
     'device_type': 'type-PCI', 'name': ALIAS},
    {'vendor_id': fakelibvirt.PCI_VEND_ID,
     'product_id': fakelibvirt.VF_PROD_ID,
     'device_type': 'type-VF', 'live_migratable': 'yes',
     'name': VF_ALIAS},
)]

#: Nova's generic mdev resource class (upstream's DifferentMdevClassesTests).
GENERIC_CLASS = 'CUSTOM_NOTVGPU'
#: The GPUs of ``HostPCIDevicesInfo(num_mdevcap=2, generic_types=True)``,
#: each offering mlx5_core and nvidia-12: the first serves the generic
#: class, the second vGPUs.
GENERIC_PARENT = fakelibvirt.MDEVCAP_DEV1_PCI_ADDR
VGPU_PARENT = fakelibvirt.MDEVCAP_DEV2_PCI_ADDR
MDEV_TYPES = {GENERIC_CLASS: (fakelibvirt.MLX5_CORE_TYPE, GENERIC_PARENT),
              'VGPU': (fakelibvirt.NVIDIA_12_VGPU_TYPE, VGPU_PARENT)}


def pci_address(nodedev_name):
    """'pci_0000_81_00_0' -> '0000:81:00.0'."""
    return base.bdf_of(nodedev_name)


def configure_pci(test):
    """Nova's ``[pci]``: the plain device and live-migratable VFs by
    alias, PF and VFs on PHYSNET for ports."""
    test.flags(device_spec=DEVICE_SPEC, alias=PCI_ALIAS, group='pci')


def configure_mdevs(test):
    """Nova's ``[devices]`` and ``[mdev_*]`` for the two GPUs; mdevs
    appear in the host's fakelibvirt when Nova creates them."""
    test.flags(enabled_mdev_types=[fakelibvirt.MLX5_CORE_TYPE,
                                   fakelibvirt.NVIDIA_12_VGPU_TYPE],
               group='devices')
    # The dynamic groups exist once their types are enabled.
    nova.conf.devices.register_dynamic_opts(CONF)
    test.flags(device_addresses=[pci_address(GENERIC_PARENT)],
               mdev_class=GENERIC_CLASS, group='mdev_mlx5_core')
    test.flags(device_addresses=[pci_address(VGPU_PARENT)],
               group='mdev_nvidia-12')

    def create_mdev(driver, dev_name, mdev_type, uuid=None):
        # What libvirt's nodeDeviceCreateXML does (fakelibvirt's does
        # nothing): the mdev becomes a node device of the host. As
        # upstream's VGPUTestBase._create_mdev, on the driver's host.
        uuid = uuid or uuidutils.generate_uuid()
        name = libvirt_utils.mdev_uuid2name(uuid)
        driver._host.get_connection().mdev_info.devices[name] = (
            fakelibvirt.FakeMdevDevice(dev_name=name, type_id=mdev_type,
                                       parent=dev_name))
        return uuid

    test.useFixture(fixtures.MonkeyPatch(
        'nova.virt.libvirt.driver.LibvirtDriver._create_mdev', create_mdev))


def pci_host_info(pf_slot):
    """One plain PCI device (81:00.0), one PF (81:01.0) with two VFs, and a
    PF without VFs at 82:<pf_slot>.0 for direct-physical ports (as
    upstream's SRIOVServersTest.test_live_migrate_server_with_neutron)."""
    info = fakelibvirt.HostPCIDevicesInfo(num_pci=1, num_pfs=1, num_vfs=2)
    info.add_device(dev_type='PF', bus=0x82, slot=pf_slot, function=0,
                    iommu_group=42, numa_node=0, vf_ratio=0,
                    mac_address='b4:96:91:34:f4:%02x' % pf_slot)
    return info


def mdev_host_info():
    """Two GPUs, each offering mlx5_core and nvidia-12."""
    return fakelibvirt.HostPCIDevicesInfo(
        num_pci=0, num_pfs=0, num_vfs=0, num_mdevcap=2, generic_types=True)


def guest_devices(xml):
    """(PCI addresses, mdev UUIDs) a domain XML passes through: its PCI
    ``<hostdev>``s and ``<interface type='hostdev'>``s, its mdevs."""
    root = ElementTree.fromstring(xml)
    bdfs = [base.canonical_bdf(*(
        el.find('./source/address').get(k)
        for k in ('domain', 'bus', 'slot', 'function')))
        for el in root.findall('./devices/hostdev[@type="pci"]')]
    for el in root.findall('./devices/interface[@type="hostdev"]'):
        address = el.find('./source/address')
        if address is None:
            # fakelibvirt's XMLDesc names the VF by its node device
            # (<source hostdev='pci_0000_81_00_2'/>), not its address.
            name = el.find('./source').get('hostdev') or ''
            if not name.startswith('pci_'):
                raise AssertionError('an interface with no PCI address: %s'
                                     % xml)
            bdfs.append(base.bdf_of(name))
        else:
            bdfs.append(base.canonical_bdf(*(
                address.get(k)
                for k in ('domain', 'bus', 'slot', 'function'))))
    mdevs = sorted(el.find('./source/address').get('uuid')
                   for el in root.findall('./devices/hostdev[@type="mdev"]'))
    return sorted(bdfs), mdevs


class NovaDevicesChecks(object):
    """What an operator checks; mixed into an AcceleratorTestBase."""

    def nova_pci(self, server, hostname=None):
        """[(address, product id)] of the PCI devices Nova allocated to
        the server (on ``hostname``'s compute node), in Nova's database."""
        context = nova_context.get_admin_context()
        devices = objects.PciDeviceList.get_by_instance_uuid(
            context, server['id'])
        node = hostname and objects.ComputeNode.get_by_nodename(
            context, hostname).id
        return sorted((d.address, d.product_id) for d in devices
                      if d.status == 'allocated' and
                      node in (None, d.compute_node_id))

    def guard_events(self, server):
        """The guard's instance action events (and actions) of the server:
        every device it removed or added."""
        found = []
        for action in self.admin_api.get_instance_actions(server['id']):
            if action['action'] == guard.ACTION:
                found.append(action['action'])
            details = self.admin_api.get_instance_action_details(
                server['id'], action['request_id'])
            found.extend(e['event'] for e in details['events']
                         if e['event'] in (guard.EVENT_REMOVED,
                                           guard.EVENT_ADDED))
        return found

    def host_allocations(self, server, hostname):
        """The server's allocations, all on the host's provider tree:
        {provider name relative to the host: resources}."""
        names = {rp['uuid']: rp['name'] for rp in self._get_all_rps_in_a_tree(
            self._get_provider_uuid_by_host(hostname))}
        allocs = self.allocations(server['id'])
        self.assertTrue(set(allocs) <= set(names),
                        'allocations outside %s: %s' % (hostname, allocs))
        return {names[rp][len(hostname):].lstrip('_') or hostname:
                a['resources'] for rp, a in allocs.items()}

    def host_mdev(self, hostname, mdev_uuid):
        """(type, parent) of the host's mdev ``mdev_uuid``, as libvirt's
        node devices show it; None if there is none."""
        prefix = libvirt_utils.mdev_uuid2name(mdev_uuid)
        conn = self.computes[hostname].driver._host.get_connection()
        for name, device in conn.mdev_info.devices.items():
            if name.startswith(prefix):
                root = ElementTree.fromstring(device.XMLDesc(0))
                return (root.find('./capability/type').get('id'),
                        root.find('./parent').text)
        return None

    def assert_nova_pci(self, server, hostname, product_ids):
        """ACTIVE on ``hostname``; the guest holds exactly the devices Nova
        allocated to the server, one of each of ``product_ids``; no mdev;
        the allocation all on the compute node's provider (PCI devices
        are not in Placement); the guard never acted. Returns {product
        id: address}."""
        server = self.admin_api.get_server(server['id'])
        self.assertEqual([], self.guard_events(server))
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        devices = self.nova_pci(server, hostname)
        self.assertEqual(sorted(product_ids), sorted(p for _a, p in devices))
        self.assertEqual((sorted(a for a, _p in devices), []),
                         guest_devices(self.domain_xml(server)))
        self.assertEqual([hostname],
                         list(self.host_allocations(server, hostname)))
        return {p: a for a, p in devices}

    def assert_nova_mdev(self, server, hostname, resource_class):
        """ACTIVE on ``hostname``; the guest holds one mdev, of the type
        and parent GPU ``resource_class`` is served by, and that GPU's
        provider has the server's one unit; the guard never acted.
        Returns the mdev's UUID."""
        server = self.admin_api.get_server(server['id'])
        self.assertEqual([], self.guard_events(server))
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual(hostname, server['OS-EXT-SRV-ATTR:host'])
        bdfs, mdevs = guest_devices(self.domain_xml(server))
        self.assertEqual([], bdfs)
        self.assertEqual(1, len(mdevs), 'mdevs in the guest: %s' % mdevs)
        self.assertEqual(MDEV_TYPES[resource_class],
                         self.host_mdev(hostname, mdevs[0]))
        parent = MDEV_TYPES[resource_class][1]
        allocs = self.host_allocations(server, hostname)
        self.assertEqual({resource_class: 1}, allocs[parent])
        self.assertEqual({hostname, parent}, set(allocs))
        return mdevs[0]


class NovaDevicesSteps(NovaDevicesChecks):
    """The walk of a server with Nova's own devices through what a user
    and a cloud admin do; mixed into a live_base.LiveMigrationBase with
    two hosts, compute1 and compute2."""

    HOSTS = ('compute1', 'compute2')

    def instance_dir(self, server):
        # Rescue saves the domain XML there; the harness writes no disks.
        os.makedirs(os.path.join(CONF.instances_path, server['id']),
                    exist_ok=True)

    def rescue_unrescue(self, server):
        """The rescue guest holds the devices the guest held."""
        self.instance_dir(server)
        before = guest_devices(self.domain_xml(server))
        self._rescue_server(server)
        self.assertEqual(before, guest_devices(self.domain_xml(server)),
                         'rescue')
        self.assertEqual([], self.guard_events(server))
        self._unrescue_server(server)

    def walk(self, server, user_api, check, live_migrate=True, rescue=True):
        """Hard reboot, stop and start, rescue and unrescue (``user_api``),
        then a cold migration, confirmed, and a live migration back (the
        cloud admin). ``check(server, hostname)`` after each step returns
        what the guest holds, which a hard reboot, a start or an unrescue
        never changes (Nova keeps its claims); the rescue guest holds the
        same devices.

        :returns: what ``check`` returned on each host, last.
        """
        src = self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']
        dst = (set(self.HOSTS) - {src}).pop()
        held = {src: check(server, src)}
        with self.acting(user_api):
            self._reboot_server(server, hard=True)
            self.assertEqual(held[src], check(server, src), 'hard reboot')
            self._stop_server(server)
            self._start_server(server)
            self.assertEqual(held[src], check(server, src), 'start')
            if rescue:
                self.rescue_unrescue(server)
                self.assertEqual(held[src], check(server, src), 'unrescue')
        with self.acting(self.cloud_admin_api):
            self._migrate_server(server)
            self._confirm_resize(server)
        held[dst] = check(server, dst)
        if live_migrate:
            self.admin_live_migrates(server, host=src)
            held[src] = check(server, src)
        return held
