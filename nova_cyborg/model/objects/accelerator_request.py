"""Accelerator requests (ARQs) as nova_cyborg accepts them from Cyborg.

Cyborg returns an ARQ as a JSON dict whose ``attach_handle_info`` is a dict
of strings written by whatever reported the device. None of it is trusted:
:meth:`AcceleratorRequest.from_cyborg` is the only way in, and it either
returns an object whose every field has been parsed into a bounded value or
raises :class:`~nova_cyborg.exception.InvalidAttachHandle`. Code that builds
domain XML or touches sysfs reads these objects, never the raw dict.
"""

import re

from oslo_utils import versionutils
from oslo_versionedobjects import fields

from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model.objects import base

ATTACH_TYPE_PCI = 'PCI'
ATTACH_TYPE_MDEV = 'MDEV'
ATTACH_TYPES = (ATTACH_TYPE_PCI, ATTACH_TYPE_MDEV)
#: libvirt's ``<hostdev managed=...>`` modes: 'yes' (libvirt detaches the
#: function from its host driver and binds it to vfio), 'no' (it must
#: already be usable by VFIO: an NVIDIA vGPU 17 VF stays on ``nvidia``).
MANAGED_MODES = ('yes', 'no')
#: attach_handle_info of an NVIDIA vGPU 17 VF whose type the sidecar sets
#: at bind: Cyborg holds it as an MDEV handle (so that cyborg-conductor 17
#: asks the sidecar to set the type), with ``vgpu_framework`` this value
#: and ``managed`` 'no'. It is the VF itself, passed through as a PCI
#: function with ``managed='no'`` (libvirt must leave it on ``nvidia``).
VGPU_FRAMEWORK_KEY = 'vgpu_framework'
VENDOR_VFIO = 'vendor-vfio'

#: attach_handle_info key, PCIAddress field, at most this many hex digits,
#: largest value. Hex digits only: no ``0x`` prefix, sign, space or
#: non-ASCII digit (Cyborg writes ``0000``, ``0c``, ``00``, ``2``).
_PCI_PARTS = (
    ('domain', 'domain', 4, 0xffff),
    ('bus', 'bus', 2, 0xff),
    ('device', 'slot', 2, 0x1f),
    ('function', 'function', 1, 0x7),
)
_HEX = {digits: re.compile('[0-9a-fA-F]{1,%d}' % digits)
        for digits in (1, 2, 4)}
