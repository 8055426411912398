"""A user attaches, lists and detaches accelerators with the SDK and CLI.

The owner of a server without accelerators uses what a cloud's users
use: openstacksdk with ``nova_cyborg_client.sdk``, and the ``openstack``
client with this project's plugin (``openstack server accelerator
add|list|remove``). The admin only makes the device profile, offers it
to the owner's project with a private flavor, makes the plain flavor,
and reads Placement and the host's domain to check the outcome.
"""

import json
import os
import subprocess

from openstack import exceptions as sdk_exc

from localcloud import layout as layout_mod
from nova_cyborg_client import sdk
from tests.cloud import base

#: What the SDK and the CLI show of an ARQ.
FIELDS = ('uuid', 'state', 'device_profile_name', 'device_profile_group_id',
          'hostname', 'device_rp_uuid', 'instance_uuid',
          'attach_handle_type', 'attach_handle_info')


class ClientAttachTest(base.CloudTestCase):

    def _offered_profile(self):
        """A device profile the admin offers the owner's project with a
        private flavor (addAccelerator adds only a profile a flavor the
        project can use names; nova_cyborg.flows.attach.api.check_offered)."""
        profile = self._profile()
        flavor = self.admin.compute.create_flavor(
            name=base._name('flavor'), ram=512, vcpus=1, disk=1,
            is_public=False)
        self.addCleanup(self.admin.compute.delete_flavor, flavor)
        self.admin.compute.create_flavor_extra_specs(
            flavor, {'accel:device_profile': profile})
        self.admin.compute.flavor_add_tenant_access(
            flavor, self.owner.current_project_id)
        return profile

    def _plain_flavor(self):
        flavor = self.admin.compute.create_flavor(
            name=base._name('flavor'), ram=512, vcpus=1, disk=1)
        self.addCleanup(self.admin.compute.delete_flavor, flavor)
        return flavor.id

    def _fpga_allocations(self, server_id):
        return {rp: a['resources'] for rp, a in
                self.allocations(server_id).items()
                if 'FPGA' in a['resources']}

    def _check_attached(self, server, profile, arqs):
        """One Bound ARQ of the profile on the server's host, its device
        in the domain and in the server's allocation."""
        host = server['OS-EXT-SRV-ATTR:host']
        self.assertEqual(1, len(arqs), arqs)
        arq = arqs[0]
        self.assertEqual(('Bound', profile, host, server['id']), (
            arq['state'], arq['device_profile_name'], arq['hostname'],
            arq['instance_uuid']))
        self.assertIn(arq['device_rp_uuid'], self.device_providers(host))
        self.assertEqual({self.handle(arq)}, self.hostdevs(server['id']))
        self.assertEqual({arq['device_rp_uuid']: {'FPGA': 1}},
                         self._fpga_allocations(server['id']))
        # What the owner listed is what the admin reads from Cyborg.
        self.assertEqual(arqs, [{key: a[key] for key in FIELDS}
                                for a in self.arqs(server['id'])])

    def _check_detached(self, server_id):
        self.assertEqual([], self.arqs(server_id))
        self.assertEqual(set(), self.hostdevs(server_id))
        self.assertEqual({}, self._fpga_allocations(server_id))

    # -- openstacksdk ------------------------------------------------------

    def test_sdk_attach_list_detach(self):
        profile = self._offered_profile()
        server = self.boot(self._plain_flavor())
        server_id, name = server['id'], server['name']
        self.assertEqual([], sdk.list_accelerators(self.owner, name))

        bound = sdk.add_accelerator(self.owner, name, profile, wait=True,
                                    timeout=base.DEADLINE)
        self.assertEqual('ACTIVE', self.wait_for_status(server_id,
                                                        'ACTIVE')['status'])
        listed = sdk.list_accelerators(self.owner, server_id)
        listed_fields = [{key: getattr(a, key) for key in FIELDS}
                         for a in listed]
        self.assertEqual(listed_fields, [{key: getattr(a, key)
                                          for key in FIELDS} for a in bound])
        self._check_attached(self.server(server_id), profile, listed_fields)

        # Nova's refusal comes back as openstacksdk's exception, with
        # Nova's reason.
        error = self.assertRaises(sdk_exc.ConflictException,
                                  sdk.add_accelerator, self.owner,
                                  server_id, profile)
        self.assertIn('attached already', error.details)

        # Detached by the UUID of its ARQ: Nova detaches its profile.
        self.assertEqual([], sdk.remove_accelerator(
            self.owner, server_id, listed[0].uuid, wait=True,
            timeout=base.DEADLINE))
        self.assertEqual([], sdk.list_accelerators(self.owner, server_id))
        self._check_detached(server_id)

    # -- the openstack client ----------------------------------------------

    def _openstack(self, *args):
        """``openstack ARGS`` as the owner; (exit code, stdout, stderr)."""
        auth = self.owner.config.config['auth']
        env = dict(os.environ, OS_AUTH_URL=self.layout.auth_url,
                   OS_IDENTITY_API_VERSION='3',
                   OS_USERNAME=auth['username'],
                   OS_PASSWORD=auth['password'],
                   OS_PROJECT_NAME=auth['project_name'],
                   OS_USER_DOMAIN_NAME='Default',
                   OS_PROJECT_DOMAIN_NAME='Default',
                   OS_REGION_NAME=layout_mod.REGION, OS_INTERFACE='public')
        env.pop('OS_CLOUD', None)
        proc = subprocess.run([self.layout.bin('openstack')] + list(args),
                              env=env, capture_output=True, text=True,
                              timeout=base.DEADLINE * 2)
        return proc.returncode, proc.stdout, proc.stderr

    def _ok(self, *args):
        code, out, err = self._openstack(*args)
        self.assertEqual(0, code, 'openstack %s failed:\n%s%s' % (
            ' '.join(args), out, err))
        return out

    def test_cli_attach_list_detach(self):
        profile = self._offered_profile()
        server = self.boot(self._plain_flavor())
        server_id, name = server['id'], server['name']
        self.assertEqual([], json.loads(self._ok(
            'server', 'accelerator', 'list', name, '-f', 'json')))

        self._ok('server', 'accelerator', 'add', name, profile, '--wait')
        listed = json.loads(self._ok('server', 'accelerator', 'list', name,
                                     '-f', 'json'))
        self.assertEqual(1, len(listed), listed)
        self._check_attached(self.server(server_id), profile, [{
            'uuid': row['UUID'], 'state': row['State'],
            'device_profile_name': row['Device Profile'],
            'device_profile_group_id': row['Group'],
            'hostname': row['Host'], 'instance_uuid': server_id,
            'device_rp_uuid': row['Device Provider'],
            'attach_handle_type': row['Attach Handle Type'],
            'attach_handle_info': row['Attach Handle']} for row in listed])
        # The table shows the device's PCI address.
        info = listed[0]['Attach Handle']
        self.assertIn('%s:%s:%s.%s' % (info['domain'], info['bus'],
                                       info['device'], info['function']),
                      self._ok('server', 'accelerator', 'list', name))

        # A refusal: exit code 1, Nova's reason and the HTTP code.
        code, out, err = self._openstack('server', 'accelerator', 'add',
                                         name, profile)
        self.assertEqual(1, code, out + err)
        self.assertIn('attached already', err)
        self.assertIn('(HTTP 409)', err)

        self._ok('server', 'accelerator', 'remove', name, profile, '--wait')
        self.assertEqual([], json.loads(self._ok(
            'server', 'accelerator', 'list', server_id, '-f', 'json')))
        self._check_detached(server_id)

        code, out, err = self._openstack('server', 'accelerator', 'list',
                                         'no-such-server')
        self.assertEqual(1, code, out + err)
        self.assertIn('no-such-server', err)
