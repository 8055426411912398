"""Tests of the validation of Cyborg's ARQs."""

import copy

import ddt
from oslo_versionedobjects import fixture as ovo_fixture
import testtools

from nova_cyborg.conf import nova_cyborg as conf_nova_cyborg
from nova_cyborg import exception
from nova_cyborg.model import objects
from nova_cyborg.model.objects import accelerator_request as arq_obj
from nova_cyborg.model.objects import base

ARQ_UUID = '6a1f8b7e-3c2d-4e5f-8a9b-0c1d2e3f4a5b'
MDEV_UUID = 'b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e'
HANDLE_UUID = '0d9c8b7a-6f5e-4d3c-2b1a-098765432101'
RP_UUID = '11111111-2222-4333-8444-555555555555'
INSTANCE_UUID = '99999999-8888-4777-8666-555555555555'


def pci_arq(**info):
    ahi = {'domain': '0000', 'bus': '0c', 'device': '00', 'function': '2'}
    ahi.update(info)
    return {
        'uuid': ARQ_UUID,
        'state': 'Bound',
        'device_profile_name': 'fpga-dp',
        'device_profile_group_id': 0,
        'hostname': 'compute-1',
        'device_rp_uuid': RP_UUID,
        'instance_uuid': INSTANCE_UUID,
        'attach_handle_type': 'PCI',
        'attach_handle_uuid': HANDLE_UUID,
        'attach_handle_info': ahi,
    }


def mdev_arq(**info):
    ahi = {'asked_type': 'nvidia-35', 'vgpu_mark': 'nvidia-35_0'}
    ahi.update(info)
    arq = pci_arq(**ahi)
    arq.update(attach_handle_type='MDEV', attach_handle_uuid=MDEV_UUID)
    return arq


def vfio_arq(**info):
    """A vGPU 17 VF whose type the sidecar sets at bind."""
    ahi = {'asked_type': 'NVIDIA H100-4C', 'vgpu_mark': 'NVIDIA H100-4C_0',
           'managed': 'no', 'vgpu_framework': 'vendor-vfio', 'bus': '81',
           'function': '3'}
    ahi.update(info)
    arq = pci_arq(**ahi)
    arq.update(attach_handle_type='MDEV', attach_handle_uuid=HANDLE_UUID)
    return arq


def with_info(arq, key, value):
    arq = copy.deepcopy(arq)
    if value is _MISSING:
        del arq['attach_handle_info'][key]
    else:
        arq['attach_handle_info'][key] = value
    return arq


def with_field(arq, key, value):
    arq = copy.deepcopy(arq)
    if value is _MISSING:
        del arq[key]
    else:
        arq[key] = value
    return arq


_MISSING = object()
_LONG = '0' * 10000

