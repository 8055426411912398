"""A libvirtd of the tests' own, and the pieces of Nova's libvirt driver
the project's code is given on a compute host.

The daemon is Debian's ``libvirtd`` in session mode: its sockets, domain
definitions, logs and QEMU's state live in a temporary directory, no
systemd, no system service, nothing under /etc or /var. Run as root, it
runs as ``nobody`` (a root libvirtd is the system daemon, whose paths are
fixed); the tests reach it as root through its socket. One daemon serves
the whole test process (Nova's ``Host`` runs libvirt's event loop in a
thread that never ends: one per process); it is stopped at exit, and
``--timeout`` ends it anyway once the process is gone and no guest runs.

Without ``libvirtd`` or ``qemu-system-x86_64`` the tests skip, naming
what is missing; with ``NOVA_CYBORG_REQUIRE_LIBVIRTD=1`` (CI) they fail.
"""

import atexit
import os
import pwd
import shutil
import subprocess
import tempfile
import threading

import libvirt
from nova.virt import fake as fake_virt
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import cfg

from tests import waiting

REQUIRE_ENV = 'NOVA_CYBORG_REQUIRE_LIBVIRTD'
BINARIES = ('libvirtd', 'qemu-system-x86_64', 'virt-xml-validate',
            'xmllint')
QEMU = '/usr/bin/qemu-system-x86_64'
#: How long the daemon may take to answer, a guest to start or stop.
DEADLINE = 60

_LOCK = threading.Lock()
_DAEMON = None
_DRIVER = None


def missing():
    """The binaries the tests need that this host lacks."""
    return [name for name in BINARIES
            if shutil.which(name, path=os.environ.get('PATH', '') +
                            ':/usr/sbin:/sbin') is None]


def require(testcase):
    """Skip ``testcase`` (fail it where ``NOVA_CYBORG_REQUIRE_LIBVIRTD``
    is set) if libvirtd or QEMU is missing."""
    absent = missing()
    if not absent:
        return
    why = ('%s not installed (Debian: libvirt-daemon '
           'libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 '
           'libxml2-utils)'
           % ', '.join(absent))
    if os.environ.get(REQUIRE_ENV) == '1':
        testcase.fail(why)
    testcase.skipTest(why)


class Daemon(object):
    """A session libvirtd in a temporary directory."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix='nova-cyborg-libvirtd-')
        self.user = None
        if os.geteuid() == 0:
            self.user = pwd.getpwnam('nobody')
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        run = os.path.join(self.root, 'run')
        self.socket = os.path.join(run, 'libvirt', 'libvirt-sock')
        self.uri = 'qemu+unix:///session?socket=' + self.socket
        self.env = dict(os.environ, HOME=self.root, XDG_RUNTIME_DIR=run,
                        XDG_CONFIG_HOME=os.path.join(self.root, 'config'),
                        XDG_CACHE_HOME=os.path.join(self.root, 'cache'),
                        XDG_DATA_HOME=os.path.join(self.root, 'data'))
        self.process = None
        self.log = os.path.join(self.root, 'libvirtd.log')

    def _as_user(self):
        if self.user is None:
            return []
        return ['setpriv', '--reuid=%d' % self.user.pw_uid,
                '--regid=%d' % self.user.pw_gid, '--clear-groups',
                '--pdeathsig=SIGTERM']

    def path(self, name):
        """A file in the daemon's directory that QEMU may read."""
        path = os.path.join(self.root, name)
        if self.user is not None:
            with open(path, 'ab'):
                pass
            os.chown(path, self.user.pw_uid, self.user.pw_gid)
        return path

    def start(self):
        libvirtd = shutil.which('libvirtd', path=os.environ.get('PATH', '') +
                                ':/usr/sbin:/sbin')
        with open(self.log, 'ab') as log:
            self.process = subprocess.Popen(
                self._as_user() + [libvirtd, '--timeout', '120'],
                env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.root)

        def answers():
            if self.process.poll() is not None:
                raise AssertionError('libvirtd exited: %s' % self.tail())
            if not os.path.exists(self.socket):
                return None
            try:
                libvirt.open(self.uri).close()
            except libvirt.libvirtError:
                return None
            return True
        waiting.wait_until(answers, 'libvirtd at %s' % self.socket,
                           DEADLINE, 0.05)

    def tail(self, lines=20):
        try:
            with open(self.log, errors='replace') as log:
                return ''.join(log.readlines()[-lines:])
        except OSError:
            return ''

    def stop(self):
        """Stop every guest, then the daemon; remove its directory."""
        if self.process is not None and self.process.poll() is None:
            try:
                conn = libvirt.open(self.uri)
                for domain in conn.listAllDomains(1):
                    domain.destroy()
                conn.close()
            except libvirt.libvirtError:
                pass
            self.process.terminate()
            try:
                self.process.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def daemon():
    """The process's libvirtd, started on first use."""
    global _DAEMON
    with _LOCK:
        if _DAEMON is None:
            started = Daemon()
            try:
                started.start()
            except Exception:
                started.stop()
                raise
            atexit.register(started.stop)
            _DAEMON = started
        return _DAEMON


def _start_events(host):
    """libvirt's event loop as ``Host.initialize()`` starts it in native
    threading mode (nova-compute's): a daemon thread that runs it, each
    event handed to the driver on that thread. Without the rest of
    ``initialize()``: its thread pool (connection-lost events, STOPPED
    events delayed 15 s) would keep the test process from exiting; here
    every event reaches the driver at once."""
    libvirt.registerErrorHandler(host._libvirt_error_handler, None)
    host._event_handler._lifecycle_event_handler = host._event_emit
    host._event_handler.start()
    host._initialized = True


def driver():
    """Nova's LibvirtDriver with a real ``nova.virt.libvirt.host.Host``
    connected to :func:`daemon`, its event thread running (libvirt's
    device-removed events reach the driver's waiters)."""
    global _DRIVER
    uri = daemon().uri
    with _LOCK:
        if _DRIVER is None:
            conf = cfg.CONF
            conf.set_override('connection_uri', uri, group='libvirt')
            conf.set_override('virt_type', 'qemu', group='libvirt')
            try:
                made = libvirt_driver.LibvirtDriver(
                    fake_virt.FakeVirtAPI(), False)
            finally:
                conf.clear_override('connection_uri', group='libvirt')
                conf.clear_override('virt_type', group='libvirt')
            _start_events(made._host)
            made._host.get_connection()
            _DRIVER = made
        return _DRIVER


def domain_xml(name, uuid, devices=''):
    """A TCG guest with no OS (nothing to boot: SeaBIOS waits), on the
    ``pc`` machine, whose PCI slots QEMU hot-plugs through ACPI."""
    return (
        "<domain type='qemu'><name>%s</name><uuid>%s</uuid>"
        "<memory unit='MiB'>32</memory><vcpu>1</vcpu>"
        "<os><type arch='x86_64' machine='pc'>hvm</type></os>"
        "<features><acpi/></features><on_reboot>restart</on_reboot>"
        "<devices><emulator>%s</emulator>%s</devices></domain>"
        % (name, uuid, QEMU, devices))
