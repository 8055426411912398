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

from unittest import mock

from tests.functional import base


class FailedRebuildTest(base.AcceleratorTestBase):
    """0003g-fix-failed-rebuild-keeps-host-allocation.patch"""

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
