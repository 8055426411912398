"""The agent -> conductor wire objects of openstack-cyborg 17.0.0.

cyborg-conductor's ``report_data`` deserializes ``cyborg_object.*``
primitives by object name and version, so these classes carry Cyborg's
names, namespaces, versions and field types exactly (their fingerprints are
pinned against Cyborg's in the unit tests). They are our own classes in our
own registry: a compute host running the sidecar does not install Cyborg.
"""

from oslo_serialization import jsonutils
from oslo_versionedobjects import base
from oslo_versionedobjects import fields

# cyborg.common.constants.DEVICE_TYPE and DEVICE_STATES in 17.0.0.
DEVICE_TYPES = ('GPU', 'FPGA', 'AICHIP', 'QAT', 'NIC', 'SSD', 'MDEV', 'PCI',
                'NVME')
DEVICE_STATES = ('available', 'allocated', 'pending_cleaning', 'cleaning',
                 'error')


class WireObjectRegistry(base.VersionedObjectRegistry):
    pass


class WireObject(base.VersionedObject):
    OBJ_SERIAL_NAMESPACE = 'cyborg_object'
    OBJ_PROJECT_NAMESPACE = 'cyborg'

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


class WireSerializer(base.VersionedObjectSerializer):
    OBJ_BASE_CLASS = WireObject


def dumps_sorted(value):
    """JSON the way Cyborg's drivers write cpid_info and attach_info."""
    return jsonutils.dumps(value, sort_keys=True)
