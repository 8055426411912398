"""The functional harness (tests/functional/base.py), instrumented.

:class:`BenchBase` is the spine harness as the functional tests use it
(Nova in this process, the real Placement, the real Cyborg API and
conductor in a child process, the sidecar) with three additions that cost
the measured code nothing:

* Cyborg's child is :mod:`benchmarks.cyborg_child`, which counts the
  requests reaching the Cyborg API and the ``report_data`` RPCs reaching
  its conductor (``self.cyborg.counts()``);
* the Placement app served on loopback to Cyborg and the sidecar counts
  its requests (``self.placement_calls``; Nova's own Placement calls go
  in-process and are not counted);
* ``Instance.save`` records when each instance is first saved ACTIVE (or
  ERROR) by the compute, so a boot is timed from its POST to that moment
  without polling the API.

``PATCHED`` comes from ``$NOVA_CYBORG_BENCH_PATCHED`` (``1``, ``0`` for
upstream Nova). A benchmark writes its figures as JSON to
``$NOVA_CYBORG_BENCH_OUT`` with :meth:`BenchBase.write_result`.
"""

from tests.functional import base  # noqa: I100 (Nova's monkey_patch first)

import json
import os
import threading
import time

import fixtures
from nova.objects import instance as instance_obj

from benchmarks import counting
from tests.functional.harness import cyborg_fixture

BOOT_TIMEOUT = 120


def elapsed(func):
    """Seconds ``func()`` took."""
    start = time.monotonic()
    func()
    return time.monotonic() - start


class CountingCyborgFixture(cyborg_fixture.CyborgFixture):
    """The harness's Cyborg child, run as :mod:`benchmarks.cyborg_child`."""

    def start_child(self, module, args, port_file, env=None):
        return super().start_child('benchmarks.cyborg_child', args,
                                   port_file, env=env)

    def counts(self):
        """``{"api": {call: n}, "report_data": {host: n}}`` so far."""
        resp = self.session.get(self.url + '/_bench/counts',
                                timeout=self.REQUEST_TIMEOUT)
        resp.raise_for_status()
        return resp.json()


class _CountingPlacementDeploy:
    """Stands in for ``placement.deploy`` in tests.functional.base only."""

    def __init__(self, real, counter):
        self._real = real
        self._counter = counter

    def loadapp(self, conf):
        return counting.CountingMiddleware(self._real.loadapp(conf),
                                           self._counter)


class ActiveClock(fixtures.Fixture):
    """When each instance was first saved ACTIVE or ERROR."""

    def _setUp(self):
        self.at = {}
        self._cond = threading.Condition()
        real = instance_obj.Instance.save
        clock = self

        def save(instance, *args, **kwargs):
            result = real(instance, *args, **kwargs)
            if (instance.obj_attr_is_set('vm_state') and
                    instance.vm_state in ('active', 'error')):
                clock._saw(instance.uuid, instance.vm_state)
            return result
        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.instance.Instance.save', save))

    def _saw(self, uuid, state):
        now = time.monotonic()
        with self._cond:
            if uuid not in self.at:
                self.at[uuid] = (now, state)
                self._cond.notify_all()

    def wait(self, uuid, timeout=BOOT_TIMEOUT):
        """``(monotonic time, 'active' or 'error')`` of ``uuid``."""
        with self._cond:
            if not self._cond.wait_for(lambda: uuid in self.at, timeout):
                raise AssertionError('%s not ACTIVE or ERROR after %s s'
                                     % (uuid, timeout))
            return self.at[uuid]


class BenchBase(base.AcceleratorTestBase):

    PATCHED = os.environ.get('NOVA_CYBORG_BENCH_PATCHED', '1') == '1'

    def setUp(self):
        self.placement_calls = counting.Counter()
        real_fixture = cyborg_fixture.CyborgFixture
        real_deploy = base.placement_deploy
        cyborg_fixture.CyborgFixture = CountingCyborgFixture
        base.placement_deploy = _CountingPlacementDeploy(
            real_deploy, self.placement_calls)
        try:
            super().setUp()
        finally:
            cyborg_fixture.CyborgFixture = real_fixture
            base.placement_deploy = real_deploy
        self.clock = self.useFixture(ActiveClock())

    def post_server(self, flavor_id, name='bench'):
        body = self._build_server(name=name, flavor_id=flavor_id,
                                  image_uuid=base.IMAGE, networks='none')
        return self.api.post_server({'server': body})

    def timed_boot(self, flavor_id):
        """Boot one server; return ``(server, seconds, cyborg calls)``.

        Seconds from the POST to the compute saving the instance ACTIVE;
        the calls are those that reached the Cyborg API in that time.
        """
        before = self.cyborg.counts()['api']
        start = time.monotonic()
        server = self.post_server(flavor_id)
        at, state = self.clock.wait(server['id'])
        seconds = at - start
        calls = counting.difference(self.cyborg.counts()['api'], before)
        server = self._wait_for_state_change(server, 'ACTIVE')
        return server, seconds, calls

    def timed_delete(self, server):
        """Delete a server and wait until it is gone; return the Cyborg
        calls it made."""
        before = self.cyborg.counts()['api']
        self._delete_server(server)
        return counting.difference(self.cyborg.counts()['api'], before)

    def write_result(self, data):
        path = os.environ.get('NOVA_CYBORG_BENCH_OUT')
        data = dict(data, patched=self.PATCHED)
        if path:
            with open(path, 'w') as f:
                json.dump(data, f, indent=1, sort_keys=True)
        else:
            print(json.dumps(data, indent=1, sort_keys=True))
