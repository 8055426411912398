"""systemd's part on a simulated host: the sidecar first, then nova-compute.

On a real host the sidecar's unit (``etc/nova-cyborg-sidecar.service``)
is ``Type=notify`` and ordered ``Before=nova-compute.service``: systemd
gives it a datagram socket in ``NOTIFY_SOCKET``, waits for ``READY=1``
(sd_notify(3); the sidecar sends it once its first cycle has put back
what a host reboot reset: :func:`sidecar.cmd.daemon.start_and_notify`),
and only then starts nova-compute (systemd.unit(5): ``Before=`` delays
the start of the later unit until the earlier one's start job is done,
which for ``Type=notify`` is when READY=1 arrives, systemd.service(5)).
nova-compute, starting the guests of a rebooted host
(``resume_guests_state_on_host_boot``), then finds their devices.

A simulated host runs both services in one process
(:mod:`localcloud.compute_host`), so that process plays systemd: it binds
a notify socket, names it in ``NOTIFY_SOCKET``, starts the sidecar, waits
for READY=1 and only then starts nova-compute. Unlike systemd, a sidecar
that does not get ready within ``TimeoutStartSec`` (or fails to start)
stops the whole host: a start that fails is seen at once (``host start``
reports the host's exit and its log) instead of a host whose guests
may have started without their devices.
"""

import logging
import os
import socket
import threading
import time

#: ``TimeoutStartSec`` of etc/nova-cyborg-sidecar.service.
TIMEOUT = 300

READY = 'READY=1'

#: Set once this process's sidecar has said READY=1
#: (:func:`start_in_order`): what :class:`localcloud.reboot.GuestStarts`
#: records at each guest start.
sidecar_ready = threading.Event()


class NotReady(Exception):
    """The sidecar did not say READY=1 in time."""


class NotifySocket:
    """The socket systemd listens on for a ``Type=notify`` service:
    ``AF_UNIX``, ``SOCK_DGRAM``, named in the service's NOTIFY_SOCKET
    (sd_notify(3)). ``name`` starting with ``@`` is in the abstract
    namespace (no file to leave behind; oslo.service's ``systemd`` module
    reads it so)."""

    def __init__(self, name):
        self.name = name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind('\0' + name[1:] if name.startswith('@') else name)

    def wait_ready(self, timeout=TIMEOUT, clock=time.monotonic):
        """Wait for a datagram with the assignment ``READY=1`` (a
        datagram holds newline-separated assignments, sd_notify(3));
        other assignments (STATUS=...) are read and skipped.

        :raises: NotReady after ``timeout`` seconds.
        """
        deadline = clock() + timeout
        while True:
            left = deadline - clock()
            if left <= 0:
                raise NotReady('no %s on %s within %d s' % (
                    READY, self.name, timeout))
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            if READY in data.decode('utf-8', 'replace').split('\n'):
                return

    def close(self):
        self.sock.close()


def start_in_order(start_sidecar, start_compute, name=None,
                   timeout=TIMEOUT, out=print, clock=time.monotonic):
    """Start the sidecar, wait for its READY=1, then start nova-compute;
    returns what ``start_compute()`` returns.

    :param start_sidecar: starts the sidecar (in a thread that sends
        READY=1 through ``NOTIFY_SOCKET`` once ready) and returns.
    :param start_compute: runs nova-compute.
    :param name: the socket's name (default: abstract, this process's).
    :raises: NotReady (nova-compute not started).
    """
    name = name or '@nova-cyborg-sidecar-notify-%d' % os.getpid()
    notify = NotifySocket(name)
    began = clock()
    try:
        os.environ['NOTIFY_SOCKET'] = name
        start_sidecar()
        notify.wait_ready(timeout, clock=clock)
    except BaseException:
        os.environ.pop('NOTIFY_SOCKET', None)
        raise
    finally:
        notify.close()
    sidecar_ready.set()
    _wait_unset(clock)
    out('Sidecar READY (%s) after %.1f s; starting nova-compute' % (
        READY, clock() - began))
    return start_compute()


def start_sidecar(config_file, connection, ready_file=None):
    """Build the host's sidecar and start it in a thread, through
    :func:`sidecar.cmd.daemon.start_and_notify` as the daemon starts:
    READY=1 once its first cycle ran. Once Placement matches the host's
    devices (the sidecar's cycles retry until it does), ``ready_file`` is
    written. A sidecar that fails to start stops the host."""
    import oslo_messaging as messaging
    from oslo_config import cfg

    from sidecar import conf as sidecar_conf
    from sidecar.daemon import factory
    from sidecar import privileged

    # Until nova-compute sets up logging (oslo.log replaces the root
    # logger's handlers), the sidecar's first cycle logs to stderr: the
    # host's log.
    logging.basicConfig(level=logging.INFO, format=(
        '%(asctime)s %(process)d %(levelname)s %(name)s %(message)s'))
    conf = cfg.ConfigOpts()
    sidecar_conf.register_opts(conf)
    conf(['--config-file', config_file], project='nova-cyborg',
         default_config_files=[], default_config_dirs=[])
    # Privileged sysfs writes run in this process (as root), as Nova's do
    # here (PrivsepFixture).
    privileged.sidecar_pctxt.set_client_mode(False)
    transport = messaging.get_rpc_transport(conf)
    sidecar = factory.build(conf, transport=transport,
                            connect=lambda: connection)
    threading.Thread(target=_run_sidecar, args=(sidecar, ready_file),
                     name='sidecar', daemon=True).start()
    return sidecar


def _run_sidecar(sidecar, ready_file=None):
    from sidecar.cmd import daemon
    try:
        daemon.start_and_notify(sidecar)
    except Exception:
        # Before logging is set up (nova-compute is not started yet).
        import traceback
        traceback.print_exc()
        print('The sidecar failed to start; stopping the host', flush=True)
        os._exit(1)
    if ready_file:
        while not sidecar.converged:
            time.sleep(0.5)
        with open(ready_file, 'w') as f:
            f.write('%d\n' % os.getpid())


def _wait_unset(clock, timeout=5.0):
    """nova-compute inherits no NOTIFY_SOCKET: the sidecar's
    ``notify_once`` removes it right after its READY=1 (oslo.service's
    ``systemd._sd_notify``; removing it here first made its own removal
    fail). Removed here if it is still set after ``timeout``."""
    deadline = clock() + timeout
    while 'NOTIFY_SOCKET' in os.environ and clock() < deadline:
        time.sleep(0.01)
    os.environ.pop('NOTIFY_SOCKET', None)
