"""Servers whose device profiles name bitstreams get FPGAs loaded with them.

An admin uploads two bitstreams to Glance (functions A and B) and makes a
device profile for each (``accel:bitstream_id``); the user boots one
server of each. cyborg-conductor reads each bitstream's metadata from
Glance and asks the host's agent (the sidecar) to program the FPGA; the
sidecar loads it and puts the function's trait on the FPGA's provider.
Each server must end ACTIVE on an FPGA that holds its own function, as
Placement (``CUSTOM_FPGA_FUNCTION_ID_<DRIVER>_<FUNCTION>``) and the card
(the ``afu_id`` of its FPGA port) say, so the two servers are on two
different FPGAs.

While a guest holds the port's PCI function the host does not see the
port: libvirt bound the function to ``vfio-pci`` and dfl-pci's remove
unregistered its region and port (drivers/fpga/dfl-pci.c
``cci_pci_remove``), as on a real host; the test checks that, and reads
the port's ``afu_id`` once the server is deleted and dfl-pci has probed
the function again (the FPGA keeps what it loaded).

Needs ``[nova_cyborg] fpga_sysfs_dir`` (a cloud of simulated hosts whose
stand-in cards load test bitstreams) and two FPGAs that no other server
holds: the sidecar never reprograms a card while another server holds an
allocation on it, so this test runs alone (``tox -e tempest`` runs it
after the others, with concurrency 1).
"""

import glob
import io
import os
import uuid

from oslo_log import log as logging
from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import decorators
from testtools import content

from tempest_plugin.tests import base

CONF = config.CONF
LOG = logging.getLogger(__name__)

FUNCTION_ID_PROPERTY = 'accel:function_id'
TRAIT_PREFIX = 'CUSTOM_FPGA_FUNCTION_ID_'


class FpgaProgrammingTest(base.AcceleratorTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.nova_cyborg.fpga_sysfs_dir:
            raise cls.skipException(
                '[nova_cyborg] fpga_sysfs_dir is not set: the cloud\'s '
                'FPGAs do not load test bitstreams')
        if not CONF.service_available.glance:
            raise cls.skipException('Glance is not available')
        if CONF.compute.min_compute_nodes < 2:
            raise cls.skipException('Two functions at once need two hosts '
                                    '([compute] min_compute_nodes >= 2)')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.admin_images_client = cls.os_admin.image_client_v2

    def create_bitstream(self, function_id):
        """A public image the stand-in card loads: its data is the id of
        the function, which it also declares in ``accel:function_id``."""
        images = self.admin_images_client
        image = images.create_image(
            name=data_utils.rand_name(prefix='tempest',
                                      name='nova-cyborg-bitstream'),
            container_format='bare', disk_format='raw',
            visibility='public', **{FUNCTION_ID_PROPERTY: function_id})
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        images.delete_image, image['id'])
        images.store_image_file(image['id'], io.BytesIO(
            ('%s\n' % function_id).encode()))
        waiters.wait_for_image_status(images, image['id'], 'active')
        return image['id']

    def _function_dir(self, hostname, address):
        return os.path.join(CONF.nova_cyborg.fpga_sysfs_dir, hostname,
                            'sys', 'bus', 'pci', 'devices', address)

    def function_driver(self, hostname, address):
        """The driver the PCI function ``address`` of ``hostname`` is
        bound to (its ``driver`` link, Documentation/ABI/testing/
        sysfs-bus-pci), or None."""
        link = os.path.join(self._function_dir(hostname, address), 'driver')
        return (os.path.basename(os.readlink(link))
                if os.path.islink(link) else None)

    def port_afu_ids(self, hostname, address):
        """The ``afu_id`` of each DFL port the host sees under the PCI
        function ``address`` (the PF of a one-port card, or the VF a
        released port is served by;
        Documentation/ABI/testing/sysfs-platform-dfl-port)."""
        found = []
        for path in sorted(glob.glob(os.path.join(
                self._function_dir(hostname, address), 'fpga_region',
                'region*', 'dfl-port.*', 'afu_id'))):
            with open(path) as f:
                found.append(f.read().strip().lower())
        return found

    def wait_for_port_afu_id(self, hostname, address):
        """The ``afu_id`` of the one port under ``address`` once dfl-pci
        has it again."""
        seen = []

        def registered():
            seen[:] = self.port_afu_ids(hostname, address)
            return len(seen) == 1

        self.assertTrue(
            test_utils.call_until_true(registered, CONF.compute.build_timeout,
                                       1),
            'The FPGA function %s on %s has one port again once its server '
            'is gone: %s' % (address, hostname, seen))
        return seen[0]

    def function_traits(self, rp_uuid):
        traits = self.resource_providers_client.list_resource_provider_traits(
            rp_uuid)['traits']
        return sorted(t for t in traits if t.startswith(TRAIT_PREFIX))

    @decorators.idempotent_id('37c8c753-bce6-4240-8eda-899b3019531b')
    def test_two_servers_two_bitstreams(self):
        functions = [uuid.uuid4().hex for _ in range(2)]
        servers = []
        for function_id in functions:
            profile = self.create_device_profile(
                groups=[{'resources:FPGA': '1',
                         'accel:bitstream_id': self.create_bitstream(
                             function_id)}],
                cleanup=self.addCleanup)
            flavor = self.create_flavor(profile, cleanup=self.addCleanup)
            servers.append((self.create_server(flavor), profile,
                            function_id))

        ports = {}
        for server_id, profile, function_id in servers:
            arqs = self.assert_accelerated(server_id, profile)
            self.assertEqual(1, len(arqs), arqs)
            arq = arqs[0]
            traits = self.function_traits(arq['device_rp_uuid'])
            info = arq['attach_handle_info']
            handle = '%(domain)s:%(bus)s:%(device)s.%(function)s' % info
            driver = self.function_driver(arq['hostname'], handle)
            shown = ('server %s (function %s): %s FPGA %s (driver %s), '
                     'provider %s; Placement traits %s' % (
                         server_id, function_id, arq['hostname'], handle,
                         driver, arq['device_rp_uuid'], traits))
            LOG.info(shown)
            self.addDetail('fpga-%s' % server_id,
                           content.text_content(shown))
            self.assertEqual(1, len(traits), shown)
            self.assertTrue(traits[0].endswith('_' + function_id.upper()),
                            shown)
            # The guest holds the function: the host's dfl-pci let go of
            # it, and no port of it is in the host's view.
            self.assertEqual('vfio-pci', driver, shown)
            self.assertEqual([], self.port_afu_ids(arq['hostname'], handle),
                             shown)
            ports[(arq['hostname'], handle)] = function_id
        self.assertEqual(2, len(ports), 'Two functions on one FPGA port: '
                         '%s' % ports)

        for server_id, _, _ in servers:
            self.delete_server_and_assert_released(server_id)
        # Given back, each function's port is the host's again, loaded
        # with the function its server's profile named.
        for (hostname, handle), function_id in sorted(ports.items()):
            self.assertEqual(function_id,
                             self.wait_for_port_afu_id(hostname, handle),
                             'The FPGA %s on %s' % (handle, hostname))
