"""Hostile attach handles from Cyborg; malformed profiles and extra specs.

Attach handles: whatever reports a host's devices to cyborg-conductor
(a cyborg-agent, the sidecar, anything on the message bus) writes the
``attach_info`` that Cyborg stores and hands Nova as an ARQ's
``attach_handle_info``. Here the harness reports, through the real
conductor's ``report_data``, a host whose only VF (or vGPU slot) has a
hostile attach handle; Cyborg binds it to a boot as usual. The boot must
fail cleanly: ERROR with a fault that says why, no domain (so nothing
reaches a domain XML), no ARQ in Cyborg, no allocation, the attach handle
free in Cyborg's database, and no mdev on the host. Nova cuts a fault's
message at 255 characters; its details (an admin's) hold all of it.

* PCI attach handle, refused by nova-compute once bound: ERROR, the fault
  names the ARQ, the field and the value, escaped (no ``<`` or ``>``).
  Cases: XML metacharacters breaking out of an element or an attribute, a
  non-hex device, a ``0x`` prefix, a device above 0x1f, a function above
  7, a domain of five digits, no ``function`` key, a hostile
  ``physical_network``, and the type ``TEST_PCI`` that Cyborg accepts
  (its fake driver's) and nova-cyborg does not.
* an attach type Cyborg does not know (``VFIO``): cyborg-conductor's
  report fails (HTTP 500, its rollback raises AttributeError) and stores
  no attach handle, but leaves the device's provider and inventory in
  Placement; a boot sent there fails to bind (Cyborg: no deployable for
  the provider): ERROR with Cyborg's reason, nothing left.
* MDEV attach handle (cyborg-conductor asks the host's agent, here the
  sidecar, to create the mdev while it binds): a malformed mdev type
  (path traversal, XML) is refused by the sidecar, which creates no mdev,
  so Cyborg fails the bind: ERROR, the fault gives Cyborg's reason as
  Cyborg wrote it (unescaped), no allocation, no domain, and the ARQ is
  deleted: Cyborg's unbind asks the sidecar to remove an mdev that does
  not exist, which it answers without touching sysfs (it used to refuse
  the same values again, and Cyborg's UnbindFailed handling then raised,
  leaving the ARQ BindFailed with its attach handle in use).
* a well-formed MDEV handle while ``[nova_cyborg] allowed_attach_types =
  PCI``: the sidecar creates the mdev at bind, nova-compute refuses the
  ARQ (the fault says why), and the ARQ's deletion removes the mdev. The
  mdev's UUID is Cyborg's own attach handle UUID: a report cannot make it
  malformed (the unit tests cover a malformed one).

Device profiles and the ``accel:device_profile`` extra spec (the boot is
refused with HTTP 400 naming the profile, the group and the key; no
server, no ARQ):

* stored by Cyborg, refused by nova-cyborg: amounts ``0``, ``-1``,
  ``" 1"``, ``true`` (stored as ``True``) and one above
  ``max_accelerators_per_instance``; a resource class ``CUSTOM_fpga``;
  trait names ``CUSTOM_FPGA-INTEL`` and ``CUSTOM_``; a key ``accel:x y``;
  groups without a resource (empty, only a required trait, only
  ``accel:`` keys, an empty second group). A group with only a forbidden
  trait and an unknown profile are in test_boot.
* refused by Cyborg when the profile is created (HTTP 400 unless noted):
  keys outside ``resources:``/``trait:``/``accel:``, a standard trait
  (Cyborg takes ``CUSTOM_`` traits only), amounts ``one`` and ``1.5``, a
  trait value ``preferred``, the resource class ``VCPU``, names with a
  space, a comma or a non-ASCII letter, a second profile with the same
  name (HTTP 409); no groups and a null amount get HTTP 500 from Cyborg
  (its bugs: a client error).
* extra spec values: a list of names (``dp-a,dp-b``, which Cyborg's name
  filter splits), another case, a trailing space, a number: no such
  profile. Refused when the flavor's extra spec is set (HTTP 400): a null
  value, a value over 255 characters, the keys ``accel:device_profiles``
  and ``accel:``, and (patch 0000b) an empty value or one with whitespace
  or a comma. An empty value set before validation (microversion 2.85)
  boots the server without accelerators, as upstream does.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import os  # noqa: E402
import sqlite3  # noqa: E402

import fixtures  # noqa: E402
from nova.tests.functional.api import client as api_client  # noqa: E402

from nova_cyborg.clients import cyborg as nc_client  # noqa: E402
from sidecar import privileged  # noqa: E402
from tests.functional.harness import cyborg_fixture  # noqa: E402
from tests.functional import test_faults_events  # noqa: E402

#: Closes the <address> and the <hostdev>, adds a hostdev of its own.
XML_ELEMENT = ("81'/></source></hostdev><hostdev mode='subsystem' "
               "type='pci'><source><address domain='0x0000' bus='0x00' "
               "slot='0x1f' function='0x2'/></source></hostdev><x a='")
#: Closes the attribute, adds one.
XML_ATTRIBUTE = '1" managed="no'


class BindSpy(fixtures.Fixture):
    """Record the ARQs the conductor binds."""

    def _setUp(self):
        self.arqs = []
        real = nc_client.CyborgClient.bind_arqs

        def bind_arqs(cyclient, bindings):
            self.arqs.extend(sorted(bindings))
            return real(cyclient, bindings)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg.CyborgClient.bind_arqs', bind_arqs))


class HostileHandleBase(test_faults_events.FailedBootChecks,
                        base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        self.spy = self.useFixture(BindSpy())

    def report(self, address, device_type, rc, attach_type, attach_info):
        """Report ``address`` as compute1's only device, with one attach
        handle, through the real cyborg-conductor."""
        f = self.hosts['compute1'].functions[address]
        self.cyborg.report_data('compute1', [{
            'vendor': f.vendor_id, 'model': f.product_id,
            'type': device_type, 'std_board_info': {},
            'controlpath_id': {'cpid_type': 'PCI',
                               'cpid_info': base.cpid(address)},
            'deployables': [{
                'name': 'compute1_%s' % address,
                'num_accelerators': 1,
                'driver_name': 'intel',
                'attributes': {'rc': rc},
                'attach_handles': [{'attach_type': attach_type,
                                    'attach_info': attach_info}],
            }],
        }])

    def attach_handles(self):
        """(attach_type, in_use) of each attach handle in Cyborg's DB."""
        db = sqlite3.connect(os.path.join(self.cyborg.base_dir,
                                          'cyborg.sqlite'))
        try:
            return db.execute('SELECT attach_type, in_use '
                              'FROM attach_handles').fetchall()
        finally:
            db.close()

    def assert_fault(self, server, head, tail=''):
        """The fault's message is ``head + tail`` or starts with it: Nova
        cuts the message at 255 characters. The fault's details (an
        admin's) hold all of it."""
        fault = self.admin_api.get_server(server['id'])['fault']
        message, expected = fault['message'], head + tail
        shown = min(len(expected), 255)
        self.assertEqual(expected[:shown], message[:shown])
        self.assertIn(tail or head, fault['details'])
        return message

    def assert_invalid_handle(self, server, arq, reason):
        """nova-compute refused the bound ARQ; the fault names it and the
        reason, escaped: no markup in the message."""
        message = self.assert_fault(
            server, 'Build of instance %s aborted: Failure getting '
            'accelerator requests: Accelerator request %s has an invalid '
            'attach handle: ' % (server['id'], arq), reason)
        self.assertNotIn('<', message)
        self.assertNotIn('>', message)