# (label, field named in the message, bad ARQ); every one must be refused.
HOSTILE = [
    ('bus_xml', 'bus', with_info(pci_arq(), 'bus', '0c"/><evil')),
    ('bus_negative', 'bus', with_info(pci_arq(), 'bus', '-1')),
    ('bus_0x_prefix', 'bus', with_info(pci_arq(), 'bus', '0x0c')),
    ('domain_0x_prefix', 'domain', with_info(pci_arq(), 'domain', '0x0c')),
    ('bus_too_big', 'bus', with_info(pci_arq(), 'bus', '100')),
    ('device_too_big', 'device', with_info(pci_arq(), 'device', '20')),
    ('function_too_big', 'function', with_info(pci_arq(), 'function', '8')),
    ('domain_five_digits', 'domain',
     with_info(pci_arq(), 'domain', '00000')),
    ('domain_missing', 'domain', with_info(pci_arq(), 'domain', _MISSING)),
    ('function_missing', 'function',
     with_info(pci_arq(), 'function', _MISSING)),
    ('bus_none', 'bus', with_info(pci_arq(), 'bus', None)),
    ('bus_int', 'bus', with_info(pci_arq(), 'bus', 12)),
    ('function_bool', 'function', with_info(pci_arq(), 'function', True)),
    ('domain_list', 'domain', with_info(pci_arq(), 'domain', ['0000'])),
    ('bus_arabic_digit', 'bus', with_info(pci_arq(), 'bus', '\u0661')),
    ('bus_fullwidth_digit', 'bus', with_info(pci_arq(), 'bus', '\uff11')),
    ('bus_space', 'bus', with_info(pci_arq(), 'bus', ' c')),
    ('bus_trailing_newline', 'bus', with_info(pci_arq(), 'bus', '0c\n')),
    ('bus_underscore', 'bus', with_info(pci_arq(), 'bus', '0_c')),
    ('bus_empty', 'bus', with_info(pci_arq(), 'bus', '')),
    ('domain_overlong', 'domain', with_info(pci_arq(), 'domain', _LONG)),
    ('extra_value_not_string', 'vgpu_mark',
     with_info(mdev_arq(), 'vgpu_mark', 3)),
    ('info_none', 'attach_handle_info',
     with_field(pci_arq(), 'attach_handle_info', None)),
    ('info_string', 'attach_handle_info',
     with_field(pci_arq(), 'attach_handle_info', 'domain=0000')),
    ('type_test_pci', 'attach_handle_type',
     with_field(pci_arq(), 'attach_handle_type', 'TEST_PCI')),
    ('type_lowercase', 'attach_handle_type',
     with_field(pci_arq(), 'attach_handle_type', 'pci')),
    ('type_int', 'attach_handle_type',
     with_field(pci_arq(), 'attach_handle_type', 1)),
    ('physnet_xml', 'physical_network',
     with_info(pci_arq(), 'physical_network', 'net"><x')),
    ('physnet_empty', 'physical_network',
     with_info(pci_arq(), 'physical_network', '')),
    ('managed_other', 'managed', with_info(pci_arq(), 'managed', 'false')),
    ('managed_markup', 'managed',
     with_info(pci_arq(), 'managed', "no'/><x")),
    ('managed_upper', 'managed', with_info(pci_arq(), 'managed', 'NO')),
    ('managed_mdev_no', 'managed', with_info(mdev_arq(), 'managed', 'no')),
    ('pci_handle_uuid_bad', 'attach_handle_uuid',
     with_field(pci_arq(), 'attach_handle_uuid', 'not-a-uuid')),
    ('mdev_uuid_missing', 'attach_handle_uuid',
     with_field(mdev_arq(), 'attach_handle_uuid', None)),
    ('mdev_uuid_empty', 'attach_handle_uuid',
     with_field(mdev_arq(), 'attach_handle_uuid', '')),
    ('mdev_uuid_upper', 'attach_handle_uuid',
     with_field(mdev_arq(), 'attach_handle_uuid', MDEV_UUID.upper())),
    ('mdev_uuid_no_dashes', 'attach_handle_uuid',
     with_field(mdev_arq(), 'attach_handle_uuid',
                MDEV_UUID.replace('-', ''))),
    ('mdev_uuid_path', 'attach_handle_uuid',
     with_field(mdev_arq(), 'attach_handle_uuid', '../../' + MDEV_UUID)),
    ('mdev_type_slash', 'asked_type',
     with_info(mdev_arq(), 'asked_type', 'nvidia/35')),
    ('mdev_type_dotdot', 'asked_type',
     with_info(mdev_arq(), 'asked_type', '..')),
    ('mdev_type_traversal', 'asked_type',
     with_info(mdev_arq(), 'asked_type', 'nvidia..35')),
    ('mdev_type_space', 'asked_type',
     with_info(mdev_arq(), 'asked_type', 'nvidia 35')),
    ('mdev_type_newline', 'asked_type',
     with_info(mdev_arq(), 'asked_type', 'nvidia-35\n')),
    ('mdev_type_leading_dash', 'asked_type',
     with_info(mdev_arq(), 'asked_type', '-nvidia')),
    ('mdev_type_overlong', 'asked_type',
     with_info(mdev_arq(), 'asked_type', 'a' * 65)),
    ('mdev_type_missing', 'asked_type',
     with_info(mdev_arq(), 'asked_type', _MISSING)),
    ('mdev_parent_bad', 'function',
     with_info(mdev_arq(), 'function', '9')),
    ('vfio_on_pci', 'vgpu_framework',
     with_field(vfio_arq(), 'attach_handle_type', 'PCI')),
    ('vfio_framework_other', 'vgpu_framework',
     with_info(vfio_arq(), 'vgpu_framework', 'mdev')),
    ('vfio_framework_markup', 'vgpu_framework',
     with_info(vfio_arq(), 'vgpu_framework', "vendor-vfio'/><x")),
    ('vfio_managed_yes', 'managed', with_info(vfio_arq(), 'managed', 'yes')),
    ('vfio_managed_missing', 'managed',
     with_info(vfio_arq(), 'managed', _MISSING)),
    ('vfio_type_markup', 'asked_type',
     with_info(vfio_arq(), 'asked_type', 'H100<x>')),
    ('vfio_type_newline', 'asked_type',
     with_info(vfio_arq(), 'asked_type', 'NVIDIA H100-4C\n')),
    ('vfio_type_dotdot', 'asked_type',
     with_info(vfio_arq(), 'asked_type', 'a/../b')),
    ('vfio_type_missing', 'asked_type',
     with_info(vfio_arq(), 'asked_type', _MISSING)),
    ('vfio_physnet', 'physical_network',
     with_info(vfio_arq(), 'physical_network', 'physnet1')),
    ('vfio_uuid_missing', 'attach_handle_uuid',
     with_field(vfio_arq(), 'attach_handle_uuid', None)),
    ('vfio_bus_xml', 'bus', with_info(vfio_arq(), 'bus', '81"/><x')),
    ('rp_uuid_bad', 'device_rp_uuid',
     with_field(pci_arq(), 'device_rp_uuid', 'x' * 36)),
    ('instance_uuid_bad', 'instance_uuid',
     with_field(pci_arq(), 'instance_uuid', 7)),
    ('group_id_string', 'device_profile_group_id',
     with_field(pci_arq(), 'device_profile_group_id', '0')),
    ('group_id_negative', 'device_profile_group_id',
     with_field(pci_arq(), 'device_profile_group_id', -1)),
    ('state_missing', 'state', with_field(pci_arq(), 'state', _MISSING)),
    ('hostname_overlong', 'hostname',
     with_field(pci_arq(), 'hostname', 'h' * 256)),
]


