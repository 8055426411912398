"""FPGA functions: what a device profile group asks of a card, and whether
a card's function trait names it.

One place for the rules cyborg-conductor 17 applies when it programs a
card (``FPGAExtARQ``): a group asks a function by ``accel:function_id``, or
by ``accel:bitstream_id`` (the function is the ``accel:function_id``
property of that Glance image), or by requiring a
``CUSTOM_FPGA_FUNCTION_ID_<DRIVER>_<FUNCTION>`` trait, the trait the
sidecar keeps on each FPGA provider for what the card holds. Used by the
scheduler's weigher (:mod:`nova_cyborg.weigher`) and by nova-compute's
check before a guest starts (:mod:`nova_cyborg.steps.function_check`).
"""

DP_EXTRA_SPEC = 'accel:device_profile'
BITSTREAM_KEY = 'accel:bitstream_id'
FUNCTION_KEY = 'accel:function_id'
TRAIT_PREFIX = 'CUSTOM_FPGA_FUNCTION_ID_'
TRAIT_KEY_PREFIX = 'trait:' + TRAIT_PREFIX


class NoFunction(Exception):
    """A bitstream image names no function."""


def function_of_image(context, image_id):
    """The ``accel:function_id`` of bitstream image ``image_id``, read
    through Nova's image API as ``context``.

    :raises: whatever Nova's image API raises; :class:`NoFunction` when
        the image has no usable ``accel:function_id``.
    """
    from nova.image import glance
    image = glance.API().get(context, image_id)
    function_id = ((image or {}).get('properties') or {}).get(FUNCTION_KEY)
    if not function_id or not isinstance(function_id, str):
        raise NoFunction('bitstream %s names no %s' % (image_id,
                                                       FUNCTION_KEY))
    return function_id


def ask(group):
    """What device profile group ``group`` asks of a card.

    :returns: ('bitstream', IMAGE_ID), ('function', FUNCTION_ID) or
        ('trait', TRAIT), in the precedence cyborg-conductor programs by;
        None when it asks no function.
    """
    if not isinstance(group, dict):
        return None
    if group.get(BITSTREAM_KEY):
        return ('bitstream', str(group[BITSTREAM_KEY]))
    if group.get(FUNCTION_KEY):
        return ('function', str(group[FUNCTION_KEY]))
    traits = required_function_traits(group)
    return ('trait', traits[0]) if traits else None


def required_function_traits(group):
    """The function traits a device profile group requires, sorted."""
    return sorted(key[len('trait:'):] for key, value in group.items()
                  if key.startswith(TRAIT_KEY_PREFIX) and
                  value == 'required')


def names(trait, function_id):
    """Whether function trait ``trait`` names ``function_id`` (any
    driver)."""
    return (trait.startswith(TRAIT_PREFIX) and
            trait.endswith('_' + function_id.upper()))
