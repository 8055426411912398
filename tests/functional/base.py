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

Devices: each simulated host's fakelibvirt PCI PFs are reported to the real
cyborg-conductor (``report_data``) as FPGA devices whose VFs are the PCI
attach handles, so a BDF in a domain XML can be checked against the
host's real (simulated) inventory.
"""

# Nova chooses eventlet or native threads before anything else is imported.
from nova import monkey_patch; monkey_patch.patch()  # noqa: E702

import os  # noqa: E402
import sys  # noqa: E402
from xml.etree import ElementTree

import fixtures
from keystoneauth1 import loading as ks_loading

from nova import context as nova_context
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base as libvirt_base
from placement import deploy as placement_deploy

from tests.functional.harness import cyborg_fixture
from tests.functional.harness import identity
from tests.functional.harness import loopback

IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'


def nova_is_patched():
    """True if Nova's accelerator calls are routed to nova_cyborg."""
    import inspect
    from nova.accelerator import cyborg
    return 'nova_cyborg' in inspect.getsource(cyborg.get_client)


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


class AcceleratorTestBase(libvirt_base.ServersTestBase):
    """Base for functional tests against real Nova, Placement and Cyborg."""

    ADMIN_API = True
    microversion = 'latest'
    CAST_AS_CALL = False
    #: FPGA PFs and VFs (attach handles) per simulated host.
    NUM_PFS = 1
    NUM_VFS = 2
    #: Trait every deployable of a host gets, besides CUSTOM_FPGA_<host>.
    DEVICE_TRAITS = ('CUSTOM_FPGA_INTEL',)

    #: True to run against Nova patched by nova-cyborg, False for upstream.
    PATCHED = True

    def setUp(self):
        if nova_is_patched() != self.PATCHED:
            self.fail('%s needs %s Nova 34: run "nova-cyborg-patch %s"' % (
                type(self).__name__,
                'patched' if self.PATCHED else 'unpatched',
                'apply' if self.PATCHED else 'revert'))
        super().setUp()
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

        self.cyborg = self.useFixture(cyborg_fixture.CyborgFixture(
            self.placement_url, nova_root + '/v2.1'))
        self.flags(endpoint_override=self.cyborg.endpoint, group='cyborg')
        self._configure_service_user()
        self.hosts = {}

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

    # Hosts and devices

    def start_accel_compute(self, hostname, num_pfs=None, num_vfs=None,
                            traits=None, report=True, memory_gb=16):
        """Start a simulated host and report its FPGAs to Cyborg.

        :param traits: traits of every PF's deployable, or a list with one
            tuple of traits per PF.
        :param memory_gb: host memory; the RAM weigher prefers more.
        """
        pci_info = fakelibvirt.HostPCIDevicesInfo(
            num_pci=0, num_pfs=num_pfs or self.NUM_PFS,
            num_vfs=num_vfs or self.NUM_VFS)
        host_info = fakelibvirt.HostInfo(
            cpu_nodes=2, cpu_sockets=1, cpu_cores=2, cpu_threads=2,
            kB_mem=memory_gb * 1024 * 1024)
        self.start_compute(hostname=hostname, pci_info=pci_info,
                           host_info=host_info)
        devices = self._fpga_devices(hostname, pci_info, traits)
        self.hosts[hostname] = devices
        if report:
            self.cyborg.report_data(hostname, devices)
        return devices

    def _fpga_devices(self, hostname, pci_info, traits):
        devices = []
        names = sorted(pci_info.get_all_devices())
        pfs = [n for n in names
               if pci_info.get_device_by_name(n).dev_type == 'PF']
        traits = traits or self.DEVICE_TRAITS
        if not isinstance(traits, list):
            traits = [traits] * len(pfs)
        for name, pf_traits in zip(pfs, traits):
            pf_bdf = bdf_of(name)
            vfs = [bdf_of(n) for n in names
                   if pci_info.get_device_by_name(n).dev_type == 'VF' and
                   bdf_of(n).rsplit('.', 1)[0] == pf_bdf.rsplit('.', 1)[0]]
            attrs = {'rc': 'FPGA'}
            for i, trait in enumerate(
                    list(pf_traits) +
                    ['CUSTOM_FPGA_%s' % hostname.upper()]):
                attrs['trait%d' % i] = trait
            devices.append({
                'vendor': '8086', 'model': 'simulated-fpga', 'type': 'FPGA',
                'std_board_info': {'product_id': '1515',
                                   'controller': 'simulated'},
                'controlpath_id': {'cpid_type': 'PCI',
                                   'cpid_info': cpid(pf_bdf)},
                'deployables': [{
                    'name': '%s_%s' % (hostname, pf_bdf),
                    'num_accelerators': len(vfs),
                    'driver_name': 'simulated',
                    'attributes': attrs,
                    'attach_handles': [
                        {'attach_type': 'PCI', 'attach_info': cpid(vf),
                         'in_use': False} for vf in vfs],
                }],
            })
        return devices

    def pf_bdfs(self, hostname):
        """BDFs of a host's FPGA PFs, in the order they were reported."""
        return [dev['deployables'][0]['name'].split('_', 1)[1]
                for dev in self.hosts[hostname]]

    def handle_bdfs(self, hostname):
        return {canonical_bdf(*(h['attach_info'][k] for k in
                                ('domain', 'bus', 'device', 'function')))
                for dev in self.hosts[hostname]
                for dep in dev['deployables']
                for h in dep['attach_handles']}

    def device_rp_uuids(self, hostname):
        """{deployable name: provider uuid} of a host's device providers."""
        compute_rp = self._get_provider_uuid_by_host(hostname)
        return {rp['name']: rp['uuid']
                for rp in self._get_all_rps_in_a_tree(compute_rp)
                if rp['uuid'] != compute_rp}

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
