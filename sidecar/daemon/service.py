"""The sidecar service: discover, report, and serve cyborg-agent's RPC."""

import random
import threading
import time

import oslo_messaging as messaging
from oslo_log import log as logging

from sidecar import exception
from sidecar.daemon import rpc
from sidecar.report import reporter as report

LOG = logging.getLogger(__name__)


class AgentEndpoint:
    """cyborg-agent's RPC API 1.0, as cyborg-conductor 17 calls it."""

    target = messaging.Target(version=rpc.RPC_API_VERSION)

    def __init__(self, programs, mdevs, report_now, report_soon=None):
        self._programs = programs
        self._mdevs = mdevs
        self._report_now = report_now
        self._report_soon = report_soon or (lambda: None)

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

    # A vGPU 17 type set or removed changes what the card's other VFs are
    # offered for: the discovery cycle runs soon after, not in the call
    # (cyborg-conductor's bind job is still running).

    @messaging.expected_exceptions(exception.SidecarError)
    def create_vgpu_mdev(self, context, pci_addr, asked_type, ah_uuid):
        if self._mdevs.create(pci_addr, asked_type, ah_uuid):
            self._report_soon()

    @messaging.expected_exceptions(exception.SidecarError)
    def remove_vgpu_mdev(self, context, pci_addr, asked_type, ah_uuid):
        if self._mdevs.remove(pci_addr, asked_type, ah_uuid):
            self._report_soon()


class Backoff:
    """Delays that double from ``first`` up to ``cap`` seconds, each drawn
    at random from its upper half so hosts started together spread out."""

    def __init__(self, first, cap, uniform=random.uniform):
        self._first = first
        self._cap = cap
        self._uniform = uniform
        self._attempt = 0

    def reset(self):
        self._attempt = 0

    def next(self):
        delay = min(self._cap, self._first * 2 ** min(self._attempt, 30))
        self._attempt += 1
        return self._uniform(delay / 2.0, delay)


