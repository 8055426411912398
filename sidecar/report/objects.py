"""The agent -> conductor wire objects of openstack-cyborg 17.0.0.

cyborg-conductor's ``report_data`` deserializes ``cyborg_object.*``
primitives by object name and version, so these classes carry Cyborg's
names, namespaces, versions and field types exactly (their fingerprints are
pinned against Cyborg's in the unit tests). They are our own classes in our
own registry: a compute host running the sidecar does not install Cyborg.
"""

import collections

from oslo_serialization import jsonutils
from oslo_utils import versionutils
from oslo_versionedobjects import base
from oslo_versionedobjects import exception
from oslo_versionedobjects import fields

# cyborg.common.constants.DEVICE_TYPE and DEVICE_STATES in 17.0.0.
DEVICE_TYPES = ('GPU', 'FPGA', 'AICHIP', 'QAT', 'NIC', 'SSD', 'MDEV', 'PCI',
                'NVME')
DEVICE_STATES = ('available', 'allocated', 'pending_cleaning', 'cleaning',
                 'error')

#: The device types each ``DriverDevice`` version added, from Cyborg 17's
#: version history and ``obj_make_compatible``
#: (cyborg/objects/driver_objects/driver_device.py): 1.1 AICHIP, 1.2 MDEV
#: and PCI, 1.3 NVME; 1.4 added the ``device_state`` field. Cyborg 16.0.1's
#: ``DriverDevice`` is 1.0 and its enum (cyborg.common.constants
#: DEVICE_TYPE) also holds AICHIP, added there without a version bump; as
#: Cyborg 17 does, a backport to 1.0 leaves AICHIP out.
TYPES_ADDED = (
    ('1.1', ('AICHIP',)),
    ('1.2', ('MDEV', 'PCI')),
    ('1.3', ('NVME',)),
)

#: The type a device goes as to a conductor whose ``DriverDevice``
#: version lacks its own, where that release's agent reports such devices
#: as another type: Cyborg 16.0.1's generic PCI driver (and 17.0.0's,
#: cyborg/accelerator/drivers/pci/pci/sysinfo.py ``_generate_driver_device``)
#: reports every device it passes through as ``GPU``. cyborg-conductor
#: finds a device by its control path and saves a changed type in place
#: (``drv_device_make_diff``), so raising the pin later turns the device
#: into ``PCI`` without touching its deployables, providers or ARQs.
OLDER_TYPES = {'PCI': 'GPU'}

#: The ``DriverDevice`` version each release's cyborg-conductor takes.
RELEASES = {
    '2026.1': '1.0',   # Cyborg 16.0.x
    '2026.2': '1.4',   # Cyborg 17.0.x
}

#: The release each openstack-cyborg major version is part of.
CYBORG_RELEASES = {16: '2026.1', 17: '2026.2'}

#: What ``[upgrade_levels] cyborg_conductor`` accepts.
PIN_CHOICES = tuple(RELEASES) + ('1.0', '1.1', '1.2', '1.3', '1.4')


def device_types(version):
    """The device types ``DriverDevice`` ``version`` knows."""
    target = versionutils.convert_version_to_tuple(version)
    added = {t for since, types in TYPES_ADDED for t in types
             if versionutils.convert_version_to_tuple(since) > target}
    return tuple(t for t in DEVICE_TYPES if t not in added)


def wire_type(dev_type, version):
    """The type a device of ``dev_type`` is sent as in ``DriverDevice``
    ``version``: its own, the older type of :data:`OLDER_TYPES`, or None
    (left out of the report)."""
    known = device_types(version)
    for candidate in (dev_type, OLDER_TYPES.get(dev_type)):
        if candidate in known:
            return candidate
    return None


def conductor_pin(cyborg_version):
    """``[upgrade_levels] cyborg_conductor`` for a sidecar beside the
    cyborg-conductor of openstack-cyborg ``cyborg_version``: its release
    when that reads an older ``DriverDevice`` than the latest, else None
    (no pin)."""
    major = int(cyborg_version.split('.')[0])
    if major not in CYBORG_RELEASES:
        raise ValueError('openstack-cyborg %s: the sidecar reports to '
                         'Cyborg %s' % (cyborg_version, ' or '.join(
                             str(m) for m in sorted(CYBORG_RELEASES))))
    release = CYBORG_RELEASES[major]
    return None if RELEASES[release] == DriverDevice.VERSION else release


def target_version(pin):
    """The ``DriverDevice`` version to send for a pin (a release name or
    an object version); None means the latest."""
    if not pin:
        return DriverDevice.VERSION
    if pin not in PIN_CHOICES:
        raise ValueError('cyborg-conductor pin %r is neither a release (%s) '
                         'nor a DriverDevice version (1.0 to %s)'
                         % (pin, ', '.join(RELEASES), DriverDevice.VERSION))
    return RELEASES.get(pin, pin)


class WireObjectRegistry(base.VersionedObjectRegistry):
    """The sidecar's own table of wire classes.

    oslo.versionedobjects gives every registry one table per process
    (``VersionedObjectRegistry.__new__``), and a class registered under a
    name and version already there replaces the one there: where Cyborg's
    objects are loaded too (a process that imports both, such as a test
    harness or a tool beside cyborg-conductor), these classes, which
    cannot ``create`` or ``destroy``, would replace Cyborg's
    ``DriverDevice``, ``DriverControlPathID``... and its conductor would
    fail on every report. So this registry keeps a table of its own, and
    :meth:`WireObject.obj_class_from_name` reads it.
    """

    _classes = collections.defaultdict(list)

    def __new__(cls, *args, **kwargs):
        self = object.__new__(cls)
        self._obj_classes = WireObjectRegistry._classes
        return self


