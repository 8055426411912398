"""What a user and an operator check on a server with accelerators.

After every operation a test checks, through the public APIs:

* the server's status;
* its accelerator requests (ARQs) in Cyborg: one per requested device,
  ``Bound`` to the server on the server's host;
* its Placement allocation: the device part is exactly what the ARQs are
  bound to (each group's resources on the group's provider), inside the
  tree of the server's compute node;
* if ``[nova_cyborg] domain_xml_dir`` is set, the ``<hostdev>`` elements
  of the libvirt domain: exactly the attach handles of the ARQs;

and, once the server is deleted, that nothing is left: no ARQ for it and
no allocation.
"""

import os
from xml.etree import ElementTree

from oslo_log import log as logging
from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import test_utils
from tempest.lib import exceptions as lib_exc
from testtools import content

CONF = config.CONF
LOG = logging.getLogger(__name__)

#: The ARQ attach handle type of each [nova_cyborg] hostdev_type.
ATTACH_HANDLE_TYPES = {'pci': 'PCI', 'mdev': 'MDEV'}

#: Server statuses in which the domain is defined with its devices. A
#: suspended guest has its PCI devices unplugged until it resumes; a
#: shelved or deleted one has no domain.
DOMAIN_STATUSES = frozenset(
    ['ACTIVE', 'SHUTOFF', 'PAUSED', 'RESCUE', 'VERIFY_RESIZE'])

DOMAIN_XML_UNSET = (
    'Domain XML not checked: [nova_cyborg] domain_xml_dir is not set, so '
    'the <hostdev> elements of the guest cannot be compared with the '
    'attach handles of its accelerator requests.')


def _pci_key(domain, bus, slot, function):
    """A comparable PCI address from hex strings, with or without 0x."""
    return tuple(int(part, 16) for part in (domain, bus, slot, function))


