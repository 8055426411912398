"""Waiting for a state with a deadline (stdlib only).

The functional harness (:mod:`tests.functional.harness.waits`) and the
tests against the local cloud (:mod:`tests.cloud.base`) wait the same way,
with deadlines of their own.
"""

import time


def wait_until(predicate, what, timeout, poll):
    """Poll ``predicate`` until it returns something true, and return it.

    :raises: AssertionError naming ``what`` after ``timeout`` seconds.
    """
    end = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= end:
            raise AssertionError('%s did not happen in %d s' % (what, timeout))
        time.sleep(poll)