@ddt.ddt
class FromCyborgTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()

    def test_pci(self):
        arq = arq_obj.AcceleratorRequest.from_cyborg(pci_arq())
        self.assertEqual(ARQ_UUID, arq.uuid)
        self.assertEqual('Bound', arq.state)
        self.assertEqual('fpga-dp', arq.device_profile_name)
        self.assertEqual(0, arq.device_profile_group_id)
        self.assertEqual('compute-1', arq.hostname)
        self.assertEqual(RP_UUID, arq.device_rp_uuid)
        self.assertEqual(INSTANCE_UUID, arq.instance_uuid)
        self.assertEqual('PCI', arq.attach_type)
        handle = arq.attach_handle
        self.assertEqual(HANDLE_UUID, handle.uuid)
        self.assertIsNone(handle.mdev_type)
        self.assertIsNone(handle.physical_network)
        self.assertEqual((0, 0x0c, 0, 2), (
            handle.address.domain, handle.address.bus, handle.address.slot,
            handle.address.function))
        self.assertEqual('0000:0c:00.2', handle.address.bdf)
        self.assertEqual('pci_0000_0c_00_2', handle.address.libvirt_name)

    def test_pci_short_uppercase_digits_are_canonicalised(self):
        arq = arq_obj.AcceleratorRequest.from_cyborg(pci_arq(
            domain='A', bus='C', device='1F', function='7'))
        self.assertEqual('000a:0c:1f.7', arq.attach_handle.address.bdf)

    def test_pci_bounds_inclusive(self):
        arq = arq_obj.AcceleratorRequest.from_cyborg(pci_arq(
            domain='ffff', bus='ff', device='1f', function='7'))
        self.assertEqual('pci_ffff_ff_1f_7',
                         arq.attach_handle.address.libvirt_name)

    def test_pci_nic_physical_network(self):
        arq = arq_obj.AcceleratorRequest.from_cyborg(
            pci_arq(physical_network='physnet1'))
        self.assertEqual('physnet1', arq.attach_handle.physical_network)

    def test_pci_managed(self):
        self.assertEqual('yes', arq_obj.AcceleratorRequest.from_cyborg(
            pci_arq()).attach_handle.managed)
        for mode in ('yes', 'no'):
            arq = arq_obj.AcceleratorRequest.from_cyborg(pci_arq(
                managed=mode))
            self.assertEqual(mode, arq.attach_handle.managed)

    def test_vendor_vfio_vgpu_is_an_unmanaged_pci_function(self):
        # Cyborg holds it as MDEV (so that it asks the sidecar to set the
        # type at bind); to the guest it is the VF itself.
        handle = arq_obj.AcceleratorRequest.from_cyborg(
            vfio_arq()).attach_handle
        self.assertEqual(('PCI', 'no', '0000:81:00.3', HANDLE_UUID, None),
                         (handle.attach_type, handle.managed,
                          handle.address.bdf, handle.uuid,
                          handle.mdev_type))

    def test_managed_dropped_for_1_0(self):
        handle = arq_obj.AcceleratorRequest.from_cyborg(pci_arq(
            managed='no')).attach_handle
        primitive = handle.obj_to_primitive(target_version='1.0')
        self.assertNotIn('managed', primitive['versioned_object.data'])
        self.assertEqual('no', handle.obj_to_primitive()[
            'versioned_object.data']['managed'])

    def test_pci_without_handle_uuid(self):
        arq = arq_obj.AcceleratorRequest.from_cyborg(
            with_field(pci_arq(), 'attach_handle_uuid', None))
        self.assertIsNone(arq.attach_handle.uuid)

    def test_mdev(self):
        arq = arq_obj.AcceleratorRequest.from_cyborg(mdev_arq())
        handle = arq.attach_handle
        self.assertEqual('MDEV', handle.attach_type)
        self.assertEqual(MDEV_UUID, handle.uuid)
        self.assertEqual('nvidia-35', handle.mdev_type)
        self.assertEqual('pci_0000_0c_00_2', handle.address.libvirt_name)

    @ddt.data('nvidia-35', 'i915-GVTg_V5_4', 'mtty-2', 'a', 'x.y')
    def test_mdev_types_accepted(self, mdev_type):
        arq = arq_obj.AcceleratorRequest.from_cyborg(
            mdev_arq(asked_type=mdev_type))
        self.assertEqual(mdev_type, arq.attach_handle.mdev_type)

    def test_unbound_has_no_attach_handle(self):
        arq = pci_arq()
        arq.update(state='Initial', hostname=None, device_rp_uuid=None,
                   instance_uuid=None, attach_handle_type='',
                   attach_handle_uuid=None, attach_handle_info={})
        arq = arq_obj.AcceleratorRequest.from_cyborg(arq)
        self.assertIsNone(arq.attach_handle)
        self.assertIsNone(arq.attach_type)

    def test_unknown_info_keys_are_ignored(self):
        arq = arq_obj.AcceleratorRequest.from_cyborg(pci_arq(future='x'))
        self.assertEqual('0000:0c:00.2', arq.attach_handle.address.bdf)

    @ddt.named_data(*HOSTILE)
    def test_hostile(self, field, arq):
        exc = self.assertRaises(exception.InvalidAttachHandle,
                                arq_obj.AcceleratorRequest.from_cyborg, arq)
        message = str(exc)
        self.assertIn(ARQ_UUID, message)
        self.assertIn(field, message)
        # The hostile value shows only escaped and truncated.
        self.assertLess(len(message), 300)
        self.assertNotIn('<', message)
        self.assertNotIn('\n', message)

    @ddt.data(None, '', 'not-a-uuid', ARQ_UUID.upper(), 42,
              '<x>' + ARQ_UUID)
    def test_bad_arq_uuid(self, arq_uuid):
        arq = with_field(pci_arq(), 'uuid', arq_uuid)
        exc = self.assertRaises(exception.InvalidAttachHandle,
                                arq_obj.AcceleratorRequest.from_cyborg, arq)
        self.assertIn('uuid', str(exc))

    @ddt.data(None, [], 'arq', 1)
    def test_not_a_dict(self, arq):
        self.assertRaises(exception.InvalidAttachHandle,
                          arq_obj.AcceleratorRequest.from_cyborg, arq)

    def test_from_attach_handle_info_names_unknown_arq(self):
        exc = self.assertRaises(
            exception.InvalidAttachHandle,
            arq_obj.PCIAddress.from_attach_handle_info, {'domain': '0'})
        self.assertIn('bus', str(exc))


