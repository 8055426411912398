"""Servers whose device profiles name bitstreams get FPGAs loaded with them.

An admin uploads two bitstreams to Glance (functions A and B) and makes a
device profile for each (``accel:bitstream_id``); the user boots one
server of each. cyborg-conductor reads each bitstream's metadata from
Glance and asks the host's agent (the sidecar) to program the FPGA; the
sidecar loads it and puts the function's trait on the FPGA's provider.
Each server must end ACTIVE on an FPGA that holds its own function, as
Placement (``CUSTOM_FPGA_FUNCTION_ID_<DRIVER>_<FUNCTION>``) and the card
(the ``afu_id`` of its FPGA region) say, so the two servers are on two
different FPGAs.

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

    def card_function(self, arq):
        """(attach handle address, afu_id) of the FPGA port behind the
        ARQ's attach handle, read from its host's sysfs tree: the DFL
        port under the handle's PCI function (the PF of a one-port card,
        or the VF a released port is served by;
        Documentation/ABI/testing/sysfs-platform-dfl-port)."""
        root = os.path.join(CONF.nova_cyborg.fpga_sysfs_dir,
                            arq['hostname'], 'sys')
        info = arq['attach_handle_info']
        address = '%(domain)s:%(bus)s:%(device)s.%(function)s' % info
        found = glob.glob(os.path.join(root, 'bus', 'pci', 'devices',
                                       address, 'fpga_region', 'region*',
                                       'dfl-port.*', 'afu_id'))
        self.assertEqual(1, len(found), 'The FPGA %s of ARQ %s on %s has '
                         'one port: %s' % (address, arq['uuid'],
                                           arq['hostname'], found))
        with open(found[0]) as f:
            return address, f.read().strip()

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
            handle, afu_id = self.card_function(arq)
            shown = ('server %s (function %s): %s FPGA %s, provider %s; '
                     'Placement traits %s; the port reports afu_id %s' % (
                         server_id, function_id, arq['hostname'], handle,
                         arq['device_rp_uuid'], traits, afu_id))
            LOG.info(shown)
            self.addDetail('fpga-%s' % server_id,
                           content.text_content(shown))
            self.assertEqual(1, len(traits), shown)
            self.assertTrue(traits[0].endswith('_' + function_id.upper()),
                            shown)
            self.assertEqual(function_id, afu_id.lower(), shown)
            ports[(arq['hostname'], handle)] = function_id
        self.assertEqual(2, len(ports), 'Two functions on one FPGA port: '
                         '%s' % ports)

        for server_id, _, _ in servers:
            self.delete_server_and_assert_released(server_id)
