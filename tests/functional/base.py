"""The spine harness: real Nova, real Placement, real Cyborg.

* Nova 34 runs in this process on its own functional base: API (through
  wsgi-intercept for the test client), conductor, scheduler and one
  nova-compute per simulated host, the libvirt driver over Nova's
  fakelibvirt with PCI devices. Nova runs in native threading mode and RPC
  casts stay casts, so binding is as asynchronous as in a deployment.
* Placement is Nova's real Placement fixture; its WSGI app is also served
  on a loopback socket so that Cyborg's conductor can write providers.
* Nova's API app is also served on a loopback socket, behind the identity
  stand-in, so that Cyborg sends ``accelerator-request-bound`` through
  Nova's real ``os-server-external-events`` API.
* Cyborg's API and conductor (openstack-cyborg) run in a child process
  (tests.functional.harness.cyborg_fixture); Nova reaches them over HTTP
  with the user's token and a service token, as in a deployment.

Devices: each simulated host runs a nova-cyborg sidecar
(tests.functional.harness.sidecar_fixture) that discovers FPGAs in a sysfs
tree generated for the same PCI addresses as the host's fakelibvirt PFs and
VFs, and reports them to the real cyborg-conductor over RabbitMQ (one vhost
per test); the conductor writes Placement. So a BDF in a domain XML can be
checked against the host's real (simulated) inventory. Cyborg finds
bitstreams in a real Glance (tests.functional.harness.glance_fixture),
started by the tests that program FPGAs.
"""

# Nova chooses eventlet or native threads before anything else is imported.
from nova import monkey_patch; monkey_patch.patch()  # noqa: E702

import faulthandler  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from xml.etree import ElementTree

import fixtures
from keystoneauth1 import loading as ks_loading

from nova import context as nova_context
from nova.tests.functional.api import client as nova_client
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional.libvirt import base as libvirt_base
from placement import deploy as placement_deploy
from testtools import content as testtools_content

from nova_cyborg.model import bind_outcome
from nova_cyborg.model import capability
from sidecar import privileged
from sidecar_simulator import host as simulator
from sidecar_simulator import xrt
from tests.functional.harness import broker
from tests.functional.harness import cyborg_fixture
from tests.functional.harness import glance_fixture
from tests.functional.harness import identity
from tests.functional.harness import loopback
from tests.functional.harness import nova_release
from tests.functional.harness import sidecar_fixture
from tests.functional.harness import waits

IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'


def nova_is_patched():
    """True if Nova's accelerator calls are routed to nova_cyborg."""
    from nova.accelerator import cyborg
    return hasattr(cyborg, 'cyborg_hooks')


def bdf_of(nodedev_name):
    """'pci_0000_81_00_1' -> '0000:81:00.1'."""
    _pci, dom, bus, slot, fn = nodedev_name.split('_')
    return '%s:%s:%s.%s' % (dom, bus, slot, fn)


def canonical_bdf(domain, bus, slot, function):
    """Hex strings (with or without 0x) -> '0000:81:00.1'."""
    return '%04x:%02x:%02x.%x' % tuple(
        int(part, 16) for part in (domain, bus, slot, function))


def cpid(bdf):
    dom, bus, rest = bdf.split(':')
    slot, fn = rest.split('.')
    return {'domain': dom, 'bus': bus, 'device': slot, 'function': fn}


#: Seconds after which a test still running (body and cleanups) is taken
#: for hung; far above OS_TEST_TIMEOUT (tox.ini) plus any cleanup.
HANG_TIMEOUT = 900


_MANAGED_SAVE_REMOVE = fakelibvirt.Domain.managedSaveRemove


def _managed_save_remove(domain, flags=0):
    return _MANAGED_SAVE_REMOVE(domain, flags)


