"""The sidecar service: discover, report, and serve cyborg-agent's RPC."""

import threading
import time

import oslo_messaging as messaging
from oslo_log import log as logging

from sidecar import exception
from sidecar import report
from sidecar import rpc

LOG = logging.getLogger(__name__)


class AgentEndpoint:
    """cyborg-agent's RPC API 1.0, as cyborg-conductor 17 calls it."""

    target = messaging.Target(version=rpc.RPC_API_VERSION)

    def __init__(self, programs, mdevs, report_now):
        self._programs = programs
        self._mdevs = mdevs
        self._report_now = report_now

    @messaging.expected_exceptions(exception.SidecarError)
    def fpga_program(self, context, controlpath_id, bitstream_uuid,
                     driver_name):
        result = self._programs.fpga_program(controlpath_id, bitstream_uuid,
                                             driver_name)
        # Report the new function before answering: cyborg-conductor then
        # updates the provider's traits in its own bind job, and doing both
        # at once races in its Placement client (a trait deleted by one
        # path while the other adds it).
        self._report_now()
        return result

    @messaging.expected_exceptions(exception.SidecarError)
    def create_vgpu_mdev(self, context, pci_addr, asked_type, ah_uuid):
        self._mdevs.create(pci_addr, asked_type, ah_uuid)

    @messaging.expected_exceptions(exception.SidecarError)
    def remove_vgpu_mdev(self, context, pci_addr, asked_type, ah_uuid):
        self._mdevs.remove(pci_addr, asked_type, ah_uuid)


class Sidecar:
    """Wire the parts together and run the discovery loop in a thread."""

    def __init__(self, conf, transport, inventory, reporter, programs,
                 mdevs, placement):
        self.conf = conf
        self._transport = transport
        self.inventory = inventory
        self.reporter = reporter
        self.programs = programs
        self._placement = placement
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._cycle_lock = threading.Lock()
        self._thread = None
        self._server = rpc.get_agent_server(
            transport, conf.host,
            AgentEndpoint(programs, mdevs, self.run_cycle))

    @property
    def rp_name(self):
        return self.conf.sidecar.resource_provider_name or self.conf.host

    def wait_for_provider(self, attempts=6, first_delay=1.0):
        """The compute node's provider must exist before reporting."""
        delay = first_delay
        for attempt in range(attempts):
            if self._placement.find_provider(self.rp_name):
                return
            if attempt + 1 < attempts:
                LOG.warning('Resource provider %(name)s not in Placement '
                            'yet; retrying in %(delay).0f s',
                            {'name': self.rp_name, 'delay': delay})
                self._stopping.wait(delay)
                delay *= 2
        raise exception.ResourceProviderNotFound(name=self.rp_name)

    def start(self):
        self.wait_for_provider()
        self.inventory.discover()
        self.programs.recover()
        # Serve the agent RPC before announcing devices: the conductor may
        # call as soon as it knows them.
        self._server.start()
        self.run_cycle()
        self._thread = threading.Thread(target=self._loop,
                                        name='sidecar-discovery',
                                        daemon=True)
        self._thread.start()
        LOG.info('Sidecar for host %s started', self.conf.host)

    def run_cycle(self):
        """One discovery cycle. Never raises: the daemon keeps running."""
        with self._cycle_lock:
            self._run_cycle()

    def _run_cycle(self):
        context = rpc.admin_context()
        try:
            devices = self.inventory.discover()
            sent = self.reporter.report(context, devices)
        except Exception:
            LOG.exception('Reporting to cyborg-conductor failed; the full '
                          'device list is sent again next cycle')
            self.reporter.invalidate()
        else:
            if sent:
                self._check_totals(devices)
        try:
            self.programs.housekeep()
        except Exception:
            LOG.exception('Checking programming promises failed')

    def _check_totals(self, devices):
        """Set the inventory totals the conductor should have written.

        cyborg-conductor answers a report without an error when Placement
        refused its inventory update (a generation conflict, HTTP 409):
        its database then holds the new number of accelerators and
        Placement the old one, for good, since the next report changes
        nothing in its database. If this check fails, the report is sent
        and checked again next cycle.
        """
        try:
            for device in devices:
                for dep in device.deployables:
                    if dep.num_accelerators < 1:
                        continue
                    rp = self._placement.find_provider(
                        report.deployable_name(self.conf.host, dep))
                    if rp is not None:
                        self._placement.set_total(rp, dep.resource_class,
                                                  dep.num_accelerators)
        except Exception:
            LOG.exception('Checking the inventories in Placement after a '
                          'report failed; the full device list is sent '
                          'again next cycle')
            self.reporter.invalidate()

    def _loop(self):
        interval = self.conf.sidecar.report_interval
        while not self._stopping.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stopping.is_set():
                break
            self.run_cycle()

    def trigger(self):
        """Run a cycle soon (after a change the daemon made itself)."""
        self._wake.set()

    def stop(self):
        self._stopping.set()
        self._wake.set()
        try:
            self._server.stop()
            self._server.wait()
        except Exception:
            LOG.exception('Stopping the RPC server failed')
        if self._thread is not None:
            self._thread.join(timeout=30)

    def wait(self):
        while not self._stopping.is_set():
            time.sleep(1)