class HostilePciHandleTest(HostileHandleBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1', sidecar=False, num_vfs=1)
        (self.pf,) = self.pf_bdfs('compute1')
        (self.vf,) = self.handle_bdfs('compute1')
        _name, self.flavor = self.create_profile_flavor(
            [{'resources:FPGA': '1'}])

    def vf_info(self, **changes):
        """The VF's attach_info with ``changes`` (None removes a key)."""
        info = base.cpid(self.vf)
        info.update(changes)
        return {k: v for k, v in info.items() if v is not None}

    def assert_refused(self, info, reason, attach_type='PCI'):
        self.report(self.pf, 'FPGA', 'FPGA', attach_type, info)
        server = self.wait_error(self.post_server(self.flavor))
        (arq,) = self.spy.arqs
        self.assert_invalid_handle(server, arq, reason)
        self.assert_clean(server)
        self.assertEqual([(attach_type, 0)], self.attach_handles())

    def test_xml_element(self):
        self.assert_refused(
            self.vf_info(bus=XML_ELEMENT),
            r'''attach_handle_info bus must be 1 to 2 hex digits, not '''
            r'''"81'/\x3e\x3c/source\x3e\x3c/hostdev\...''')

    def test_xml_attribute(self):
        self.assert_refused(
            self.vf_info(function=XML_ATTRIBUTE),
            r'''attach_handle_info function must be 1 to 1 hex digits, '''
            'not \'1" managed="no\'')

    def test_non_hex(self):
        self.assert_refused(self.vf_info(device='zz'), 'attach_handle_info '
                            "device must be 1 to 2 hex digits, not 'zz'")

    def test_hex_prefix(self):
        self.assert_refused(self.vf_info(bus='0x81'), 'attach_handle_info '
                            "bus must be 1 to 2 hex digits, not '0x81'")

    def test_device_out_of_range(self):
        self.assert_refused(self.vf_info(device='20'), 'attach_handle_info '
                            'device 0x20 is above 0x1f')

    def test_function_out_of_range(self):
        self.assert_refused(self.vf_info(function='8'), 'attach_handle_info '
                            'function 0x8 is above 0x7')

    def test_domain_too_long(self):
        self.assert_refused(self.vf_info(domain='10000'),
                            'attach_handle_info domain must be 1 to 4 hex '
                            "digits, not '10000'")

    def test_missing_key(self):
        self.assert_refused(self.vf_info(function=None),
                            'attach_handle_info has no function')

    def test_hostile_physical_network(self):
        self.assert_refused(
            self.vf_info(physical_network="<physnet name='x'/>"),
            r'''attach_handle_info physical_network "\x3cphysnet '''
            r'''name='x'/\x3e" is not a physical network name''')

    def test_attach_type_of_cyborgs_fake_driver(self):
        self.assert_refused(self.vf_info(),
                            "attach_handle_type 'TEST_PCI' is not supported",
                            attach_type='TEST_PCI')

    def test_unknown_attach_type_is_refused_by_cyborg(self):
        e = self.assertRaises(cyborg_fixture.CyborgError, self.report,
                              self.pf, 'FPGA', 'FPGA', 'VFIO',
                              self.vf_info())
        # Cyborg cannot store the handle, and its rollback fails too.
        self.assertIn('HTTP 500', str(e))
        self.assertIn("AttributeError: 'NoneType' object has no attribute",
                      str(e))
        self.assertEqual([], self.attach_handles())
        self.assertEqual([], self.cyborg.list_deployables())
        # Cyborg left the device's provider and inventory in Placement; a
        # boot sent there fails to bind, cleanly.
        (rp,) = self.device_rp_uuids('compute1').values()
        server = self.wait_error(self.post_server(self.flavor))
        self.assert_fault(server, 'Failed to bind accelerator requests: '
                          'Cyborg answered HTTP 404 to PATCH '
                          '/accelerator_requests: {"faultcode": "Client", '
                          '"faultstring": "', 'Deployable not found with '
                          'resource provider uuid=%s' % rp)
        self.assert_clean(server)


class KernelMdevs(fixtures.Fixture):
    """The rest of what the kernel does with the sidecar's mdev writes:
    a created mdev appears in the host's sysfs tree (the base already adds
    it to libvirt), a removed one disappears from both."""

    def __init__(self, test, hostname):
        super().__init__()
        self.test = test
        self.hostname = hostname

    def _setUp(self):
        self.created = []
        host = self.test.hosts[self.hostname]
        conn = self.test.computes[self.hostname].driver._host.get_connection()
        create, remove = privileged.create_mdev, privileged.remove_mdev
        fixture = self

        def create_mdev(root, parent, mdev_type, mdev_uuid):
            create(root, parent, mdev_type, mdev_uuid)
            host.create_mdev(parent, mdev_type, mdev_uuid)
            fixture.created.append(mdev_uuid)

        def remove_mdev(root, mdev_uuid):
            remove(root, mdev_uuid)
            for f in host.functions.values():
                for t in f.mdev_types:
                    if mdev_uuid in t.mdevs:
                        host.remove_mdev(f.address, t.type_id, mdev_uuid)
            for name in list(conn.mdev_info.devices):
                if name.startswith('mdev_' + mdev_uuid.replace('-', '_')):
                    del conn.mdev_info.devices[name]

        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.privileged.create_mdev', create_mdev))
        self.useFixture(fixtures.MonkeyPatch(
            'sidecar.privileged.remove_mdev', remove_mdev))

    def mdevs(self):
        """mdevs on the host: in its sysfs tree and in libvirt."""
        path = os.path.join(self.test.sidecars[self.hostname].sysfs_root,
                            'bus', 'mdev', 'devices')
        conn = self.test.computes[self.hostname].driver._host.get_connection()
        found = sorted(os.listdir(path)) if os.path.isdir(path) else []
        return found + sorted(conn.mdev_info.devices)


class HostileMdevHandleTest(HostileHandleBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1', num_mdevcap=1, drivers=('gpu',),
                                 mdev_types=('nvidia-11',))
        self.kernel = self.useFixture(KernelMdevs(self, 'compute1'))
        (self.gpu,) = [f.address for f in self.hosts['compute1'].functions
                       .values() if f.mdev_types]
        _name, self.flavor = self.create_profile_flavor(
            [{'resources:VGPU': '1'}])

    def report_mdev(self, asked_type='nvidia-11'):
        info = base.cpid(self.gpu)
        info.update(asked_type=asked_type, vgpu_mark='nvidia-11_0')
        self.report(self.gpu, 'GPU', 'VGPU', 'MDEV', info)

    def _malformed_type(self, asked_type, shown):
        self.report_mdev(asked_type)
        server = self.wait_error(self.post_server(self.flavor))
        # The sidecar refused to create it: Cyborg failed the bind.
        # Cyborg's answer is passed on as Cyborg wrote it.
        self.assert_fault(server, 'Failed to bind accelerator requests: '
                          'Cyborg answered HTTP 500 to PATCH '
                          '/accelerator_requests: {"faultcode": "Server", '
                          '"faultstring": "Remote error: RemoteError Remote '
                          'error: InvalidArgument Invalid asked_type: ',
                          '%s is not an mdev type offered by %s' % (
                              shown, self.gpu))
        self.assertEqual([], self.kernel.created)
        self.assertEqual([], self.kernel.mdevs())
        self.assertEqual({}, self.allocations(server['id']))
        self.assert_no_domain(server['id'])
        return server

    def test_mdev_type_with_a_path(self):
        self._malformed_type('nvidia-11/../../../power',
                             "'nvidia-11/../../../power'")

    def test_mdev_type_with_xml(self):
        self._malformed_type("nvidia-11'/><x a='",
                             r'''\"nvidia-11'/><x a='\"''')

    def test_malformed_mdev_type_leaves_no_arq(self):
        server = self._malformed_type('nvidia-11/../../../power',
                                      "'nvidia-11/../../../power'")
        self.assert_clean(server)
        self.assertEqual([('MDEV', 0)], self.attach_handles())

    def test_mdev_not_allowed(self):
        self.flags(allowed_attach_types=['PCI'], group='nova_cyborg')
        self.report_mdev()
        server = self.wait_error(self.post_server(self.flavor))
        (arq,) = self.spy.arqs
        self.assert_invalid_handle(server, arq, 'attach handle type MDEV is '
                                   'not in [nova_cyborg] '
                                   'allowed_attach_types')
        self.assert_clean(server)
        self.assertEqual([('MDEV', 0)], self.attach_handles())
        # Created while Cyborg bound, removed when the ARQ was deleted.
        self.assertEqual(1, len(self.kernel.created))
        self.assertEqual([], self.kernel.mdevs())


class MalformedProfileTest(base.AcceleratorTestBase):

    def setUp(self):
        super().setUp()
        self.start_accel_compute('compute1')

    def assert_boot_refused(self, flavor, message):
        exc = self.assertRaises(
            api_client.OpenStackApiException, self.api.post_server,
            {'server': self._build_server(flavor_id=flavor,
                                          image_uuid=base.IMAGE,
                                          networks='none')})
        self.assertEqual(400, exc.response.status_code, message)
        self.assertEqual(message, exc.response.json()['badRequest']
                         ['message'])
        self.assertEqual([], self.api.get_servers())
        self.assertEqual([], self.cyborg.list_arqs())

    def assert_groups_refused(self, cases):
        """Each (groups, what nova-cyborg says): Cyborg stores the
        profile, the boot is refused."""
        for groups, message in cases:
            name, flavor = self.create_profile_flavor(groups)
            self.assert_boot_refused(
                flavor, 'Device profile %s: %s' % (name, message))

    def test_amounts(self):
        limit = 'at most 16 are allowed per instance'
        self.assert_groups_refused([
            ([{'resources:FPGA': '0'}],
             "group 0: resources:FPGA must be a positive integer, not '0'"),
            ([{'resources:FPGA': '-1'}],
             "group 0: resources:FPGA must be a positive integer, not '-1'"),
            ([{'resources:FPGA': ' 1'}],
             "group 0: resources:FPGA must be a positive integer, not ' 1'"),
            ([{'resources:FPGA': True}],
             'group 0: resources:FPGA must be a positive integer, not '
             "'True'"),
            ([{'resources:FPGA': '100000'}],
             'the profile asks for 100000 accelerators; ' + limit),
            ([{'resources:FPGA': '9'}, {'resources:FPGA': '8'}],
             'the profile asks for 17 accelerators; ' + limit),
        ])

    def test_names(self):
        self.assert_groups_refused([
            ([{'resources:CUSTOM_fpga': '1'}],
             "group 0: unknown resource class 'CUSTOM_fpga'"),
            ([{'resources:FPGA': '1', 'trait:CUSTOM_FPGA-INTEL': 'required'}],
             "group 0: invalid trait name 'CUSTOM_FPGA-INTEL'"),
            ([{'resources:FPGA': '1', 'trait:CUSTOM_': 'forbidden'}],
             "group 0: invalid trait name 'CUSTOM_'"),
            ([{'resources:FPGA': '1', 'accel:x y': 'z'}],
             "group 0: unknown key 'accel:x y'"),
        ])

    def test_groups_without_resources(self):
        message = 'group %d: a group must request at least one resource'
        self.assert_groups_refused([
            ([{}], message % 0),
            ([{'trait:CUSTOM_FPGA_INTEL': 'required'}], message % 0),
            ([{'accel:bitstream_id': 'c2c2b1ee-0000-4000-8000-000000000000'}],
             message % 0),
            ([{'resources:FPGA': '1'}, {}], message % 1),
        ])

    def test_refused_by_cyborg(self):
        cases = [
            ([{'resources:FPGA': '1', 'resource:FPGA': '1'}], 400,
             'Device profile group keys must be of the form '
             '^(resources:|trait:|accel:)'),
            ([{'resources:FPGA': '1', 'trait:HW_CPU_X86_AVX': 'required'}],
             400, 'Unsupported trait name format HW_CPU_X86_AVX, should '
             'start with CUSTOM_'),
            ([{'resources:FPGA': 'one'}], 400,
             'Resources number one is invalid'),
            ([{'resources:FPGA': '1.5'}], 400,
             'Resources number 1.5 is invalid'),
            ([{'resources:FPGA': '1', 'trait:CUSTOM_X': 'preferred'}], 400,
             'Unsupported trait value preferred'),
            ([{'resources:VCPU': '1'}], 400,
             'Unsupported resource class VCPU'),
            # Cyborg's bugs: client errors answered with HTTP 500.
            ([], 500, 'DeviceProfile needs groups field.'),
            ([{'resources:FPGA': None}], 500, 'int() argument must be'),
        ]
        for i, (groups, status, message) in enumerate(cases):
            e = self.assertRaises(cyborg_fixture.CyborgError,
                                  self.cyborg.create_device_profile,
                                  'refused-%d' % i, groups)
            self.assertIn('HTTP %d' % status, str(e))
            self.assertIn(message, str(e))
        for name in ('has space', 'dp-a,dp-b', 'd\u00e9'):
            e = self.assertRaises(cyborg_fixture.CyborgError,
                                  self.cyborg.create_device_profile,
                                  name, [{'resources:FPGA': '1'}])
            self.assertIn('HTTP 400', str(e))
            self.assertIn('Device profile name must be of the form', str(e))
        self.assertEqual([], self.cyborg.get_device_profiles())

    def test_two_profiles_with_one_name(self):
        self.cyborg.create_device_profile('dp-a', [{'resources:FPGA': '1'}])
        e = self.assertRaises(cyborg_fixture.CyborgError,
                              self.cyborg.create_device_profile,
                              'dp-a', [{'resources:FPGA': '2'}])
        self.assertIn('HTTP 409', str(e))
        self.assertIn('A device_profile with name dp-a already exists', str(e))
        self.assertEqual([[{'resources:FPGA': '1'}]], [
            p['groups'] for p in self.cyborg.get_device_profiles('dp-a')])

    def test_extra_spec_names_no_profile(self):
        self.cyborg.create_device_profile('dp-a', [{'resources:FPGA': '1'}])
        self.cyborg.create_device_profile('dp-b', [{'resources:FPGA': '1'}])
        # Cyborg's name filter splits on commas and answers both profiles.
        self.assertEqual(2, len(self.cyborg.get_device_profiles('dp-a,dp-b')))
        for i, (value, shown) in enumerate((('DP-A', 'DP-A'),
                                            (123, '123'))):
            flavor = self._create_flavor(
                name='accel-%d' % i,
                extra_spec={'accel:device_profile': value})
            self.assert_boot_refused(
                flavor, 'Device profile %s: no such device profile in '
                'Cyborg' % shown)
        # A comma or whitespace is refused when the extra spec is set
        # (patch 0000b); set before validation (microversion 2.85), the
        # boot is refused.
        for i, value in enumerate(('dp-a,dp-b', 'dp-a ')):
            flavor = self._create_flavor(name='accel-bad-%d' % i)
            e = self.assertRaises(
                api_client.OpenStackApiException,
                self.admin_api.post_extra_spec, flavor,
                {'extra_specs': {'accel:device_profile': value}})
            self.assertEqual(400, e.response.status_code)
            self.admin_api.microversion = '2.85'
            self.admin_api.post_extra_spec(
                flavor, {'extra_specs': {'accel:device_profile': value}})
            self.admin_api.microversion = 'latest'
            self.assert_boot_refused(
                flavor, 'Device profile %s: no such device profile in '
                'Cyborg' % value)

    def test_extra_spec_refused_on_flavor_creation(self):
        flavor = self._create_flavor(name='accel-bad')
        cases = [
            ({'accel:device_profile': None},
             "Invalid input for field/attribute accel:device_profile. "
             "Value: None. None is not of type 'string', 'number'"),
            ({'accel:device_profile': 'x' * 256},
             "Invalid input for field/attribute accel:device_profile."),
            ({'accel:device_profiles': 'dp-a'},
             "Validation failed; extra spec 'accel:device_profiles' does "
             "not appear to be a valid extra spec."),
            ({'accel:': 'dp-a'},
             "Validation failed; extra spec 'accel:' does not appear to be "
             "a valid extra spec."),
        ]
        for spec, message in cases:
            e = self.assertRaises(
                api_client.OpenStackApiException,
                self.admin_api.post_extra_spec, flavor,
                {'extra_specs': spec})
            self.assertEqual(400, e.response.status_code, spec)
            self.assertIn(message, e.response.text)
        self.assertEqual({}, self.admin_api.get_flavor(flavor)[
            'extra_specs'])

    def test_empty_extra_spec(self):
        flavor = self._create_flavor(name='accel-bad')
        e = self.assertRaises(
            api_client.OpenStackApiException, self.admin_api.post_extra_spec,
            flavor, {'extra_specs': {'accel:device_profile': ''}})
        self.assertEqual(400, e.response.status_code)
        # Set before validation (microversions below 2.86 do not validate
        # extra specs): the flavor boots without accelerators, as upstream
        # (existing flavors stay bootable).
        self.admin_api.microversion = '2.85'
        self.admin_api.post_extra_spec(
            flavor, {'extra_specs': {'accel:device_profile': ''}})
        self.admin_api.microversion = 'latest'
        server = self._create_server(flavor_id=flavor, image_uuid=base.IMAGE,
                                     networks='none')
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual([], self.cyborg.list_arqs())