def _context_manager_without_cell_lock(cell_databases, context):
    """Nova's ``CellDatabases._wrap_get_context_manager`` without the read
    lock it takes to read one attribute.

    Nova 34's fixtures deadlock under native threads: a writer transaction
    (``DatabaseWriteLock``, one lock for every in-memory database) that
    reads with an untargeted context (``Service.save`` from the service
    heartbeat) waits for the cells' read lock, which a thread waiting to
    switch cells (``scatter_gather_cells``: the write lock, preferred to
    new readers) holds back, while that thread waits for a third, inside
    ``target_cell`` (holding a read lock), that waits for the writer's
    lock. The read lock guarded nothing (it was released before the
    context manager was used), so reading without it changes nothing else.
    """
    try:
        if context.db_connection:
            return context.db_connection
    except AttributeError:
        # Unit tests with None, FakeContext, etc (as Nova's)
        pass
    return cell_databases._last_ctxt_mgr


class AcceleratorTestBase(waits.DeadlineWaits, libvirt_base.ServersTestBase):
    """Base for functional tests against real Nova, Placement and Cyborg.

    Nova's wait helpers get deadlines (:mod:`tests.functional.harness.waits`)
    instead of a count of polls: a boot that programs an FPGA takes longer
    than Nova's 5 s when both cores are busy.
    """

    ADMIN_API = True
    microversion = 'latest'
    CAST_AS_CALL = False
    #: FPGA PFs and VFs (attach handles) per simulated host.
    NUM_PFS = 1
    NUM_VFS = 2
    #: Vendor id of every simulated FPGA (8086 gives CUSTOM_FPGA_INTEL).
    FPGA_VENDOR = '8086'

    #: True to run against Nova patched by nova-cyborg, False for upstream.
    PATCHED = True

    def setUp(self):
        if nova_is_patched() != self.PATCHED:
            self.fail('%s needs %s Nova 34: run "nova-cyborg-patch %s"' % (
                type(self).__name__,
                'patched' if self.PATCHED else 'unpatched',
                'apply' if self.PATCHED else 'revert'))
        # A test that hangs (a deadlock, in the test or its cleanup) ends
        # its worker with every thread's stack on stderr instead of holding
        # the run until the CI's limit; OS_TEST_TIMEOUT covers the test
        # body only. First, so that it is cancelled last.
        faulthandler.dump_traceback_later(HANG_TIMEOUT, exit=True)
        self.addCleanup(faulthandler.cancel_dump_traceback_later)
        # Before Nova's CellDatabases fixture binds the method.
        self.useFixture(fixtures.MockPatchObject(
            nova_fixtures.CellDatabases, '_wrap_get_context_manager',
            _context_manager_without_cell_lock))
        self.useFixture(nova_release.NovaReleaseFixture())
        super().setUp()
        # What this process keeps across requests: the conductor's reads
        # of the computes' capabilities (node names are reused by every
        # test) and the compute's kept words on binds.
        for kept in (capability._SERVES, bind_outcome._KEPT):
            kept.clear()
            self.addCleanup(kept.clear)
        # Loopback sockets for what Cyborg calls.
        placement_app = placement_deploy.loadapp(
            self.placement_fixture.conf_fixture.conf)
        server, self.placement_url = loopback.serve(placement_app)
        self.addCleanup(loopback.stop, server)
        nova_app = _NovaIdentity(self.api_fixture.app())
        server, nova_root = loopback.serve(nova_app)
        self.addCleanup(loopback.stop, server)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.api.auth.NovaKeystoneContext._create_context',
            _create_context))

        self.broker = self.useFixture(broker.BrokerFixture())
        self.clouds_yaml = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'clouds.yaml')
        self.glance = None
        self.nova_url = nova_root + '/v2.1'
        self.cyborg = self.useFixture(cyborg_fixture.CyborgFixture(
            self.placement_url, self.nova_url,
            transport_url=self.broker.transport_url,
            clouds_yaml=self.clouds_yaml))
        # The Cyborg child's log goes with its temporary directory: a
        # failed test keeps its errors (a bind job that died in Cyborg's
        # conductor says so only there).
        self.addOnException(lambda exc_info: self.addDetail(
            'cyborg-errors', testtools_content.text_content(
                self.cyborg.log_problems())))
        self.flags(endpoint_override=self.cyborg.endpoint, group='cyborg')
        self._configure_service_user()
        # Three callers in three projects (``api`` and ``admin_api``, from
        # Nova's base, share one): the owner of the servers a test boots,
        # another tenant, and a cloud admin of a third project.
        self.owner_api = self.api_as(identity.OWNER)
        self.other_tenant_api = self.api_as(identity.OTHER_TENANT)
        self.cloud_admin_api = self.api_as(identity.CLOUD_ADMIN)
        self.hosts = {}
        self.sidecars = {}
        self._kernels = {}
        self._simulate_mdev_kernel()
        # Hard reboot, power on and resize read the guest's disks from its
        # domain XML to re-populate backing files or copy them; Nova's
        # functional base never writes the disks (_create_image is mocked),
        # so there is nothing to read.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            '_get_instance_disk_info_from_config', return_value=[]))
        # libvirt-python's virDomain.managedSaveRemove(flags=0) takes its
        # flags as optional; fakelibvirt's requires them, and its own
        # undefineFlags calls it without: a hard reboot or delete of a
        # guest that is still saved (a resume that failed before the
        # restore) would fail with TypeError.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.managedSaveRemove',
            _managed_save_remove))

    def _setup_services(self):
        # Nova's test config expects api-paste.ini under site-packages; pip
        # installs Nova's data files under the environment's prefix.
        paste = os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')
        if os.path.exists(paste):
            self.flags(api_paste_config=paste, group='wsgi')
        super()._setup_services()

    def _configure_service_user(self):
        opts = ks_loading.get_auth_plugin_conf_options('admin_token')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.service_auth._SERVICE_AUTH', None))
        from nova.conf import CONF
        CONF.register_opts(opts, group='service_user')
        self.flags(send_service_user_token=True, auth_type='admin_token',
                   token=identity.SERVICE_TOKEN,
                   endpoint=self.cyborg.endpoint, group='service_user')

    def api_as(self, person):
        """A Nova API client for ``(user_id, project_id, roles)``."""
        user_id, project_id, roles = person
        api = nova_client.TestOpenStackClient(
            user_id, self.api_fixture.base_url, project_id=project_id,
            roles=roles)
        api.microversion = self.microversion
        return api

    # Hosts and devices

    def start_glance(self):
        """Start the real Glance that Cyborg and sidecars take bitstreams
        from."""
        if self.glance is None:
            self.glance = self.useFixture(glance_fixture.GlanceFixture())
            self.glance.clouds_yaml(self.clouds_yaml)
        return self.glance

    def create_bitstream(self, function_id, extra=''):
        """A bitstream image loading ``function_id`` (32 hex digits)."""
        glance = self.start_glance()
        image_id = glance.create_image(
            'bitstream-%s' % function_id[:8],
            ('%s%s\n' % (extra, function_id)).encode(),
            {'accel:function_id': function_id})
        # nova-compute reads the bitstream's function through Nova's image
        # API (nova_cyborg.steps.function_check), which Nova's functional base
        # serves from its in-memory GlanceFixture: the same record there.
        from nova.image import glance as nova_glance
        nova_glance.get_default_image_service().create(None, {
            'id': image_id, 'name': 'bitstream-%s' % function_id[:8],
            'status': 'active', 'visibility': 'public',
            'properties': {'accel:function_id': function_id}})
        return image_id

    def start_accel_compute(self, hostname, num_pfs=None, num_vfs=None,
                            vendors=None, function_ids=None, sidecar=True,
                            memory_gb=16, num_mdevcap=0, mdev_types=(),
                            drivers=('fpga',), program_lease=600,
                            extra_config='', rpc_timeout=30,
                            plain_pfs=False):
        """Start a simulated host with FPGAs, and its sidecar.

        :param vendors: vendor id of each PF's FPGA (default FPGA_VENDOR):
            ``8086`` an Intel DFL card (N6000) whose ports are released to
            the PF's VFs, one port a VF (a deployable and provider each);
            ``10ee`` an Alveo U250 whose management PF is the PF and user
            PF its first VF's address (one deployable, the user PF).
        :param function_ids: function loaded in each PF's FPGA (each port).
        :param sidecar: False to report the FPGAs through the Cyborg child's
            control route instead (``report_data`` with chosen values).
        :param num_mdevcap: mdev-capable GPUs (fakelibvirt's, ``nvidia-11``
            with 16 instances), reported by the ``gpu`` driver.
        :param memory_gb: host memory; the RAM weigher prefers more.
        :param plain_pfs: fakelibvirt's PFs stay what they are there (SR-IOV
            NICs, 8086:1528 with 8086:1515 VFs), no FPGA.
        """
        if 'pci' in drivers and sidecar and (
                'PCI' not in sidecar_fixture.conductor_device_types()):
            self.skipTest("the generic PCI driver's devices (type PCI) need "
                          "Cyborg 17's conductor; Cyborg 16's lacks the "
                          "type (install guide, supported releases)")
        num_pfs = num_pfs or self.NUM_PFS
        num_vfs = num_vfs or self.NUM_VFS
        pci_info = fakelibvirt.HostPCIDevicesInfo(
            num_pci=0, num_pfs=num_pfs, num_vfs=num_vfs,
            num_mdevcap=num_mdevcap)
        host_info = fakelibvirt.HostInfo(
            cpu_nodes=2, cpu_sockets=1, cpu_cores=2, cpu_threads=2,
            kB_mem=memory_gb * 1024 * 1024)
        self.start_compute(hostname=hostname, pci_info=pci_info,
                           host_info=host_info)
        # The same addresses as fakelibvirt's; its PFs become FPGAs.
        layout = simulator.from_fakelibvirt(
            num_pfs=num_pfs, num_vfs=num_vfs, num_mdevcap=num_mdevcap)
        host = simulator.SimulatedHost()
        vendors = iter(vendors or [self.FPGA_VENDOR] * num_pfs)
        function_ids = iter(function_ids or [None] * num_pfs)
        for f in layout.functions.values():
            if f.mdev_types:
                host.add_gpu(f.vendor_id, f.product_id, f.class_id,
                             address=f.address, mdev_types=f.mdev_types)
            elif f.physfn is None and plain_pfs:
                host.add_pf(f.vendor_id, f.product_id, f.class_id,
                            address=f.address, num_vfs=len(f.virtfns),
                            vf_product_id=layout.functions[
                                f.virtfns[0]].product_id if f.virtfns
                            else None, numa_node=f.numa_node)
            elif f.physfn is None:
                vendor, function_id = next(vendors), next(function_ids)
                if vendor == '10ee':
                    xrt_host = (host.extensions.get('xrt') or
                                xrt.XrtHost(host))
                    xrt_host.add_card(
                        'u250', xclbin_uuid=function_id, address=f.address)
                else:
                    host.add_fpga(address=f.address, num_vfs=len(f.virtfns),
                                  function_id=function_id)
        self.hosts[hostname] = host
        if sidecar:
            conn = self.computes[hostname].driver._host.get_connection()
            self._kernels[hostname] = conn
            self.sidecars[hostname] = self.useFixture(
                sidecar_fixture.SidecarFixture(
                    hostname, host, self.broker.transport_url,
                    self.placement_url, lambda: conn,
                    glance_url=self.glance and self.glance.endpoint,
                    drivers=drivers, mdev_types=mdev_types,
                    program_lease=program_lease, extra=extra_config,
                    rpc_timeout=rpc_timeout, cyborg_url=self.cyborg.endpoint))
        return host

    def _simulate_mdev_kernel(self):
        """What the kernel and libvirt do when the sidecar writes an mdev.

        The sidecar's privileged write lands in the generated sysfs tree;
        this makes the mdev appear in the host's fakelibvirt too, as it
        would in libvirt's node devices on a real host.
        """
        real_create = privileged.create_mdev

        def create_mdev(root, parent, mdev_type, mdev_uuid):
            real_create(root, parent, mdev_type, mdev_uuid)
            for hostname, conn in self._kernels.items():
                if self.sidecars[hostname].sysfs_root == root:
                    name = 'mdev_%s_%s' % (mdev_uuid.replace('-', '_'),
                                           parent.replace(':', '_')
                                           .replace('.', '_'))
                    conn.mdev_info.devices[name] = fakelibvirt.FakeMdevDevice(
                        name, mdev_type, 'pci_' + parent.replace(':', '_')
                        .replace('.', '_'))

        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.privileged.create_mdev', create_mdev))

    def report_via_harness(self, hostname, in_use=False):
        """Report a host's FPGAs without its sidecar (chosen values)."""
        host = self.hosts[hostname]
        devices = []
        for pf in host.fpga_pfs():
            card = host.fpga_card(pf)
            devices.append({
                'vendor': '8086', 'model': host.functions[pf].product_id,
                'type': 'FPGA', 'std_board_info': {},
                'controlpath_id': {'cpid_type': 'PCI',
                                   'cpid_info': cpid(pf)},
                'deployables': [{
                    'name': '%s_%s' % (hostname, handle),
                    'num_accelerators': 1,
                    'driver_name': 'intel',
                    'attributes': {'rc': 'FPGA',
                                   'trait0': 'CUSTOM_FPGA_INTEL'},
                    'attach_handles': [
                        {'attach_type': 'PCI', 'attach_info': cpid(handle),
                         'in_use': in_use}],
                } for handle in card.handles()],
            })
        self.cyborg.report_data(hostname, devices)

    def pf_bdfs(self, hostname):
        """PCI addresses of a host's FPGA cards' PFs (DFL cards; an Alveo
        card's management PF)."""
        host = self.hosts[hostname]
        xrt_host = host.extensions.get('xrt')
        return sorted(host.fpga_pfs() + [
            c.mgmt for c in (xrt_host.cards if xrt_host else ())])

    def handle_bdfs(self, hostname):
        """PCI addresses through which a host's FPGAs are attached: the
        DFL ports' VFs (or PF), the Alveo cards' user PFs."""
        host = self.hosts[hostname]
        handles = {a for pf in host.fpga_pfs()
                   for a in host.fpga_card(pf).handles()}
        xrt_host = host.extensions.get('xrt')
        cards = xrt_host.cards if xrt_host else ()
        return handles | {c.user for c in cards}

    def fpga_providers(self, hostname, pf):
        """The provider names of the FPGA card whose PF is ``pf``: one
        per port (DFL), the user PF's (Alveo)."""
        host = self.hosts[hostname]
        card = host.fpga_card(pf)
        if card is not None:
            return ['%s_%s' % (hostname, a) for a in card.handles()]
        (user,) = [c.user for c in host.extensions['xrt'].cards
                   if c.mgmt == pf]
        return ['%s_%s' % (hostname, user)]

    def device_rp_uuids(self, hostname):
        """{deployable name: provider uuid} of a host's device providers."""
        compute_rp = self._get_provider_uuid_by_host(hostname)
        return {rp['name']: rp['uuid']
                for rp in self._get_all_rps_in_a_tree(compute_rp)
                if rp['uuid'] != compute_rp}

    def compute_service(self, hostname):
        """The host's nova-compute service, as the admin sees it."""
        return self.admin_api.get_services(
            host=hostname, binary='nova-compute')[0]

    def force_down(self, hostname, forced_down):
        """The admin marks the host's nova-compute forced down (or not)."""
        self.admin_api.put_service(self.compute_service(hostname)['id'],
                                   {'forced_down': forced_down})

    # Flavors, profiles, servers

    def create_profile_flavor(self, groups, name=None):
        name = name or 'dp-%d' % len(self.cyborg.get_device_profiles())
        self.cyborg.create_device_profile(name, groups)
        flavor_id = self._create_flavor(
            name='accel-%s' % name,
            extra_spec={'accel:device_profile': name})
        return name, flavor_id

    def boot(self, flavor_id, expected_state='ACTIVE', **kwargs):
        return self._create_server(
            flavor_id=flavor_id, image_uuid=IMAGE, networks='none',
            expected_state=expected_state, **kwargs)

    # What a user checks

    def domain_xml(self, server):
        host = server['OS-EXT-SRV-ATTR:host']
        conn = self.computes[host].driver._host.get_connection()
        return conn.lookupByUUIDString(server['id']).XMLDesc(0)

    def hostdev_bdfs(self, server):
        root = ElementTree.fromstring(self.domain_xml(server))
        bdfs = []
        for hostdev in root.findall('./devices/hostdev[@type="pci"]'):
            addr = hostdev.find('./source/address')
            bdfs.append(canonical_bdf(*(
                addr.get(k) for k in ('domain', 'bus', 'slot', 'function'))))
        return sorted(bdfs)

    @staticmethod
    def arq_bdf(arq):
        info = arq['attach_handle_info']
        return canonical_bdf(*(
            info[k] for k in ('domain', 'bus', 'device', 'function')))

    def allocations(self, server_id):
        return self.placement.get(
            '/allocations/%s' % server_id).body['allocations']

    # What a user checks, together

    def _device_allocations(self, server_id):
        """{provider uuid: FPGA amount} of the server's allocation."""
        return {rp: alloc['resources']['FPGA']
                for rp, alloc in self.allocations(server_id).items()
                if 'FPGA' in alloc['resources']}

    def assert_accelerated(self, server, expected_arqs):
        """ACTIVE, one hostdev per ARQ with its BDF, ARQs bound right."""
        self.assertEqual('ACTIVE', server['status'])
        host = server['OS-EXT-SRV-ATTR:host']
        arqs = self.cyborg.list_arqs(server['id'])
        self.assertEqual(expected_arqs, len(arqs))
        device_allocs = self._device_allocations(server['id'])
        for arq in arqs:
            self.assertEqual('Bound', arq['state'])
            self.assertEqual(host, arq['hostname'])
            self.assertEqual(server['id'], arq['instance_uuid'])
            self.assertIn(arq['device_rp_uuid'], device_allocs)
            self.assertEqual('PCI', arq['attach_handle_type'])
        # Each provider's allocation matches the ARQs bound to it.
        per_rp = {}
        for arq in arqs:
            per_rp[arq['device_rp_uuid']] = per_rp.get(
                arq['device_rp_uuid'], 0) + 1
        self.assertEqual(device_allocs, per_rp)
        # The domain has exactly the ARQs' BDFs, each a real VF of the host.
        arq_bdfs = sorted(self.arq_bdf(arq) for arq in arqs)
        self.assertEqual(arq_bdfs, self.hostdev_bdfs(server))
        self.assertEqual(len(arq_bdfs), len(set(arq_bdfs)))
        self.assertTrue(set(arq_bdfs) <= self.handle_bdfs(host))
        return arqs

    def assert_nothing_left(self, server_id):
        self.assertEqual([], self.cyborg.list_arqs(server_id))
        self.assertEqual({}, self.allocations(server_id))


class _NovaIdentity(object):
    """Give Nova's stubbed keystone context the identity of a token."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        user, project, roles = identity.parse_token(
            environ.get('HTTP_X_AUTH_TOKEN', ''))
        if user is None:
            start_response('401 Unauthorized',
                           [('Content-Type', 'text/plain')])
            return [b'unknown token']
        environ.update({'HTTP_X_AUTH_USER': user, 'HTTP_X_USER_ID': user,
                        'HTTP_X_AUTH_PROJECT_ID': project,
                        'HTTP_X_ROLES': ','.join(roles)})
        return self.app(environ, start_response)


def _create_context(env, **kwargs):
    """Nova's test context stub, plus a token Cyborg's stand-in accepts."""
    user_id = env['HTTP_X_AUTH_USER']
    project_id = env['HTTP_X_AUTH_PROJECT_ID']
    roles = env['HTTP_X_ROLES'].split(',')
    return nova_context.RequestContext(
        user_id, project_id, is_admin='admin' in roles, roles=roles,
        auth_token=identity.make_token(user_id, project_id, roles), **kwargs)
