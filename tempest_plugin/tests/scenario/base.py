"""A server with accelerators through a sequence of lifecycle operations.

A test is a list of steps. Each step performs one operation (a ``do_*``
method), waits for the server's status, and checks the accelerators the
server should have then. ARQs and hosts are named by labels: ``boot`` is
what the server had when it was created; a label seen again must name the
same ARQs (or host), a new label other ARQs (or another host) than every
label before. After the last step the server is deleted and nothing may be
left of it.
"""

import collections

from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import exceptions as lib_exc

from tempest_plugin.tests import base

CONF = config.CONF

BOOT = 'boot'


class Step(collections.namedtuple(
        'Step', ['action', 'status', 'arqs', 'host', 'gone'])):
    """One operation and what follows from it.

    :param action: ``do_<action>`` performs it.
    :param status: the server's status once it is done.
    :param arqs: the label of the ARQs the server has then; None when it
        has none (and no device allocated).
    :param host: the label of its host then; None: not checked.
    :param gone: labels of ARQs that must no longer exist in Cyborg.
    """


def step(action, status, arqs=BOOT, host=None, gone=()):
    return Step(action, status, arqs, host, tuple(gone))


class LifecycleTest(base.AcceleratorTest):
    """Runs steps; ``do_*`` are the operations they name."""

    def run_steps(self, *steps):
        server_id = self.create_server(self.flavor)
        arqs = {BOOT: self.uuids(
            self.assert_accelerated(server_id, self.profile))}
        hosts = {BOOT: self.host_of(server_id)}
        for current in steps:
            getattr(self, 'do_%s' % current.action)(server_id)
            self.wait_for_status(server_id, current.status)
            where = '%s of server %s' % (current.action, server_id)
            if current.arqs is None:
                self.assert_not_accelerated(server_id, self.profile,
                                            current.status)
            else:
                now = self.assert_accelerated(server_id, self.profile,
                                              current.status)
                self._assert_label(arqs, current.arqs, self.uuids(now),
                                   'ARQs after %s' % where)
            if current.host is not None:
                self._assert_label(hosts, current.host,
                                   self.host_of(server_id),
                                   'host after %s' % where)
            for label in current.gone:
                self.assert_arqs_deleted(arqs[label])
        self.delete_server_and_assert_released(server_id)

    def _assert_label(self, seen, label, value, what):
        if label in seen:
            self.assertEqual(seen[label], value,
                             '%s: not those of %s' % (what, label))
            return
        for other, known in seen.items():
            if isinstance(value, frozenset):
                self.assertFalse(value & known,
                                 '%s: some are those of %s' % (what, other))
            else:
                self.assertNotEqual(known, value,
                                    '%s: the same as %s' % (what, other))
        seen[label] = value

    def host_of(self, server_id):
        return self.show_server(server_id)['OS-EXT-SRV-ATTR:host']

    # Operations

    def do_stop(self, server_id):
        self.servers_client.stop_server(server_id)

    def do_start(self, server_id):
        self.servers_client.start_server(server_id)

    def do_reboot_hard(self, server_id):
        self.servers_client.reboot_server(server_id, type='HARD')

    def do_reboot_soft(self, server_id):
        self.servers_client.reboot_server(server_id, type='SOFT')

    def do_pause(self, server_id):
        self.servers_client.pause_server(server_id)

    def do_unpause(self, server_id):
        self.servers_client.unpause_server(server_id)

    def do_suspend(self, server_id):
        self.servers_client.suspend_server(server_id)

    def do_resume(self, server_id):
        self.servers_client.resume_server(server_id)

    def do_rescue(self, server_id):
        self.servers_client.rescue_server(server_id)

    def do_unrescue(self, server_id):
        self.servers_client.unrescue_server(server_id)

    def do_rebuild(self, server_id):
        self.servers_client.rebuild_server(server_id, CONF.compute.image_ref)

    def do_snapshot(self, server_id):
        images = self.os_primary.image_client_v2
        body = self.os_primary.compute_images_client.create_image(
            server_id, name=data_utils.rand_name(
                prefix='tempest', name='nova-cyborg-snapshot'))
        image_id = body.get('image_id') or data_utils.parse_image_id(
            body.response['location'])
        self.addCleanup(images.wait_for_resource_deletion, image_id)
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        images.delete_image, image_id)
        try:
            waiters.wait_for_image_status(images, image_id, 'active')
        except lib_exc.NotFound:
            self.fail('The snapshot of server %s failed: Nova deleted its '
                      'image %s (see the server\'s instance actions)' % (
                          server_id, image_id))

    def do_resize(self, server_id):
        self.servers_client.resize_server(server_id, self.resize_flavor)

    def do_migrate(self, server_id):
        self.admin_servers_client.migrate_server(server_id)

    def do_confirm(self, server_id):
        self.servers_client.confirm_resize_server(server_id)

    def do_revert(self, server_id):
        self.servers_client.revert_resize_server(server_id)

    def do_shelve_offload(self, server_id):
        self.servers_client.shelve_server(server_id)
        offload_time = CONF.compute.shelved_offload_time
        if offload_time >= 0:
            self.wait_for_status(server_id, 'SHELVED_OFFLOADED',
                                 extra_timeout=offload_time)
            return
        # Not offloaded by itself: shelved, the server keeps its devices.
        self.wait_for_status(server_id, 'SHELVED')
        self.assert_accelerated(server_id, self.profile, 'SHELVED')
        self.admin_servers_client.shelve_offload_server(server_id)

    def do_unshelve(self, server_id):
        self.servers_client.unshelve_server(server_id)
