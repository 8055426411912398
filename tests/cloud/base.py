"""Accounts, resources and waits for tests against the running cloud.

A test acts as a cloud's users do: an owner (``member`` of a project of
its own, created for the test) boots and deletes servers; the cloud's
admin (project ``admin``) creates the device profile and the flavor,
reads Placement, Cyborg's accelerator requests and the server's host, and
stops and starts hosts with ``python -m localcloud host``. Every wait has
a deadline and polls; none sleeps a fixed time.
"""

import os
import re
import subprocess
import sys
import uuid as uuidlib
from xml.etree import ElementTree

import openstack
import testtools

from localcloud import configs
from localcloud import identity
from localcloud import layout as layout_mod
from localcloud import procs
from nova_cyborg.model import bookkeeping
from tests.cloud import churn
from tests import waiting

#: Seconds a wait for a state lasts at most.
DEADLINE = 300
POLL = 1.0
#: Networks 'none' at server create.
COMPUTE_MICROVERSION = '2.37'
#: root_provider_uuid and in_tree of resource providers.
PLACEMENT_MICROVERSION = '1.14'
#: The local cloud's FPGAs (as its demo's profile).
PROFILE_GROUPS = [{'resources:FPGA': '1',
                   'trait:CUSTOM_FPGA_INTEL': 'required'}]
#: One vGPU of the local cloud's GPUs (``up --gpus``, one a host by
#: default; the sidecar's gpu driver, mdev type nvidia-11), not of its
#: vGPU 17 cards (their providers have VGPU too).
VGPU_GROUPS = [{'resources:VGPU': '1',
                'trait:%s' % configs.VGPU_MDEV_TRAIT: 'required'}]
#: One vGPU 17 VF of the local cloud's H100s (``up --vgpu17``, one a host
#: by default), typed H100-20C at bind.
VGPU17_GROUPS = [{'resources:VGPU': '1',
                  'trait:%s' % configs.VGPU17_TRAIT: 'required'}]


def wait_until(predicate, what, timeout=DEADLINE, poll=POLL):
    """Poll ``predicate`` until it returns something true; return that.

    :raises: AssertionError naming ``what`` after ``timeout`` seconds.
    """
    return waiting.wait_until(predicate, what, timeout, poll)


def _name(kind):
    return 'cloud-test-%s-%s' % (kind, uuidlib.uuid4().hex[:8])


