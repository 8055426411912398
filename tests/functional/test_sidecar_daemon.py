"""nova-cyborg-sidecar as a process: killed mid-programming, it comes back
consistent; its RPC methods refuse malformed arguments."""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import base  # noqa: F401,I100

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import fixtures
import oslo_messaging as messaging

from sidecar.daemon import rpc
from tests.functional.harness import sidecar_fixture
from tests.functional import test_sidecar
from tests.functional.test_sidecar import F_A
from tests.functional.test_sidecar import F_B
from tests.functional.test_sidecar import F_OLD
from tests.functional.test_sidecar import function_trait


class DaemonTest(test_sidecar.SidecarTestBase):
    """``nova-cyborg-sidecar`` as a process, killed mid-programming."""

    def _start_daemon(self, config_path, log_path):
        # The console script a deployer's unit file runs.
        script = os.path.join(os.path.dirname(sys.executable),
                              'nova-cyborg-sidecar')
        process = subprocess.Popen(
            [script, '--config-file', config_path, '--log-file', log_path],
            cwd=sidecar_fixture.REPO_ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.addCleanup(self._kill, process)
        return process

    @staticmethod
    def _started(log_path):
        if not os.path.exists(log_path):
            return False
        with open(log_path) as f:
            return f.read().count('Sidecar for host compute1 started')

    def _agent_client(self, host):
        """What cyborg-conductor calls agents with."""
        transport = messaging.get_rpc_transport(
            sidecar_fixture.make_conf(), url=self.broker.transport_url)
        self.addCleanup(transport.cleanup)
        return messaging.get_rpc_client(
            transport, messaging.Target(
                exchange=rpc.EXCHANGE, topic=rpc.AGENT_TOPIC, server=host,
                version=rpc.RPC_API_VERSION),
            serializer=rpc.serializer())

    @staticmethod
    def _kill(process):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _wait(self, predicate, what, log_path, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        with open(log_path) as f:
            self.fail('%s did not happen; sidecar log:\n%s' % (
                what, f.read()[-4000:]))

    def test_killed_mid_programming_comes_back_consistent(self):
        glance = self.start_glance()
        slow = self.create_bitstream(F_B, extra='sleep 120\n')
        good = self.create_bitstream(F_A)
        # A card with one port, released to its VF: one provider of one
        # FPGA, programmed through the card's control path (its PF).
        host = self.start_accel_compute('compute1', sidecar=False, num_vfs=1,
                                        function_ids=[F_OLD])
        (pf,) = self.pf_bdfs('compute1')
        (name,) = self.fpga_providers('compute1', pf)
        base_dir = self.useFixture(fixtures.TempDir()).path
        sysfs_root = host.write(os.path.join(base_dir, 'sys'))
        state = os.path.join(base_dir, 'state')
        config = sidecar_fixture.write_config(
            os.path.join(base_dir, 'sidecar.conf'), host='compute1',
            sysfs_root=sysfs_root, state_path=state,
            placement_url=self.placement_url, glance_url=glance.endpoint)
        privsep_helper = os.path.join(os.path.dirname(sys.executable),
                                      'privsep-helper')
        with open(config, 'a') as f:
            f.write('\n[DEFAULT]\ntransport_url = %s\n'
                    '[sidecar]\nlibvirt_uri = test:///default\n'
                    '[sidecar_privsep]\nhelper_command = %s --config-file '
                    '%s\n' % (self.broker.transport_url, privsep_helper,
                              config))
        log = os.path.join(base_dir, 'sidecar.log')
        daemon = self._start_daemon(config, log)
        self._wait(lambda: self._started(log), 'the start', log)
        self.assertIn(name, {d['name'] for d in
                             self.cyborg.list_deployables()})

        # Ask for a bitstream the "card" takes two minutes to load, as
        # cyborg-conductor would, and kill the sidecar while it loads.
        client = self._agent_client('compute1')
        cpid = {'cpid_type': 'PCI', 'cpid_info': dict(zip(
            ('domain', 'bus', 'device', 'function'),
            pf.replace('.', ':').split(':')))}
        context = rpc.admin_context()
        client.cast(context, 'fpga_program', controlpath_id=cpid,
                    bitstream_uuid=slow, driver_name='intel')
        self._wait(lambda: self.inventory(name)['FPGA']['reserved'] == 1,
                   'the reservation while programming', log)
        journal_file = os.path.join(state, 'programming.json')
        with open(journal_file) as f:
            self.assertIn(pf, json.load(f))
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()

        # Back: the provider offers the device again, with the function
        # the card really holds; the journal is closed.
        self._start_daemon(config, log)
        self._wait(lambda: self._started(log) == 2, 'the restart', log)
        self._wait(lambda: self.inventory(name)['FPGA']['reserved'] == 0,
                   'the reservation to be undone', log)
        with open(journal_file) as f:
            self.assertEqual({}, json.load(f))
        self.assertIn(function_trait(F_OLD), self.traits(name))
        self.assertNotIn(function_trait(F_B), self.traits(name))

        # And it programs again.
        self.assertTrue(client.prepare(timeout=60).call(
            context, 'fpga_program', controlpath_id=cpid,
            bitstream_uuid=good, driver_name='intel'))
        traits = self.traits(name)
        self.assertIn(function_trait(F_A), traits)
        self.assertNotIn(function_trait(F_OLD), traits)

    def test_malformed_rpc_arguments_are_refused(self):
        self.start_accel_compute('compute1')
        client = self._agent_client('compute1').prepare(timeout=30)
        context = rpc.admin_context()
        (pf,) = self.pf_bdfs('compute1')
        bad_cpid = {'cpid_type': 'PCI', 'cpid_info': {
            'domain': '0000', 'bus': "81'/><x", 'device': '00',
            'function': '0'}}
        for method, kwargs, message in [
                ('fpga_program', {'controlpath_id': bad_cpid,
                                  'bitstream_uuid': F_A,
                                  'driver_name': 'intel'},
                 'bus is not a hexadecimal number'),
                ('create_vgpu_mdev', {'pci_addr': pf + '/../x',
                                      'asked_type': 'nvidia-11',
                                      'ah_uuid': F_A},
                 'not a PCI address'),
                ('remove_vgpu_mdev', {'pci_addr': pf,
                                      'asked_type': 'nvidia-11',
                                      'ah_uuid': 'x'},
                 'not a UUID')]:
            ex = self.assertRaises(messaging.RemoteError, client.call,
                                   context, method, **kwargs)
            self.assertIn(message, str(ex))
        self.assertEqual([], self.programmed('compute1'))
