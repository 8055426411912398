# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The bug fixes of upstream Nova in the series, on servers without
accelerators (each is a patch of its own, named ``*-fix-*``)."""

import threading
from unittest import mock

import fixtures

from nova.scheduler import manager as scheduler_manager

from tests.functional import base
from tests.functional.harness import waits


class FailedRebuildTest(base.AcceleratorTestBase):
    """0000a-fix-failed-rebuild-keeps-host-allocation.patch"""

    def test_failed_rebuild_on_the_same_host_keeps_its_allocation(self):
        self.start_accel_compute('compute1')
        flavor_id = self._create_flavor(name='plain')
        server = self.boot(flavor_id)
        allocations = self.allocations(server['id'])
        self.assertEqual(1, len(allocations), allocations)

        with mock.patch('nova.virt.libvirt.driver.LibvirtDriver.spawn',
                        side_effect=RuntimeError('spawn failed')) as spawn:
            self.api.post_server_action(
                server['id'], {'rebuild': {'imageRef': base.IMAGE}})
            server = self._wait_for_state_change(server, 'ERROR')
        self.assertEqual(1, spawn.call_count)

        # Still on compute1, its resources still claimed there (upstream
        # removed the allocation, as for an evacuation's destination).
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(allocations, self.allocations(server['id']))


class ExternalEventWhileSchedulingTest(base.AcceleratorTestBase):
    """0000c-fix-external-event-for-server-being-scheduled.patch"""

    def test_event_for_a_server_being_scheduled_is_refused_with_422(self):
        self.start_accel_compute('compute1')
        flavor_id = self._create_flavor(name='plain')
        entered, release = threading.Event(), threading.Event()
        real = scheduler_manager.SchedulerManager.select_destinations

        def held(*args, **kwargs):
            entered.set()
            # Released by the test; the deadline only ends a broken test.
            release.wait(300)
            return real(*args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.manager.SchedulerManager.select_destinations',
            held))
        self.addCleanup(release.set)

        body = self._build_server(flavor_id=flavor_id, image_uuid=base.IMAGE,
                                  networks='none')
        server = self.api.post_server({'server': body})
        waits.wait_until(entered.is_set, 'the scheduler asked for a host')
        # The server is mapped to no cell yet: upstream answered 500.
        resp = self.admin_api.api_post(
            '/os-server-external-events',
            {'events': [{'name': 'network-vif-plugged', 'tag': 'port',
                         'server_uuid': server['id']}]},
            check_response_status=[207])
        self.assertEqual([(server['id'], 'failed', 422)], [
            (e['server_uuid'], e['status'], e['code'])
            for e in resp.body['events']])

        release.set()
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