class CloudTestCase(testtools.TestCase):
    """The running cloud's layout, an owner and the admin."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.layout = layout_mod.Layout.load(layout_mod.DEFAULT_DIR)

    def setUp(self):
        super().setUp()
        if self.layout is None or not procs.running(self.layout):
            self.skipTest('no local cloud runs under %s ("python -m '
                          'localcloud up --keep" first)' %
                          layout_mod.DEFAULT_DIR)
        self.admin = identity.admin_connection(self.layout)
        self.owner = self._owner()

    # -- accounts and resources ------------------------------------------

    def _profile(self):
        """A device profile for one of the cloud's FPGAs."""
        return self._profile_of(PROFILE_GROUPS)

    def _profile_of(self, groups):
        """A device profile of ``groups`` (deleted at cleanup); its
        name."""
        accel = self.admin.accelerator
        name = _name('profile')
        response = accel.post('/device_profiles', json=[
            {'name': name, 'groups': groups}])
        self.assertEqual(201, response.status_code, response.text)
        self.addCleanup(accel.delete, '/device_profiles/%s' %
                        response.json()['uuid'])
        return name

    def _owner(self):
        """A member of a new project, as a cloud's users are."""
        keystone = self.admin.identity
        project = keystone.create_project(name=_name('project'),
                                          domain_id='default')
        self.addCleanup(keystone.delete_project, project)
        user = keystone.create_user(
            name=_name('owner'), domain_id='default',
            password=layout_mod.PASSWORD, default_project_id=project.id)
        self.addCleanup(keystone.delete_user, user)
        member = keystone.find_role('member', ignore_missing=False)
        keystone.assign_project_role_to_user(project, user, member)
        return openstack.connect(
            auth_url=self.layout.auth_url, username=user.name,
            password=layout_mod.PASSWORD, project_name=project.name,
            user_domain_name='Default', project_domain_name='Default',
            region_name=layout_mod.REGION, identity_interface='public')

    def create_accelerator_flavor(self):
        """A device profile for one FPGA and a public flavor using it."""
        return self.create_flavor(self._profile())

    def create_flavor(self, profile=None, ram=512):
        """A public flavor (deleted at cleanup), with
        ``accel:device_profile=profile`` if given; returns its id."""
        flavor = self.admin.compute.create_flavor(
            name=_name('flavor'), ram=ram, vcpus=1, disk=1)
        self.addCleanup(self.admin.compute.delete_flavor, flavor)
        if profile:
            self.admin.compute.create_flavor_extra_specs(
                flavor, {'accel:device_profile': profile})
        return flavor.id

    def image_id(self):
        return self.admin.image.find_image(
            'nova-cyborg-image', ignore_missing=False).id

    # -- servers -----------------------------------------------------------

    def _compute(self, conn, method, path, **kwargs):
        response = getattr(conn.compute, method)(
            path, microversion=COMPUTE_MICROVERSION, **kwargs)
        return response

    def boot(self, flavor_id, conn=None):
        """The owner (or ``conn``, another user) boots a server and waits
        for ACTIVE; returns its admin view (with its host)."""
        conn = conn or self.owner
        response = self._compute(conn, 'post', '/servers', json={
            'server': {'name': _name('server'), 'imageRef': self.image_id(),
                       'flavorRef': flavor_id, 'networks': 'none'}})
        self.assertEqual(202, response.status_code, response.text)
        server_id = response.json()['server']['id']
        self.addCleanup(self._delete_quietly, server_id, conn)
        return self.wait_for_status(server_id, 'ACTIVE')

    def server(self, server_id, conn=None):
        """The server (the admin's view by default); None once gone."""
        response = self._compute(conn or self.admin, 'get',
                                 '/servers/%s' % server_id)
        if response.status_code == 404:
            return None
        self.assertEqual(200, response.status_code, response.text)
        return response.json()['server']

    def diagnostics(self, server_id):
        """What the host's hypervisor says of the server's guest (Nova
        asks its domain: 404 or 409 if the host has no such guest)."""
        response = self.admin.compute.get(
            '/servers/%s/diagnostics' % server_id, microversion='2.48')
        self.assertEqual(200, response.status_code, response.text)
        return response.json()

    def wait_for_status(self, server_id, status):
        def reached():
            server = self.server(server_id)
            if server and server['status'] == 'ERROR' != status:
                self.fail('server %s went to ERROR: %s' % (
                    server_id, server.get('fault')))
            return server if server and server['status'] == status else None
        return wait_until(reached, 'server %s %s' % (server_id, status))

    def delete(self, server_id):
        """The owner deletes the server; wait until it is gone."""
        response = self._compute(self.owner, 'delete',
                                 '/servers/%s' % server_id)
        self.assertEqual(204, response.status_code, response.text)
        wait_until(lambda: self.server(server_id) is None,
                   'server %s deleted' % server_id)

    def _delete_quietly(self, server_id, conn=None):
        """At cleanup: the server is gone before its flavor and owner."""
        if self.server(server_id) is not None:
            self._compute(conn or self.owner, 'delete',
                          '/servers/%s' % server_id)
            wait_until(lambda: self.server(server_id) is None,
                       'server %s deleted' % server_id)

    # -- Cyborg and Placement ----------------------------------------------

    def arqs(self, server_id):
        response = self.admin.accelerator.get(
            '/accelerator_requests', params={'instance': server_id})
        self.assertEqual(200, response.status_code, response.text)
        return response.json()['arqs']

    def all_arqs(self, server_id):
        """The server's ARQs under either UUID they may be bound under
        (its own, its alias: a live migration binds them under the
        alias)."""
        return [arq for owner in bookkeeping.owners(server_id)
                for arq in self.arqs(owner)]

    def assert_nothing_left(self, server_ids, mdevs_before, timeout=60):
        """Once the servers are deleted: no domain, ARQ or allocation of
        any, and the hosts' mdevs as ``mdevs_before``
        (``churn.mdevs(self.sysfs_roots())`` before they were booted)."""
        def left():
            domains = churn.read_domains(self.layout.domain_xml_dir)
            problems = []
            for server_id in server_ids:
                problems += churn.gone_problems(
                    server_id, domains, self.all_arqs(server_id),
                    self.allocations(server_id))
            mdevs = churn.mdevs(self.sysfs_roots())
            if mdevs != mdevs_before:
                problems.append('mdevs %s, before %s' % (mdevs,
                                                         mdevs_before))
            return problems
        try:
            wait_until(lambda: not left(), 'nothing left of %s'
                       % ', '.join(server_ids), timeout=timeout)
        except AssertionError:
            self.assertEqual([], left())

    def _placement(self, path):
        response = self.admin.placement.get(
            path, microversion=PLACEMENT_MICROVERSION)
        self.assertEqual(200, response.status_code, response.text)
        return response.json()

    def allocations(self, server_id):
        return self._placement('/allocations/%s' % server_id)['allocations']

    def device_providers(self, host):
        """``{uuid: (name, parent, inventories, traits)}`` of the
        providers under the host's compute node."""
        roots = self._placement('/resource_providers?name=%s' % host)[
            'resource_providers']
        self.assertEqual(1, len(roots), roots)
        root = roots[0]['uuid']
        result = {}
        for rp in self._placement('/resource_providers?in_tree=%s' % root)[
                'resource_providers']:
            if rp['uuid'] == root:
                continue
            inventories = self._placement(
                '/resource_providers/%s/inventories' % rp['uuid'])
            traits = self._placement(
                '/resource_providers/%s/traits' % rp['uuid'])['traits']
            result[rp['uuid']] = (rp['name'], rp['parent_provider_uuid'],
                                  inventories['inventories'],
                                  sorted(traits))
        return result

    # -- the host ------------------------------------------------------------

    def sysfs_roots(self):
        """``{host: the root of its simulated sysfs tree}``."""
        return {host: self.layout.path('hosts', host, 'sys')
                for host in self.layout.hosts}

    def domain_file(self, server_id):
        return os.path.join(self.layout.domain_xml_dir, server_id + '.xml')

    def hostdevs(self, server_id):
        """``{(domain, bus, slot, function)}`` (ints) of the domain XML."""
        root = ElementTree.parse(self.domain_file(server_id)).getroot()
        return {tuple(int(address.get(key), 16) for key in (
            'domain', 'bus', 'slot', 'function'))
            for address in root.findall(
                "./devices/hostdev[@type='pci']/source/address")}

    @staticmethod
    def handle(arq):
        info = arq['attach_handle_info']
        return tuple(int(info[key], 16) for key in (
            'domain', 'bus', 'device', 'function'))

    def localcloud(self, *args):
        """``python -m localcloud --dir <cloud> ARGS``; fails the test
        with the command's output if it fails."""
        proc = subprocess.run(
            [sys.executable, '-m', 'localcloud', '--dir', self.layout.root]
            + list(args), capture_output=True, text=True,
            timeout=DEADLINE * 2)
        self.assertEqual(0, proc.returncode, 'localcloud %s failed:\n%s%s' % (
            ' '.join(args), proc.stdout, proc.stderr))
        return proc.stdout

    def stop_host(self, host):
        """``host stop``; the host is started again at cleanup if a test
        leaves it stopped."""
        self.addCleanup(self._start_if_stopped, host)
        out = self.localcloud('host', 'stop', host)
        self.assertNotIn(host, procs.running(self.layout))
        return out

    def start_host(self, host):
        out = self.localcloud('host', 'start', host)
        self.assertTrue(re.search(r'%s: started' % host, out), out)
        return out

    def _start_if_stopped(self, host):
        if host not in procs.running(self.layout):
            self.localcloud('host', 'start', host)
