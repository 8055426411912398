"""Operations on a server that keep it on its host with its ARQs.

doc/source/operations.rst: reboot, stop and start, pause, suspend and
resume, rescue, snapshot and rebuild keep the server's ARQs and devices;
live migration is refused with HTTP 400.
"""

from tempest import config
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
import testtools

from tempest_plugin.tests.scenario import base

CONF = config.CONF
FEATURES = CONF.compute_feature_enabled
step = base.step


class AcceleratorLifecycleTest(base.LifecycleTest):

    @decorators.idempotent_id('a9a4d4ab-2e63-42ed-b1ad-539954f920e2')
    def test_stop_start(self):
        self.run_steps(step('stop', 'SHUTOFF'), step('start', 'ACTIVE'))

    @decorators.idempotent_id('f6631894-966d-413f-a807-97e359afd4e6')
    def test_reboot_hard(self):
        self.run_steps(step('reboot_hard', 'ACTIVE'))

    @decorators.idempotent_id('23b21be0-e74e-4f71-a5c9-16b8f1b9fd77')
    def test_reboot_soft(self):
        self.run_steps(step('reboot_soft', 'ACTIVE'))

    @testtools.skipUnless(FEATURES.pause, 'Pause is not available.')
    @decorators.idempotent_id('34941d0d-a938-44f8-a5db-f123a91d9a0c')
    def test_pause_unpause(self):
        self.run_steps(step('pause', 'PAUSED'), step('unpause', 'ACTIVE'))

    @testtools.skipUnless(FEATURES.suspend, 'Suspend is not available.')
    @decorators.idempotent_id('81d83b86-f28f-4201-a2de-aceb99202c3b')
    def test_suspend_resume(self):
        self.run_steps(step('suspend', 'SUSPENDED'),
                       step('resume', 'ACTIVE'))

    @testtools.skipUnless(FEATURES.rescue, 'Rescue is not available.')
    @decorators.idempotent_id('66f738bf-05f0-458e-8bb8-d2144a057657')
    def test_rescue_unrescue(self):
        self.run_steps(step('rescue', 'RESCUE'), step('unrescue', 'ACTIVE'))

    @testtools.skipUnless(FEATURES.snapshot and
                          CONF.service_available.glance,
                          'Snapshots (or Glance) are not available.')
    @decorators.idempotent_id('112a706a-1d8f-4c97-9a0a-8d679e418851')
    def test_snapshot(self):
        self.run_steps(step('snapshot', 'ACTIVE'))

    @decorators.idempotent_id('55fc13d5-6232-4ee7-a591-6c3fccd8c083')
    def test_rebuild(self):
        self.run_steps(step('rebuild', 'ACTIVE', host=base.BOOT))

    @decorators.attr(type='negative')
    @decorators.idempotent_id('65b1dd18-dd52-443a-92e5-bdbd9dd08de1')
    def test_live_migration_refused(self):
        server_id = self.create_server(self.flavor)
        arqs = self.assert_accelerated(server_id, self.profile)
        host = self.host_of(server_id)
        ex = self.assertRaises(lib_exc.BadRequest,
                               self.admin_servers_client.live_migrate_server,
                               server_id, host=None, block_migration='auto')
        self.assertIn('accelerators', str(ex))
        self.assertEqual(host, self.host_of(server_id))
        self.assertEqual(self.uuids(arqs), self.uuids(
            self.assert_accelerated(server_id, self.profile)))
        self.delete_server_and_assert_released(server_id)