@ddt.ddt
class PCIAddressFieldTestCase(testtools.TestCase):
    """The fields refuse what the parser refuses, as a second guard."""

    @ddt.data(('bus', 0x100), ('slot', 0x20), ('function', 8),
              ('domain', -1), ('domain', 0x10000), ('bus', '0c'),
              ('bus', True), ('bus', 1.0))
    @ddt.unpack
    def test_out_of_bounds(self, field, value):
        address = arq_obj.PCIAddress(domain=0, bus=0, slot=0, function=0)
        self.assertRaises(ValueError, setattr, address, field, value)

    def test_round_trip_primitive(self):
        objects.register_all()
        arq = arq_obj.AcceleratorRequest.from_cyborg(mdev_arq())
        primitive = arq.obj_to_primitive()
        self.assertEqual('nova_cyborg',
                         primitive['versioned_object.namespace'])
        self.assertEqual(arq, arq_obj.AcceleratorRequest.obj_from_primitive(
            primitive))


class ObjectVersionTestCase(testtools.TestCase):

    # Change a fingerprint only with a version bump (and, for an older
    # version still in use, obj_make_compatible).
    EXPECTED = {
        'NovaCyborgAcceleratorRequest':
            '1.0-f6e8be359e6f792ed4610f37b3252936',
        'NovaCyborgAttachHandle': '1.1-3172d0767b6f315c1f2b2742350784fe',
        'NovaCyborgPCIAddress': '1.0-f48a6c70ffc4a64216d7cc4df4512ee4',
    }

    def setUp(self):
        super().setUp()
        objects.register_all()

    def test_versions(self):
        checker = ovo_fixture.ObjectVersionChecker(
            base.NovaCyborgObjectRegistry.project_classes())
        expected, actual = checker.test_hashes(self.EXPECTED)
        self.assertEqual(expected, actual,
                         'Object fingerprints changed; bump the version')

    def test_registered_as_module_attributes(self):
        self.assertIs(arq_obj.AcceleratorRequest, objects.AcceleratorRequest)
        self.assertIs(arq_obj.AttachHandle, objects.AttachHandle)
        self.assertIs(arq_obj.PCIAddress, objects.PCIAddress)

    def test_names_do_not_collide_with_cyborg(self):
        # Cyborg registers its own AttachHandle 1.0 in the same global
        # oslo.versionedobjects registry.
        self.assertEqual('NovaCyborgAttachHandle',
                         arq_obj.AttachHandle.obj_name())

    def test_attach_types_match_config_choices(self):
        self.assertEqual(conf_nova_cyborg.ATTACH_TYPES, arq_obj.ATTACH_TYPES)
