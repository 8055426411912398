"""The boot test against unpatched Nova 34: upstream's own integration.

Same harness, same real Placement and Cyborg, same assertions; only Nova
differs. It proves the harness does not depend on nova-cyborg and gives
the benchmarks a baseline. Run it with ``tox -e functional-upstream``.
"""

from tests.functional import base
from tests.functional import test_boot


class UpstreamBootTest(test_boot.BootTestMixin, base.AcceleratorTestBase):

    PATCHED = False
