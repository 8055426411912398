"""The main job: boot a server with an accelerator and show the result.

Runs the spine harness (patched Nova, real Placement, real Cyborg API and
conductor, Nova's libvirt driver over a simulated host) once, as a user
would: create a device profile and a flavor, boot, then print the server,
its ARQs, the provider each landed on and the ``<hostdev>`` lines of the
domain XML. ``tox -e demo`` runs it.
"""

import re
import sys
import time

from tests.functional import base


def _out(text=''):
    sys.stdout.write(text + '\n')
    sys.stdout.flush()


class Demo(base.AcceleratorTestBase):

    def test_demo(self):
        started = time.monotonic()
        self.start_accel_compute('compute1', num_vfs=4)
        groups = [{'resources:FPGA': '1',
                   'trait:CUSTOM_FPGA_INTEL': 'required'}]
        self.cyborg.create_device_profile('fpga-demo', groups)
        flavor = self._create_flavor(
            name='accel.demo',
            extra_spec={'accel:device_profile': 'fpga-demo'})
        server = self.boot(flavor)
        elapsed = time.monotonic() - started

        _out()
        _out('Device profile fpga-demo: %s' % groups)
        _out('Server %s: %s on %s' % (
            server['id'], server['status'], server['OS-EXT-SRV-ATTR:host']))
        providers = {uuid: name for name, uuid in
                     self.device_rp_uuids('compute1').items()}
        for arq in self.cyborg.list_arqs(server['id']):
            _out('ARQ %s: %s, provider %s (%s), %s %s' % (
                arq['uuid'], arq['state'], arq['device_rp_uuid'],
                providers.get(arq['device_rp_uuid'], '?'),
                arq['attach_handle_type'], self.arq_bdf(arq)))
        _out('Domain XML <hostdev> of %s:' % server['id'])
        for line in re.findall(r'<hostdev.*?</hostdev>', self.domain_xml(
                server), re.S):
            _out('  ' + ' '.join(line.split()))
        _out('Host start, profile, flavor and boot to ACTIVE: %.1f s' %
             elapsed)
        self.assertEqual('ACTIVE', server['status'])
