"""Hooks of ``nova.api.validation.extra_specs.accel`` (patch 0012).

Importing nothing but constants: the extra spec validators load early.
"""

# A profile name has no whitespace or comma in Cyborg; an empty value would
# silently drop the accelerators. Used as the validator's ``pattern`` of
# ``accel:device_profile``.
DEVICE_PROFILE_PATTERN = r'[^\s,]+'
