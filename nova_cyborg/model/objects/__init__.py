"""Versioned objects of nova_cyborg.

Importing this package registers nothing; call :func:`register_all` once at
start-up (or in a test's setUp) to register every object class. Afterwards
``nova_cyborg.model.objects.<ClassName>`` is the newest registered version of
each.
"""


def register_all():
    """Import every object module, which registers its classes."""
    # NOTE: the import is the registration; the modules define classes only.
    __import__('nova_cyborg.model.objects.accelerator_request')
