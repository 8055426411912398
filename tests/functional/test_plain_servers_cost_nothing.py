"""A server without accelerators costs nothing on a patched Nova.

The owner's plain server goes through boot, soft and hard reboot, stop and
start, resize and its confirm, and delete; a second one that no host fits
is deleted from ERROR (the API's local delete). Meanwhile every piece of
work nova-cyborg's code could add to upstream's is recorded, wherever it
runs (nova-api, the conductor, the scheduler, nova-compute):

* a database statement issued while a ``nova_cyborg`` frame is on the
  stack (the API database and the cells');
* a lazy load of an instance's field (``obj_load_attr``) asked from
  nova-cyborg's code;
* a request to Cyborg's API (``nova_cyborg.clients.cyborg_http``);
* an RPC message nova-cyborg sends (its own namespace, cast or call).

Each must be zero: for a plain server the series' hunks only call hooks,
and a hook that does nothing for such a server leaves upstream's queries
and messages as they are (the review's "zero cost for plain servers").
The accelerated control is in the same test: the same recorders see the
work of a server with a device profile, so a recorder that cannot see is
caught.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: I100

import os  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402

import fixtures  # noqa: E402
import nova.conf  # noqa: E402
from nova import objects  # noqa: E402
from sqlalchemy import engine as sa_engine  # noqa: E402
from sqlalchemy import event as sa_event  # noqa: E402

from nova_cyborg.clients import cyborg_http  # noqa: E402

_OURS = os.sep + 'nova_cyborg' + os.sep
#: This module: the recorder's own frames.
_RECORDER = __file__
PROFILE = [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}]


#: Nova's plumbing between a caller and its database or object loads:
#: the caller above it is the one doing the work.
_PLUMBING = tuple(os.sep.join(('', 'nova', p)) for p in (
    'db' + os.sep, 'objects' + os.sep, 'context.py', 'utils.py',
    'rpc.py', 'exception_wrapper.py', 'safe_utils.py'))
#: Where upstream's own work is done (Nova, Placement in-process) or the
#: test's.
_UPSTREAM = tuple(os.sep.join(('', p, '')) for p in (
    'nova', 'placement', 'tests'))


def _our_frame():
    """The nova_cyborg frame that asked for this work (file:line
    function), or None when the nearest caller is upstream's (or the
    test's): walking out from the innermost frame, library frames and
    Nova's plumbing (objects, database API, context) are skipped; the
    first other frame decides."""
    for frame in reversed(traceback.extract_stack()):
        path = frame.filename
        if path == _RECORDER:
            continue
        if _OURS in path:
            return '%s:%d %s' % (path.split(_OURS, 1)[1], frame.lineno,
                                 frame.name)
        if any(p in path for p in _PLUMBING):
            continue
        if any(p in path for p in _UPSTREAM):
            return None
    return None


class Recorder(fixtures.Fixture):
    """What nova-cyborg's code asks of the database, Cyborg and RPC."""

    def _setUp(self):
        self.lock = threading.Lock()
        self.work = []
        self.recording = False
        sa_event.listen(sa_engine.Engine, 'before_cursor_execute',
                        self._statement)
        self.addCleanup(sa_event.remove, sa_engine.Engine,
                        'before_cursor_execute', self._statement)
        real_load = objects.Instance.obj_load_attr

        def load(instance, attrname):
            self._note('lazy load of %s' % attrname)
            return real_load(instance, attrname)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.Instance.obj_load_attr', load))
        real_call = cyborg_http.CyborgHTTPClient._call

        def call(client, op, method, url, *args, **kwargs):
            self._note('Cyborg %s %s' % (method.upper(), url), always=True)
            return real_call(client, op, method, url, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cyborg.clients.cyborg_http.CyborgHTTPClient._call', call))
        from oslo_messaging.rpc import client as rpc_client
        for name in ('cast', 'call'):
            real = getattr(rpc_client._BaseCallContext, name)
            self.useFixture(fixtures.MonkeyPatch(
                'oslo_messaging.rpc.client._BaseCallContext.%s' % name,
                self._rpc(name, real)))

    def _rpc(self, name, real):
        recorder = self

        def send(ctx, context, method, **kwargs):
            namespace = getattr(ctx.target, 'namespace', None)
            if namespace and 'cyborg' in namespace:
                recorder._note('RPC %s %s (%s)' % (name, method, namespace),
                               always=True)
            return real(ctx, context, method, **kwargs)
        return send

    def _statement(self, conn, cursor, statement, *args):
        self._note('SQL %s' % ' '.join(statement.split())[:90])

    def _note(self, what, always=False):
        if not self.recording:
            return
        where = _our_frame()
        if where is None and not always:
            return
        with self.lock:
            self.work.append('%s (from %s)' % (what, where))

    def take(self):
        with self.lock:
            work, self.work = self.work, []
        return work


class PlainServersCostNothingTest(base.AcceleratorTestBase):

    NUM_VFS = 1

    def setUp(self):
        super().setUp()
        self.flags(allow_resize_to_same_host=True)
        # compute1 has an FPGA VF (the control's); both serve plain ones.
        self.start_accel_compute('compute1')
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._get_instance_disk_info',
            return_value=[]))
        self.plain = self._create_flavor(name='plain')
        self.bigger = self._create_flavor(name='bigger', memory_mb=4096)
        # No host has the trait: the scheduler finds none, ERROR.
        self.nowhere = self._create_flavor(
            name='nowhere', extra_spec={'trait:CUSTOM_NOWHERE': 'required'})
        self.recorder = self.useFixture(Recorder())

    def record(self, step):
        """Run ``step``; return what nova-cyborg's code did meanwhile."""
        self.recorder.recording = True
        try:
            step()
        finally:
            self.recorder.recording = False
        return self.recorder.take()

    def instance_dir(self, server):
        # The resize moves it aside; the harness writes no disks.
        os.makedirs(os.path.join(nova.conf.CONF.instances_path,
                                 server['id']), exist_ok=True)

    def test_plain_server_lifecycle(self):
        servers = []
        steps = []

        def boot():
            with self.acting(self.owner_api):
                servers.append(self.boot(self.plain))

        def soft_reboot():
            with self.acting(self.owner_api):
                self._reboot_server(servers[0])

        def hard_reboot():
            with self.acting(self.owner_api):
                self._reboot_server(servers[0], hard=True)

        def stop_start():
            with self.acting(self.owner_api):
                self._stop_server(servers[0])
                self._start_server(servers[0])

        def resize_confirm():
            self.instance_dir(servers[0])
            with self.acting(self.owner_api):
                self._resize_server(servers[0], self.bigger)
                self._confirm_resize(servers[0])

        def delete():
            with self.acting(self.owner_api):
                self._delete_server(servers[0])

        def periodic_tasks():
            # What every compute runs on its own, here at once: the
            # settling of stuck accelerator actions (patch 0022) and the
            # resource tracker's update, which reports nova-cyborg's
            # capability traits (patch 0013).
            from nova import context as nova_context
            compute = self.computes['compute1']
            ctxt = nova_context.get_admin_context()
            compute.manager._settle_stuck_accelerator_actions(ctxt)
            compute.manager.update_available_resource(ctxt)

        def local_delete():
            with self.acting(self.owner_api):
                server = self.boot(self.nowhere, expected_state='ERROR')
                self._delete_server(server)

        for step in (boot, soft_reboot, hard_reboot, stop_start,
                     resize_confirm, periodic_tasks, delete, local_delete):
            steps.append((step.__name__, self.record(step)))
        self.assertEqual([(name, []) for name, _ in steps], steps)

    def test_recorders_see_an_accelerated_server(self):
        """The control: a server with a device profile, booted the same
        way, is seen asking the database for work from nova-cyborg's
        code."""
        dp, flavor = self.create_profile_flavor(PROFILE)
        servers = []

        def boot():
            with self.acting(self.owner_api):
                servers.append(self.boot(flavor))
        work = self.record(boot)
        # The statements nova-cyborg's code asks for, attributed past
        # Nova's plumbing (the early ARQs' build-request record).
        self.assertTrue(any(w.startswith('SQL ') and 'early_arqs.py' in w
                            for w in work), work)

    def acting(self, api):
        from tests.functional import attach_base
        return attach_base.AttachSteps.acting(self, api)
