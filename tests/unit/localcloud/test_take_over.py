"""A host's own boots and deletes never look like a live migration's
arrival to ``Migrations.take_over`` (issue 26: with 8 boots at once on one
host, a boot hung in BUILD/spawning, undeletable).

``take_over`` compares the connection's domains with the files the host
owns. A boot defines its domain, then writes its files; a delete
undefines it, then removes them. A take-over that listed the connection's
domains before such a boot's define and read the files after its write
defined the booting domain a second time, shut off, in its place: Nova
then waited for ever for the domain it had started to run. One that
listed them after a delete's undefine and read the files before their
removal brought the deleted domain back.

Each test holds one thread at the point where the other used to slip in,
and lets it go on only once the other thread has done its step or waits
for the host's lock: the interleaving is forced, with events and no
sleep, whatever the scheduler does.
"""

import threading

import fixtures
import testtools

from localcloud import compute_host
from localcloud import migration
from nova.tests.fixtures import libvirt as fakelibvirt
from tests.unit.localcloud import test_migration as base

#: Seconds a thread waits for the other's step at most.
DEADLINE = 60
UUID = base.UUID
OTHER = '66666666-7777-8888-9999-000000000000'
#: Another server's domain (fakelibvirt keys domains by name).
OTHER_DOMAIN = base.DOMAIN.replace('instance-0001', 'instance-0002')


class _ObservedLock:
    """The host's reentrant lock, which sets ``waited`` whenever a thread
    has to wait for it."""

    def __init__(self, waited):
        self._lock = threading.RLock()
        self.waited = waited

    def __enter__(self):
        if not self._lock.acquire(blocking=False):
            self.waited.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc):
        self._lock.release()


class _Thread(threading.Thread):
    """Runs ``target``; keeps what it returned or raised."""

    def __init__(self, target):
        super().__init__(daemon=True)
        self._target_call = target
        self.result = self.error = None

    def run(self):
        try:
            self.result = self._target_call()
        except Exception as exc:
            self.error = exc

    def finish(self, test):
        self.join(DEADLINE)
        test.assertFalse(self.is_alive(), 'thread still running')
        return self.result, self.error


class TakeOverRaceTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conn = base._connection('compute1')
        self.logger = self.useFixture(fixtures.FakeLogger(
            name='localcloud.migration'))
        self.files = compute_host.DomainFiles(self.dir, 'compute1')
        #: Set once the held thread may go on.
        self.progressed = threading.Event()
        self.files.lock = _ObservedLock(self.progressed)

    def _patch_host(self):
        for fixture in (self.files.fixtures() +
                        migration.Migrations(self.files).fixtures()):
            self.useFixture(fixture)

    def _hold(self, function, reached):
        """``function`` that, called, sets ``reached`` and waits for
        ``self.progressed`` before it does its work."""
        def held(*args, **kwargs):
            reached.set()
            self.assertTrue(self.progressed.wait(DEADLINE))
            return function(*args, **kwargs)
        return held

    def test_boot_while_a_lookup_takes_domains_over(self):
        self._patch_host()
        # Another server of this host, running: Nova's periodic tasks and
        # its boots list and look up domains all the time.
        other = self.conn.defineXML(OTHER_DOMAIN % (OTHER, 2))
        other.createWithFlags(0)
        reading = threading.Event()
        # The take-over has listed the connection's domains; it reads the
        # host's files once the boot below has defined its domain.
        self.files.saved = self._hold(self.files.saved, reading)
        lookup = _Thread(lambda: self.conn.listAllDomains(base.ALL))
        lookup.start()
        self.assertTrue(reading.wait(DEADLINE))

        def boot():
            domain = self.conn.defineXML(base.DOMAIN % (UUID, 1))
            self.progressed.set()
            domain.createWithFlags(0)
            return domain
        booting = _Thread(boot)
        booting.start()
        domain, error = booting.finish(self)
        self.assertIsNone(error)
        self.assertIsNone(lookup.finish(self)[1])

        # What Nova waits on after it started the guest: the domain it
        # defined, running; the only one with its UUID.
        found = self.conn.lookupByUUIDString(UUID)
        self.assertIs(domain, found)
        self.assertEqual(fakelibvirt.VIR_DOMAIN_RUNNING, found.info()[0])
        self.assertEqual(
            sorted([UUID, OTHER]),
            sorted(d.UUIDString() for d in self.conn.listAllDomains(
                base.ALL)))
        self.assertNotIn('migrated to this host', self.logger.output)

    def test_delete_while_a_lookup_takes_domains_over(self):
        removing = threading.Event()
        # The delete has undefined the domain; it removes the domain's
        # files once the lookup below is done or waits for the host.
        self.files.remove = self._hold(self.files.remove, removing)
        self._patch_host()
        domain = self.conn.defineXML(base.DOMAIN % (UUID, 1))
        domain.createWithFlags(0)

        def delete():
            domain.destroy()
            domain.undefine()
        deleting = _Thread(delete)
        deleting.start()
        self.assertTrue(removing.wait(DEADLINE))

        def lookup():
            try:
                return self.conn.lookupByUUIDString(UUID)
            finally:
                self.progressed.set()
        looking = _Thread(lookup)
        looking.start()
        self.assertIsNone(deleting.finish(self)[1])
        found, error = looking.finish(self)

        # The deleted domain stays deleted: not found, then or now.
        self.assertIsNone(found)
        self.assertEqual(fakelibvirt.VIR_ERR_NO_DOMAIN,
                         error.get_error_code())
        error = self.assertRaises(fakelibvirt.libvirtError,
                                  self.conn.lookupByUUIDString, UUID)
        self.assertEqual(fakelibvirt.VIR_ERR_NO_DOMAIN,
                         error.get_error_code())
        self.assertEqual([], self.conn.listAllDomains(base.ALL))
        self.assertEqual({}, self.files.saved())
        self.assertNotIn('migrated to this host', self.logger.output)
