"""Hooks of ``nova.compute.resource_tracker`` (patch 0013).

Separate from :mod:`nova_cyborg.hooks.compute`: the resource tracker is
imported by ``nova.compute.manager`` and needs only the trait.
"""

from nova_cyborg.model import capability


def report_traits(traits):
    """Called by ``ResourceTracker._get_traits()`` with the traits of the
    compute node provider, beside upstream's ``COMPUTE_NODE``.

    Adds the traits saying which nova-cyborg capability versions this
    compute serves (``CUSTOM_NOVA_CYBORG_1_0``, ``CUSTOM_NOVA_CYBORG_1_1``:
    ``nova_cyborg.model.capability.VERSIONS``); a patched and an unpatched
    nova-compute report the same service version. Only when the virt
    driver supports accelerators (``COMPUTE_ACCELERATORS``, which the
    resource tracker set from its capabilities just before): an ironic
    node reports none.

    :param traits: the set of trait names the resource tracker syncs to
        Placement; changed in place.
    """
    capability.report(traits)
