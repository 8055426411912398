"""A sidecar restarted while Placement is down serves its known devices.

It starts from the devices found on the host and its state under
``[sidecar] state_path``: the agent RPC answers cyborg-conductor's mdev
requests for a known GPU before Placement is back, an unknown device is
refused by name, and the sidecar resyncs once Placement answers again.
Real cyborg-conductor's RPC API (the client it calls agents with) and
Placement.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import os  # noqa: E402

import oslo_messaging as messaging  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402

from sidecar import rpc  # noqa: E402
from tests.functional.harness import sidecar_fixture  # noqa: E402
from tests.functional.harness import waits  # noqa: E402
from tests.functional import test_sidecar_admission as admission  # noqa

MDEV_TYPE = 'nvidia-11'


class RestartFromCacheTest(admission.AdmissionTestBase):

    def start_gpu_sidecar(self):
        conn = self.computes['compute1'].driver._host.get_connection()
        self.sidecars['compute1'] = self.useFixture(
            sidecar_fixture.SidecarFixture(
                'compute1', self.hosts['compute1'],
                self.broker.transport_url, self.placement_url,
                lambda: conn, drivers=('gpu', 'fpga'),
                mdev_types=(MDEV_TYPE,), extra=self.extra,
                cyborg_url=self.cyborg.endpoint))
        return self.sidecars['compute1']

    def agent(self):
        """What cyborg-conductor calls agents with."""
        transport = messaging.get_rpc_transport(
            sidecar_fixture.make_conf(), url=self.broker.transport_url)
        self.addCleanup(transport.cleanup)
        return messaging.get_rpc_client(
            transport, messaging.Target(
                exchange=rpc.EXCHANGE, topic=rpc.AGENT_TOPIC,
                server='compute1', version=rpc.RPC_API_VERSION),
            serializer=rpc.serializer()).prepare(timeout=30)

    def test_mdev_served_with_placement_down_at_restart(self):
        self.extra = '[sidecar]\nstate_path = %s\n' % self.state
        self.start_accel_compute('compute1', num_pfs=1,
                                 num_vfs=admission.NUM_VFS, num_mdevcap=1,
                                 drivers=('gpu', 'fpga'),
                                 mdev_types=(MDEV_TYPE,),
                                 extra_config=self.extra)
        (gpu,) = [f.address for f in self.hosts['compute1'].functions
                  .values() if f.mdev_types]
        self.stop_sidecar()
        self.placement_down()
        sidecar = self.start_gpu_sidecar()
        self.assertFalse(sidecar.sidecar.converged)
        agent = self.agent()
        context = rpc.admin_context()
        ah_uuid = uuidutils.generate_uuid()
        agent.call(context, 'create_vgpu_mdev', pci_addr=gpu,
                   asked_type=MDEV_TYPE, ah_uuid=ah_uuid)
        create = os.path.join(sidecar.sysfs_root, 'class', 'mdev_bus', gpu,
                              'mdev_supported_types', MDEV_TYPE, 'create')
        with open(create) as f:
            self.assertEqual(ah_uuid, f.read().strip())
        # A device the host does not have is refused by name.
        err = self.assertRaises(
            messaging.RemoteError, agent.call, context, 'create_vgpu_mdev',
            pci_addr='0000:ee:00.0', asked_type=MDEV_TYPE,
            ah_uuid=uuidutils.generate_uuid())
        self.assertIn('0000:ee:00.0', str(err))
        self.placement_back()
        waits.wait_until(sidecar.sidecar.run_cycle, 'the sidecar converged')
