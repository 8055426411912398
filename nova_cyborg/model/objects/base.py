"""Base classes and field types of nova_cyborg's versioned objects."""

from oslo_utils import versionutils
from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import fields

from nova_cyborg.i18n import _

NAMESPACE = 'nova_cyborg'

#: Prefix of every registered object name. oslo.versionedobjects keeps a
#: single process-wide registry keyed by the bare object name, and Cyborg
#: registers an ``AttachHandle`` 1.0 of its own: in a process that loads both
#: (a test, the sidecar) the later registration would silently replace the
#: earlier one. The prefix keeps the two apart.
OBJ_NAME_PREFIX = 'NovaCyborg'


class NovaCyborgObjectRegistry(ovo_base.VersionedObjectRegistry):
    """Registers nova_cyborg objects as
    ``nova_cyborg.model.objects.<Class>``."""

    def registration_hook(self, cls, index):
        from nova_cyborg.model import objects

        name = cls.__name__
        current = getattr(objects, name, None)
        if current is None or (
                versionutils.convert_version_to_tuple(cls.VERSION) >=
                versionutils.convert_version_to_tuple(current.VERSION)):
            setattr(objects, name, cls)

    @classmethod
    def project_classes(cls):
        """The registered classes of this project, by object name.

        ``obj_classes()`` is shared with every other project loaded in the
        process (Nova, os-vif, Cyborg); this is the part that is ours.
        """
        return {name: classes
                for name, classes in cls.obj_classes().items()
                if classes[0].OBJ_PROJECT_NAMESPACE == NAMESPACE}


def _comparable(primitive):
    """A primitive whose change lists do not depend on set order."""
    if isinstance(primitive, dict):
        return {key: (sorted(value) if key.endswith('.changes')
                      else _comparable(value))
                for key, value in primitive.items()}
    if isinstance(primitive, list):
        return [_comparable(value) for value in primitive]
    return primitive


class NovaCyborgObject(ovo_base.VersionedObject,
                       ovo_base.ComparableVersionedObject):
    """Base of every nova_cyborg object."""

    OBJ_PROJECT_NAMESPACE = NAMESPACE

    def __eq__(self, other):
        # ComparableVersionedObject compares whole primitives, whose
        # 'changes' lists come from a set: equal objects could compare
        # unequal depending on the hash seed.
        if not isinstance(other, ovo_base.VersionedObject):
            return NotImplemented
        return (_comparable(self.obj_to_primitive()) ==
                _comparable(other.obj_to_primitive()))

    __hash__ = None

    @classmethod
    def obj_name(cls):
        return OBJ_NAME_PREFIX + cls.__name__


class BoundedInteger(fields.Integer):
    """An int (never a bool, never a string) within inclusive bounds."""

    def __init__(self, minimum, maximum):
        super().__init__()
        self.minimum = minimum
        self.maximum = maximum

    def coerce(self, obj, attr, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(_('%(attr)s must be an integer, not %(type)s')
                             % {'attr': attr, 'type': type(value).__name__})
        if not self.minimum <= value <= self.maximum:
            raise ValueError(_('%(attr)s must be between %(min)d and '
                               '%(max)d, not %(value)d')
                             % {'attr': attr, 'min': self.minimum,
                                'max': self.maximum, 'value': value})
        return value


class BoundedIntegerField(fields.AutoTypedField):
    """Field of a :class:`BoundedInteger`; the bounds are in its repr.

    The repr feeds the object fingerprint, so changing a bound forces a
    version bump.
    """

    def __init__(self, minimum, maximum, **kwargs):
        self.AUTO_TYPE = BoundedInteger(minimum, maximum)
        super().__init__(**kwargs)

    def __repr__(self):
        return '%s(min=%d,max=%d,default=%s,nullable=%s)' % (
            self._type.__class__.__name__, self._type.minimum,
            self._type.maximum, self._default, self._nullable)