class Sidecar:
    """Wire the parts together and run the discovery loop in a thread.

    Each cycle discovers the devices, reports them when they changed, and
    checks (and repairs) this host's providers in Placement. A cycle that
    leaves anything wrong (the compute node not registered yet,
    cyborg-conductor or RabbitMQ not answering, a provider still missing)
    is followed by another one after a backoff of 1 s doubling up to
    ``[sidecar] report_interval``, with jitter; once everything matches,
    cycles run every ``report_interval``.
    """

    FIRST_RETRY = 1.0

    def __init__(self, conf, transport, inventory, reporter, programs,
                 mdevs, placement, reconciler, view=None, holds=None):
        self.conf = conf
        #: A :class:`sidecar.state.holds.Holds`, or None (nothing is held).
        self.holds = holds
        #: A :class:`sidecar.daemon.control.ControlServer`, or None.
        self.control = None
        #: A :class:`sidecar.discovery.guests.GuestWatch`, or None.
        self.watch = None
        if holds is not None:
            holds.add_listener(lambda key: self._wake.set())
        #: A :class:`sidecar.program.conductor_view.ConductorView`, or None.
        self.view = view
        #: The last report is not read back from Cyborg yet.
        self._unverified = False
        self._transport = transport
        self.inventory = inventory
        self.reporter = reporter
        self.programs = programs
        self.mdevs = mdevs
        self.reconciler = reconciler
        self._placement = placement
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._cycle_lock = threading.Lock()
        self._thread = None
        self._backoff = Backoff(self.FIRST_RETRY,
                                conf.sidecar.report_interval)
        #: True when the last cycle left Placement matching this host.
        self.converged = False
        self._server = rpc.get_agent_server(
            transport, conf.host,
            AgentEndpoint(programs, mdevs, self.report_now,
                          report_soon=self._wake.set))

    @property
    def placement(self):
        return self._placement

    @property
    def rp_name(self):
        return self.conf.sidecar.resource_provider_name or self.conf.host

    def start(self):
        self.inventory.discover()
        # Serve the agent RPC before announcing devices: the conductor may
        # call as soon as it knows them. This waits for RabbitMQ.
        self._server.start()
        self.run_cycle()
        if self.control is not None:
            self.control.start()
        self._thread = threading.Thread(target=self._loop,
                                        name='sidecar-discovery',
                                        daemon=True)
        self._thread.start()
        LOG.info('Sidecar for host %s started', self.conf.host)

    def run_cycle(self):
        """One discovery cycle. Never raises: the daemon keeps running.
        Returns True if Placement matches this host afterwards."""
        with self._cycle_lock:
            try:
                converged = self._run_cycle()
            except Exception:
                LOG.exception('Discovery cycle failed')
                converged = False
            if converged and not self.converged:
                LOG.info('Placement matches the devices of %s', self.rp_name)
            self.converged = converged
            if converged:
                self._backoff.reset()
            return converged

    def _run_cycle(self):
        context = rpc.admin_context()
        try:
            self.programs.recover()
        except Exception:
            LOG.exception('Finishing interrupted programming jobs failed; '
                          'retried next cycle')
        try:
            # Before the report: the FPGA functions of Bound ARQs a host
            # reboot took are loaded again before Nova starts the guests.
            self.programs.restore_functions()
        except Exception:
            LOG.exception('Loading the FPGA functions of Bound ARQs again '
                          'failed; retried next cycle')
        try:
            # Before the report: vGPU 17 types a host reboot took are
            # written back before Nova starts the guests using them.
            self.mdevs.housekeeping()
        except Exception:
            LOG.exception('Restoring vGPU types set at bind failed; '
                          'retried next cycle')
        try:
            root = self._placement.find_provider(self.rp_name)
        except exception.SidecarError as exc:
            LOG.warning('Cannot read Placement: %s', exc)
            return False
        if root is None:
            LOG.warning('Resource provider %s (the compute node) is not in '
                        'Placement yet; nothing is reported until '
                        'nova-compute registers it', self.rp_name)
            return False
        # A device cyborg-conductor's version cannot hold is no device
        # of this host's in Cyborg (nor in Placement).
        devices = self.reporter.sendable(self.inventory.discover())
        self._watch_guests(devices)
        self._admit(root, devices)
        if self.programs.busy():
            # cyborg-conductor would rewrite the inventory of the card
            # being programmed without its reservation: report after.
            LOG.info('A device is being programmed; reporting after the '
                     'job')
            held = False
        else:
            sends = self.reporter.sends
            if not self._send(context, devices,
                              again=self.reconciler.report_due()):
                return False
            held = ((self.reporter.sends == sends and
                     not self._unverified) or
                    self._conductor_holds(devices))
            self._check_view(context, devices)
        try:
            drift = self.reconciler.converge(
                root, devices,
                report_again=lambda: self._report(context, devices,
                                                  again=True))
        except Exception:
            LOG.exception('Checking the providers of %s in Placement failed',
                          self.rp_name)
            return False
        if drift:
            LOG.warning('Placement still differs for %(n)d provider(s) of '
                        '%(host)s; checking again soon',
                        {'n': len(drift), 'host': self.rp_name})
        return held and not drift

    def _watch_guests(self, devices):
        """One device, one guest (:mod:`sidecar.discovery.guests`)."""
        if self.watch is None:
            return
        try:
            self.watch.check(devices)
        except Exception as exc:
            LOG.warning('Cannot check which domains hold the devices of '
                        'this host: %s; checked again next cycle', exc)

    def _admit(self, root, devices):
        """Record the devices found (:meth:`sidecar.state.holds.Holds.admit`);
        at the first start, those already in Placement are in service."""
        if self.holds is None:
            return
        in_service = set()
        if self.holds.first_start:
            names = {rp.get('name')
                     for rp in self._placement.providers_in_tree(root)}
            in_service = {d.address for d in devices
                          if any(report.deployable_name(self.conf.host, dep)
                                 in names for dep in d.deployables)}
        self.holds.admit([d.address for d in devices], in_service)

    def _conductor_holds(self, devices):
        """After a report in a cycle (and each cycle until it could be
        read): whether cyborg-conductor holds every deployable it named.
        What it dropped is reported again at the next cycle (sooner: the
        cycle did not converge). Cyborg's API unreadable does not hold
        the host back; the read is tried again next cycle."""
        if self.view is None:
            return True
        try:
            absent = self.view.absent(devices)
        except Exception as exc:
            if not self._unverified:
                LOG.warning('Cannot read back the deployables reported to '
                            'cyborg-conductor: %s; read again next cycle',
                            exc)
            self._unverified = True
            return True
        self._unverified = bool(absent)
        if absent:
            LOG.warning('cyborg-conductor does not hold %s after the '
                        'report; reporting again next cycle',
                        ', '.join(absent))
            self.reporter.invalidate()
            return False
        return True

    def report_now(self):
        """Send the devices if they changed (after a programming job),
        without the Placement checks of a cycle: cyborg-conductor updates
        the provider's function trait in its bind job right after
        ``fpga_program`` answers, and the next cycle checks the result."""
        with self._cycle_lock:
            if self.programs.busy():
                return
            self._send(rpc.admin_context(), self.inventory.discover())
        if self.view is not None:
            # Cyborg's program API never records the bitstream: the next
            # cycle compares. Not now: the conductor's bind job is writing
            # the provider's traits after this call.
            self.view.invalidate()

    def _check_view(self, context, devices):
        """Compare cyborg-conductor's bitstream_id of the FPGAs with the
        cards, and re-register a stale one when idle (before the
        reconciler checks Placement)."""
        if self.view is None:
            return
        try:
            self.view.check(devices, send=lambda devs: self._report(
                context, devs, again=True))
        except Exception:
            LOG.exception('Comparing the FPGAs with cyborg-conductor\'s '
                          'records failed; compared again next cycle')
            self.reporter.invalidate()

    def _report(self, context, devices, again=False):
        """Report ``devices`` if they changed (always if ``again``)."""
        if again:
            self.reporter.invalidate()
        self.reporter.report(context, devices, prepare=self._create_traits)

    def _send(self, context, devices, again=False):
        """:meth:`_report`; False if it failed (the full list is sent next
        time)."""
        try:
            self._report(context, devices, again=again)
        except Exception:
            LOG.exception('Reporting to cyborg-conductor failed; the full '
                          'device list is sent again next cycle')
            self.reporter.invalidate()
            return False
        return True

    def _create_traits(self, devices):
        """Create the custom traits of a report before sending it:
        cyborg-conductor 17 creates them by a read then a write and drops
        the device when another host's report created the trait in
        between."""
        self._placement.ensure_traits(
            {t for device in devices for dep in device.deployables
             for t in dep.traits})

    def _loop(self):
        while not self._stopping.is_set():
            if self.converged:
                delay = self.conf.sidecar.report_interval
            else:
                delay = self._backoff.next()
            self._wake.wait(delay)
            self._wake.clear()
            if self._stopping.is_set():
                break
            self.run_cycle()

    def resync(self):
        """Send the full device list and check Placement now (SIGHUP):
        after cyborg-conductor's database was restored, for example."""
        LOG.info('Full report requested')
        self.reporter.invalidate()
        if self.view is not None:
            self.view.invalidate()
        self._wake.set()

    def stop(self):
        self._stopping.set()
        self._wake.set()
        if self.control is not None:
            self.control.stop()
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