class WireObject(base.VersionedObject):
    OBJ_SERIAL_NAMESPACE = 'cyborg_object'
    OBJ_PROJECT_NAMESPACE = 'cyborg'

    @classmethod
    def obj_class_from_name(cls, objname, objver):
        """The wire class of ``objname`` for ``objver``, from
        :class:`WireObjectRegistry`'s table: the exact version, else the
        newest compatible one (as oslo.versionedobjects chooses)."""
        classes = WireObjectRegistry.obj_classes().get(objname)
        if not classes:
            raise exception.UnsupportedObjectError(objtype=objname)
        for objclass in classes:
            if objclass.VERSION == objver:
                return objclass
        for objclass in classes:    # newest first
            if versionutils.is_compatible(objver, objclass.VERSION):
                return objclass
        raise exception.IncompatibleObjectVersion(
            objname=objname, objver=objver, supported=classes[0].VERSION)

    fields = {
        'created_at': fields.DateTimeField(nullable=True),
        'updated_at': fields.DateTimeField(nullable=True),
    }


class DeviceTypeField(fields.AutoTypedField):
    AUTO_TYPE = fields.Enum(valid_values=DEVICE_TYPES)


@WireObjectRegistry.register
class DriverAttribute(WireObject, base.VersionedObjectDictCompat):
    VERSION = '1.0'
    fields = {
        'key': fields.StringField(nullable=False),
        'value': fields.StringField(nullable=False),
    }


@WireObjectRegistry.register
class DriverAttachHandle(WireObject, base.VersionedObjectDictCompat):
    VERSION = '1.0'
    fields = {
        'attach_type': fields.StringField(nullable=False),
        'attach_info': fields.StringField(nullable=False),
        'in_use': fields.BooleanField(nullable=False, default=False),
    }


@WireObjectRegistry.register
class DriverControlPathID(WireObject, base.VersionedObjectDictCompat):
    VERSION = '1.0'
    fields = {
        'cpid_type': fields.StringField(nullable=False),
        'cpid_info': fields.StringField(nullable=False),
    }


@WireObjectRegistry.register
class DriverDeployable(WireObject, base.VersionedObjectDictCompat):
    VERSION = '1.0'
    fields = {
        'name': fields.StringField(nullable=False),
        'num_accelerators': fields.IntegerField(nullable=False),
        'attribute_list': fields.ListOfObjectsField(
            'DriverAttribute', default=[], nullable=True),
        'attach_handle_list': fields.ListOfObjectsField(
            'DriverAttachHandle', default=[], nullable=True),
        'driver_name': fields.StringField(nullable=True),
    }


@WireObjectRegistry.register
class DriverDevice(WireObject, base.VersionedObjectDictCompat):
    VERSION = '1.4'
    fields = {
        'vendor': fields.StringField(nullable=False),
        'model': fields.StringField(nullable=False),
        'type': DeviceTypeField(nullable=False),
        'std_board_info': fields.StringField(nullable=True),
        'vendor_board_info': fields.StringField(nullable=True),
        'controlpath_id': fields.ObjectField(
            'DriverControlPathID', nullable=False),
        'deployable_list': fields.ListOfObjectsField(
            'DriverDeployable', default=[], nullable=False),
        'stub': fields.BooleanField(nullable=False, default=False),
        'device_state': fields.EnumField(
            valid_values=DEVICE_STATES, nullable=True),
    }

    def obj_make_compatible(self, primitive, target_version):
        """Cyborg 17's backport: ``device_state`` goes below 1.4. A type
        the target does not know goes as the older release's type for
        such devices (:data:`OLDER_TYPES`), or is refused (leave such a
        device out of the report:
        :meth:`sidecar.report.reporter.Reporter.sendable`)."""
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 4):
            primitive.pop('device_state', None)
        sent_as = wire_type(primitive.get('type'), target_version)
        if sent_as is None:
            raise exception.ObjectActionError(
                action='obj_make_compatible',
                reason='type=%s not supported in version %s'
                % (primitive.get('type'), target_version))
        primitive['type'] = sent_as


def version_manifest(version):
    """The manifest that backports a ``DriverDevice`` to ``version``: its
    children are 1.0 in every release (without a manifest, a backport of
    a ``DriverDevice`` with children fails: it has no obj_relationships,
    in Cyborg 17 either)."""
    return {'DriverDevice': version, 'DriverControlPathID': '1.0',
            'DriverDeployable': '1.0', 'DriverAttribute': '1.0',
            'DriverAttachHandle': '1.0'}


def to_primitives(wire_devices, version):
    """``DriverDevice`` objects as the primitives ``version`` reads."""
    manifest = version_manifest(version)
    return [device.obj_to_primitive(target_version=version,
                                    version_manifest=manifest)
            for device in wire_devices]


class WireSerializer(base.VersionedObjectSerializer):
    OBJ_BASE_CLASS = WireObject


def dumps_sorted(value):
    """JSON the way Cyborg's drivers write cpid_info and attach_info."""
    return jsonutils.dumps(value, sort_keys=True)