_UUID = re.compile('[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                   '[0-9a-f]{12}')
#: mdev types (``nvidia-35``, ``i915-GVTg_V5_4``) and physical networks.
_NAME = re.compile('[A-Za-z0-9][A-Za-z0-9_.-]{0,63}')
#: vGPU 17 type names, as NVIDIA's creatable_vgpu_types lists them
#: (``NVIDIA H100-4C``); never written into XML.
_VGPU_TYPE_NAME = re.compile('[A-Za-z0-9][A-Za-z0-9 ._()+/-]{0,63}')
_MAX_TEXT = 255


_MARKUP = str.maketrans({'<': '\\x3c', '>': '\\x3e', '&': '\\x26'})


def _show(value, limit=40):
    """A short, escaped rendering of an untrusted value for a message.

    ``ascii()`` escapes control and non-ASCII characters; markup characters
    are escaped the same way, so the message is safe in XML and HTML.
    """
    text = ascii(value).translate(_MARKUP)
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _invalid(arq, reason):
    return exception.InvalidAttachHandle(arq=arq, reason=reason)


def _is_uuid(value):
    return isinstance(value, str) and _UUID.fullmatch(value) is not None


def _is_name(value):
    return (isinstance(value, str) and _NAME.fullmatch(value) is not None
            and '..' not in value)


@base.NovaCyborgObjectRegistry.register
class PCIAddress(base.NovaCyborgObject):
    """The address of a PCI function on the compute host."""

    # Version 1.0: Initial release
    VERSION = '1.0'

    fields = {
        #: PCI domain (segment), 0 to 0xffff.
        'domain': base.BoundedIntegerField(0, 0xffff),
        #: Bus number, 0 to 0xff.
        'bus': base.BoundedIntegerField(0, 0xff),
        #: Device (slot) number, 0 to 0x1f.
        'slot': base.BoundedIntegerField(0, 0x1f),
        #: Function number, 0 to 7.
        'function': base.BoundedIntegerField(0, 0x7),
    }

    @classmethod
    def from_attach_handle_info(cls, info, arq='unknown'):
        """Parse ``domain``, ``bus``, ``device``, ``function`` strictly.

        :param info: Cyborg's attach_handle_info dict.
        :param arq: how to name the ARQ in an error message.
        :raises: InvalidAttachHandle naming the ARQ and the field.
        """
        if not isinstance(info, dict):
            raise _invalid(arq, _('attach_handle_info is %s, not a dict')
                           % type(info).__name__)
        values = {}
        for key, field, digits, maximum in _PCI_PARTS:
            if key not in info:
                raise _invalid(arq, _('attach_handle_info has no %s') % key)
            text = info[key]
            if not isinstance(text, str) or not _HEX[digits].fullmatch(text):
                raise _invalid(arq, _(
                    'attach_handle_info %(key)s must be 1 to %(n)d hex '
                    'digits, not %(value)s') % {
                        'key': key, 'n': digits, 'value': _show(text)})
            value = int(text, 16)
            if value > maximum:
                raise _invalid(arq, _(
                    'attach_handle_info %(key)s 0x%(value)x is above '
                    '0x%(max)x') % {'key': key, 'value': value,
                                    'max': maximum})
            values[field] = value
        return cls(**values)

    @property
    def hex_parts(self):
        """Zero-padded lowercase hex strings (domain, bus, slot, function)."""
        return ('%04x' % self.domain, '%02x' % self.bus,
                '%02x' % self.slot, '%x' % self.function)

    @property
    def bdf(self):
        """The address as Linux writes it, e.g. ``0000:0c:00.2``."""
        return '%s:%s:%s.%s' % self.hex_parts

    @property
    def libvirt_name(self):
        """The libvirt node device name, e.g. ``pci_0000_0c_00_2``."""
        return 'pci_%s_%s_%s_%s' % self.hex_parts


@base.NovaCyborgObjectRegistry.register
class AttachHandle(base.NovaCyborgObject):
    """How an ARQ's device reaches the guest."""

    # Version 1.0: Initial release
    # Version 1.1: Added managed
    VERSION = '1.1'

    fields = {
        #: ``PCI``: the function is passed through as a ``<hostdev>``;
        #: ``MDEV``: a mediated device is created on it and passed through.
        'attach_type': fields.EnumField(valid_values=ATTACH_TYPES),
        #: Cyborg's attach handle UUID; for MDEV the mediated device's UUID.
        'uuid': fields.UUIDField(nullable=True),
        #: The PCI function (PCI) or the parent device of the mdev (MDEV).
        'address': fields.ObjectField(base.OBJ_NAME_PREFIX + 'PCIAddress'),
        #: mdev type to create, e.g. ``nvidia-35``; MDEV only.
        'mdev_type': fields.StringField(nullable=True),
        #: Neutron physical network of a NIC function; PCI only, optional.
        'physical_network': fields.StringField(nullable=True),
        #: ``<hostdev managed=...>`` of a PCI handle (attach_handle_info
        #: ``managed``, default 'yes'); always 'yes' for MDEV.
        'managed': fields.EnumField(valid_values=MANAGED_MODES,
                                    default='yes'),
    }

    #: Each version of this object -> the PCIAddress version it holds.
    obj_relationships = {'address': [('1.0', '1.0'), ('1.1', '1.0')]}

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        if versionutils.convert_version_to_tuple(target_version) < (1, 1):
            primitive.pop('managed', None)

    @classmethod
    def from_cyborg(cls, arq, arq_id):
        """Parse the attach handle fields of an ARQ dict, or None if unset.

        :raises: InvalidAttachHandle naming ``arq_id`` and the field.
        """
        attach_type = arq.get('attach_handle_type')
        if attach_type in (None, ''):
            return None
        if attach_type not in ATTACH_TYPES:
            raise _invalid(arq_id, _('attach_handle_type %s is not '
                                     'supported') % _show(attach_type))
        info = arq.get('attach_handle_info')
        address = PCIAddress.from_attach_handle_info(info, arq=arq_id)
        for key, value in info.items():
            if not isinstance(value, str):
                raise _invalid(arq_id, _(
                    'attach_handle_info %(key)s is %(type)s, not a string')
                    % {'key': _show(key), 'type': type(value).__name__})
        handle_uuid = arq.get('attach_handle_uuid')
        if handle_uuid in (None, '') and attach_type == ATTACH_TYPE_PCI:
            handle_uuid = None
        elif not _is_uuid(handle_uuid):
            raise _invalid(arq_id, _('attach_handle_uuid %s is not a '
                                     'canonical UUID') % _show(handle_uuid))
        if VGPU_FRAMEWORK_KEY in info:
            return cls._vendor_vfio(info, arq_id, attach_type, address,
                                    handle_uuid)
        mdev_type = physnet = None
        if attach_type == ATTACH_TYPE_MDEV:
            mdev_type = info.get('asked_type')
            if not _is_name(mdev_type):
                raise _invalid(arq_id, _('attach_handle_info asked_type %s '
                                         'is not an mdev type')
                               % _show(mdev_type))
        elif info.get('physical_network') is not None:
            physnet = info['physical_network']
            if not _is_name(physnet):
                raise _invalid(arq_id, _('attach_handle_info '
                                         'physical_network %s is not a '
                                         'physical network name')
                               % _show(physnet))
        managed = info.get('managed', 'yes')
        if managed not in MANAGED_MODES or (
                attach_type == ATTACH_TYPE_MDEV and managed != 'yes'):
            raise _invalid(arq_id, _('attach_handle_info managed %s is not '
                                     'yes or no (PCI only)')
                           % _show(managed))
        return cls(attach_type=attach_type, uuid=handle_uuid,
                   address=address, mdev_type=mdev_type,
                   physical_network=physnet, managed=managed)

    @classmethod
    def _vendor_vfio(cls, info, arq_id, attach_type, address, handle_uuid):
        """A vGPU 17 VF's vendor-VFIO handle (:data:`VENDOR_VFIO`): the PCI
        function at its address, ``managed='no'``; anything else marked
        so is refused."""
        framework = info[VGPU_FRAMEWORK_KEY]
        if framework != VENDOR_VFIO or attach_type != ATTACH_TYPE_MDEV:
            raise _invalid(arq_id, _(
                'attach_handle_info vgpu_framework %(value)s is not %(ok)s '
                'on an MDEV handle') % {'value': _show(framework),
                                        'ok': VENDOR_VFIO})
        if info.get('managed') != 'no':
            raise _invalid(arq_id, _(
                'attach_handle_info managed %s must be no for a '
                'vendor-VFIO vGPU') % _show(info.get('managed')))
        name = info.get('asked_type')
        if (not isinstance(name, str) or
                not _VGPU_TYPE_NAME.fullmatch(name) or '..' in name):
            raise _invalid(arq_id, _('attach_handle_info asked_type %s is '
                                     'not a vGPU type name') % _show(name))
        unknown = sorted(set(info) - {
            'domain', 'bus', 'device', 'function', 'asked_type',
            'vgpu_mark', 'managed', VGPU_FRAMEWORK_KEY})
        if unknown:
            raise _invalid(arq_id, _('attach_handle_info %s is not a key '
                                     'of a vendor-VFIO vGPU')
                           % _show(unknown[0]))
        return cls(attach_type=ATTACH_TYPE_PCI, uuid=handle_uuid,
                   address=address, mdev_type=None, physical_network=None,
                   managed='no')


@base.NovaCyborgObjectRegistry.register
class AcceleratorRequest(base.NovaCyborgObject):
    """A Cyborg accelerator request (ARQ), validated."""

    # Version 1.0: Initial release
    VERSION = '1.0'

    fields = {
        #: UUID of the ARQ in Cyborg.
        'uuid': fields.UUIDField(),
        #: Cyborg's state: Initial, BindStarted, Bound, BindFailed, ...
        'state': fields.StringField(),
        #: Name of the device profile the ARQ was created from.
        'device_profile_name': fields.StringField(),
        #: Index of the device profile group the ARQ belongs to.
        'device_profile_group_id': fields.NonNegativeIntegerField(),
        #: Compute host the ARQ is bound to, if bound.
        'hostname': fields.StringField(nullable=True),
        #: Resource provider of the device, if bound.
        'device_rp_uuid': fields.UUIDField(nullable=True),
        #: Instance the ARQ is bound to, if bound.
        'instance_uuid': fields.UUIDField(nullable=True),
        #: How the device reaches the guest; None until Cyborg binds it.
        'attach_handle': fields.ObjectField(
            base.OBJ_NAME_PREFIX + 'AttachHandle', nullable=True),
    }

    @classmethod
    def from_cyborg(cls, arq):
        """Validate an ARQ dict from Cyborg's REST API.

        :raises: InvalidAttachHandle naming the ARQ and the bad field; the
            offending value appears only escaped and truncated.
        """
        if not isinstance(arq, dict):
            raise _invalid(_show(arq), _('an ARQ must be a dict, not %s')
                           % type(arq).__name__)
        arq_id = arq.get('uuid')
        if not _is_uuid(arq_id):
            raise _invalid(_show(arq_id), _('uuid is not a canonical UUID'))

        def text(key, nullable=False):
            value = arq.get(key)
            if value is None and nullable:
                return None
            if not isinstance(value, str) or len(value) > _MAX_TEXT:
                raise _invalid(arq_id, _('%(key)s %(value)s is not a string '
                                         'of at most %(max)d characters')
                               % {'key': key, 'value': _show(value),
                                  'max': _MAX_TEXT})
            return value

        def uuid(key):
            value = arq.get(key)
            if value is not None and not _is_uuid(value):
                raise _invalid(arq_id, _('%(key)s %(value)s is not a '
                                         'canonical UUID')
                               % {'key': key, 'value': _show(value)})
            return value

        group_id = arq.get('device_profile_group_id')
        if (isinstance(group_id, bool) or not isinstance(group_id, int) or
                group_id < 0):
            raise _invalid(arq_id, _('device_profile_group_id %s is not a '
                                     'non-negative integer')
                           % _show(group_id))
        return cls(uuid=arq_id, state=text('state'),
                   device_profile_name=text('device_profile_name'),
                   device_profile_group_id=group_id,
                   hostname=text('hostname', nullable=True),
                   device_rp_uuid=uuid('device_rp_uuid'),
                   instance_uuid=uuid('instance_uuid'),
                   attach_handle=AttachHandle.from_cyborg(arq, arq_id))

    @property
    def attach_type(self):
        """``PCI``, ``MDEV``, or None while there is no attach handle."""
        return self.attach_handle.attach_type if self.attach_handle else None
