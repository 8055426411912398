"""Option discovery for oslo-config-generator (``tox -e genconfig``).

Every module in this package that registers options is listed here; a unit
test checks that nothing registered is missing from the sample.
"""

from nova_cyborg.conf import nova_cyborg

_MODULES = (nova_cyborg,)


def list_opts():
    result = []
    for module in _MODULES:
        for group, opts in module.list_opts().items():
            result.append((group, opts))
    return result