class AcceleratorChecksMixin(object):
    """Checks shared by every test; needs BaseNovaCyborgTest's clients."""

    # Reading

    def list_arqs(self, server_id):
        return self.accelerator_client.list_accelerator_requests(
            instance=server_id)['arqs']

    def server_allocations(self, server_id):
        """{provider uuid: {"resources": {...}, ...}} of the server."""
        return self.placement_client.list_allocations(
            server_id)['allocations']

    def domain_hostdevs(self, server_id):
        """The hostdevs of the server's domain XML, as attach handles.

        :returns: a set of PCI address tuples (``hostdev_type = pci``) or
            of mdev UUIDs (``mdev``); None when domain_xml_dir is unset.
        """
        xml_dir = CONF.nova_cyborg.domain_xml_dir
        if not xml_dir:
            LOG.info(DOMAIN_XML_UNSET)
            self.addDetail('domain-xml', content.text_content(
                DOMAIN_XML_UNSET))
            return None
        path = os.path.join(xml_dir, '%s.xml' % server_id)
        self.assertTrue(os.path.exists(path),
                        'The cloud wrote no domain XML for server %s: %s '
                        'is missing' % (server_id, path))
        root = ElementTree.parse(path).getroot()
        hostdev_type = CONF.nova_cyborg.hostdev_type
        found = set()
        for hostdev in root.findall(
                "./devices/hostdev[@type='%s']" % hostdev_type):
            address = hostdev.find('./source/address')
            if hostdev_type == 'pci':
                found.add(_pci_key(*(address.get(key) for key in (
                    'domain', 'bus', 'slot', 'function'))))
            else:
                found.add(address.get('uuid'))
        return found

    @staticmethod
    def arq_handle(arq):
        """The attach handle of an ARQ, comparable with domain_hostdevs."""
        if arq['attach_handle_type'] == 'MDEV':
            return arq['attach_handle_uuid']
        info = arq['attach_handle_info']
        return _pci_key(*(info[key] for key in (
            'domain', 'bus', 'device', 'function')))

    @staticmethod
    def uuids(arqs):
        return frozenset(arq['uuid'] for arq in arqs)

    # Checks

    def assert_domain_hostdevs(self, server_id, arqs):
        """The domain's hostdevs are exactly the ARQs' attach handles."""
        hostdevs = self.domain_hostdevs(server_id)
        if hostdevs is None:
            return
        self.assertEqual(
            {self.arq_handle(arq) for arq in arqs}, hostdevs,
            'The <hostdev> elements of server %s are not the attach '
            'handles of its ARQs %s' % (server_id, arqs))

    def assert_allocated(self, server_id, profile, arqs):
        """The device part of the allocation is what the ARQs say."""
        allocations = self.server_allocations(server_id)
        expected = {}
        for index in range(len(profile.groups)):
            providers = {arq['device_rp_uuid'] for arq in arqs
                         if arq['device_profile_group_id'] == index}
            self.assertEqual(
                1, len(providers), 'The ARQs of group %d of device profile '
                '%s are bound to one provider: %s' % (
                    index, profile.name, arqs))
            resources = expected.setdefault(providers.pop(), {})
            for rc, amount in profile.group_resources(index).items():
                resources[rc] = resources.get(rc, 0) + amount
        device_rcs = profile.resource_classes
        actual = {}
        for rp, allocation in allocations.items():
            devices = {rc: amount
                       for rc, amount in allocation['resources'].items()
                       if rc in device_rcs}
            if devices:
                actual[rp] = devices
        self.assertEqual(expected, actual,
                         'Device allocations of server %s: %s, ARQs: %s' % (
                             server_id, allocations, arqs))
        # The devices are in the tree of the server's compute node.
        roots = {rp: self.resource_providers_client.show_resource_provider(
            rp)['root_provider_uuid'] for rp in allocations}
        compute_roots = {roots[rp] for rp, allocation in allocations.items()
                         if 'MEMORY_MB' in allocation['resources']}
        self.assertEqual(1, len(compute_roots), allocations)
        for rp in expected:
            self.assertIn(roots[rp], compute_roots,
                          'Device provider %s is not in the tree of the '
                          'compute node of server %s' % (rp, server_id))

    def assert_accelerated(self, server_id, profile, status='ACTIVE',
                           check_domain=None):
        """The server has the devices of ``profile``; return its ARQs.

        :param check_domain: whether to compare the domain's hostdevs
            with the ARQs; by default when the status has a domain with
            its devices (DOMAIN_STATUSES).
        """
        server = self.show_server(server_id)
        self.assertEqual(status, server['status'])
        arqs = self.list_arqs(server_id)
        self.assertEqual(profile.device_count, len(arqs),
                         'ARQs of server %s: %s' % (server_id, arqs))
        hosts = {server.get('OS-EXT-SRV-ATTR:host'),
                 server.get('OS-EXT-SRV-ATTR:hypervisor_hostname')}
        handle_type = ATTACH_HANDLE_TYPES[CONF.nova_cyborg.hostdev_type]
        for arq in arqs:
            self.assertEqual('Bound', arq['state'], arq)
            self.assertEqual(server_id, arq['instance_uuid'], arq)
            self.assertEqual(profile.name, arq['device_profile_name'], arq)
            self.assertIn(arq['hostname'], hosts, arq)
            self.assertEqual(handle_type, arq['attach_handle_type'], arq)
        self.assert_allocated(server_id, profile, arqs)
        if check_domain is None:
            check_domain = status in DOMAIN_STATUSES
        if check_domain:
            self.assert_domain_hostdevs(server_id, arqs)
        return arqs

    def assert_not_accelerated(self, server_id, profile, status='ACTIVE',
                               check_domain=None):
        """No ARQ, no device of ``profile`` allocated, no hostdev.

        A shelved offloaded server has no allocation at all. Nova may
        release them just after the status changes: they are waited for.
        """
        def devices_allocated(allocations):
            return {rp: allocation for rp, allocation in allocations.items()
                    if profile.resource_classes & set(
                        allocation['resources'])}

        offloaded = status == 'SHELVED_OFFLOADED'
        self.wait_until(
            lambda: not self.list_arqs(server_id) and not (
                self.server_allocations(server_id) if offloaded else
                devices_allocated(self.server_allocations(server_id))),
            'server %s to hold no accelerator' % server_id)
        self.assertEqual(status, self.show_server(server_id)['status'])
        self.assertEqual([], self.list_arqs(server_id))
        allocations = self.server_allocations(server_id)
        self.assertEqual({}, devices_allocated(allocations),
                         'Server %s still has devices allocated' % server_id)
        if offloaded:
            self.assertEqual({}, allocations)
        if check_domain is None:
            check_domain = status in DOMAIN_STATUSES
        if check_domain:
            self.assert_domain_hostdevs(server_id, [])

    def assert_arqs_deleted(self, arq_uuids):
        """Each of these ARQs is gone from Cyborg (waited for)."""
        def deleted(uuid):
            try:
                self.accelerator_client.show_accelerator_request(uuid)
            except lib_exc.NotFound:
                return True
            return False

        self.wait_until(lambda: all(deleted(u) for u in arq_uuids),
                        'ARQs %s to be deleted' % ', '.join(arq_uuids))
        for uuid in arq_uuids:
            self.assertRaises(
                lib_exc.NotFound,
                self.accelerator_client.show_accelerator_request, uuid)

    def assert_released(self, server_id):
        """Nothing is left of a deleted server: no ARQ, no allocation."""
        self.wait_until(
            lambda: not (self.list_arqs(server_id) or
                         self.server_allocations(server_id)),
            'deleted server %s to release everything' % server_id)
        self.assertEqual([], self.list_arqs(server_id))
        self.assertEqual({}, self.server_allocations(server_id))

    def wait_until(self, predicate, what):
        """Wait, up to [nova_cyborg] build_timeout, for ``predicate()``.

        The caller asserts afterwards, with its own message.
        """
        client = self.accelerator_client
        if not test_utils.call_until_true(predicate, client.build_timeout,
                                          client.build_interval):
            LOG.warning('Timed out after %ss waiting for %s',
                        client.build_timeout, what)

    def delete_server_and_assert_released(self, server_id):
        self.servers_client.delete_server(server_id)
        waiters.wait_for_server_termination(self.servers_client, server_id)
        self.assert_released(server_id)
