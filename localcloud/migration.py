"""Live migration between the local cloud's simulated compute hosts.

Each compute host is its own process with its own fakelibvirt connection
(:mod:`localcloud.compute_host`), and fakelibvirt's
``Domain.migrateToURI3`` fails always: it cannot reach another process.
The hosts share the domain directory of
:class:`localcloud.compute_host.DomainFiles` (``<uuid>.xml``, ``.state``
and ``.host``, the host that owns the domain), so a domain is handed over
the way libvirt does it, through that directory:

* the source's ``migrateToURI3(dconnuri, params, flags)`` names the
  destination in ``dconnuri``: Nova's URI for ``virt_type = qemu`` is
  ``qemu+tcp://<address>/system``, the address being the destination's
  ``[libvirt] live_migration_inbound_addr`` (each simulated host has its
  own loopback address, :meth:`localcloud.layout.Layout.host_address`;
  ``addresses`` maps it to the host) or, without it, the destination's
  host name; it writes ``params['destination_xml']``
  (the guest XML Nova updated for the destination: PCI addresses, mdev
  UUIDs) as the domain's XML, running (paused if it is), and then names
  the destination in ``<uuid>.host``, the switch-over; then it completes
  the source's job
  (``complete_job()``, as Nova's functional tests' ``_migrate_stub``), so
  that Nova's migration monitor on the source runs ``_post_live_migration``
  (which destroys and undefines the source's copy; ``DomainFiles`` then
  leaves the files alone: they are the destination's);
* the destination's connection takes the domain over when Nova first asks
  for it (``lookupByUUIDString``, ``lookupByName``, ``listAllDomains``):
  a domain the directory says this host owns and the connection does not
  have is defined and started from its XML. That comparison, and the
  lookup after it, hold the host's ``DomainFiles.lock``, under which the
  host's own threads define a domain and write its files, or undefine it
  and remove them: a domain being booted (defined, its files written, not
  yet started) or deleted on this host is never taken for one that
  arrived (a boot's domain was defined a second time, shut off, and the
  boot waited for it to run, for ever).

A migration that cannot be handed over fails the source's job
(``fail_job()``): Nova's monitor runs ``_rollback_live_migration`` and the
domain stays on the source, untouched. That happens when the URI names no
other host, when the destination XML is not the domain's, and on purpose
when a file ``<uuid>.fail-migration`` is in the directory (a test's way to
make one migration fail; the file is removed and its text, if any, logged
as the reason).
"""

import os
from urllib import parse
from xml.etree import ElementTree

import fixtures
from oslo_log import log as logging

from nova.tests.fixtures import libvirt as fakelibvirt

from localcloud import layout

LOG = logging.getLogger('localcloud.migration')

#: A file ``<uuid><FAIL_SUFFIX>`` in the domain directory makes the next
#: migration of that domain fail at the source.
FAIL_SUFFIX = layout.MIGRATION_FAIL_SUFFIX


class MigrationRefused(Exception):
    """The source cannot hand the domain over; the message says why."""


def destination_host(dconnuri):
    """The host named by a libvirt migration URI such as
    ``qemu+tcp://compute2/system``.

    :raises: MigrationRefused if the URI names no host.
    """
    host = parse.urlsplit(dconnuri or '').hostname
    if not host:
        raise MigrationRefused('the migration URI %r names no destination '
                               'host' % (dconnuri,))
    return host


def _domain_uuid(xml):
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as e:
        raise MigrationRefused('the destination XML is not XML: %s' % e)
    uuid = root.findtext('uuid')
    if not uuid:
        raise MigrationRefused('the destination XML names no domain uuid')
    return uuid.strip()


class Migrations:
    """Live migration through the shared directory of ``files`` (the
    host's :class:`~localcloud.compute_host.DomainFiles`); ``addresses``
    maps the hosts' migration addresses to their names."""

    def __init__(self, files, addresses=None):
        self.files = files
        self.addresses = dict(addresses or {})

    def _path(self, uuid, suffix):
        return os.path.join(self.files.directory, uuid + suffix)

    def _replace(self, uuid, suffix, text):
        path = self._path(uuid, suffix)
        with open(path + '.tmp', 'w') as f:
            f.write(text)
        os.replace(path + '.tmp', path)

    def _failure_asked(self, uuid):
        """The reason a test asked this migration to fail, or None."""
        path = self._path(uuid, FAIL_SUFFIX)
        try:
            with open(path) as f:
                reason = f.read().strip()
        except FileNotFoundError:
            return None
        os.unlink(path)
        return reason or 'asked by %s' % path

    def hand_over(self, domain, dconnuri, params):
        """Write the domain as the destination's; return the destination.

        :raises: MigrationRefused (nothing written)
        """
        uuid = domain.UUIDString()
        dest = destination_host(dconnuri)
        dest = self.addresses.get(dest, dest)
        if dest == self.files.host:
            raise MigrationRefused('the migration URI %r names this host' %
                                   dconnuri)
        xml = (params or {}).get('destination_xml') or domain.XMLDesc(0)
        if _domain_uuid(xml) != uuid:
            raise MigrationRefused('the destination XML is domain %s\'s, '
                                   'not %s\'s' % (_domain_uuid(xml), uuid))
        reason = self._failure_asked(uuid)
        if reason:
            raise MigrationRefused(reason)
        self._replace(uuid, '.xml', xml)
        # A paused guest stays paused on the destination (as libvirt
        # does); any other arrives running.
        state = (fakelibvirt.VIR_DOMAIN_PAUSED
                 if domain.info()[0] == fakelibvirt.VIR_DOMAIN_PAUSED
                 else fakelibvirt.VIR_DOMAIN_RUNNING)
        self._replace(uuid, '.state', '{"state": %d, "managed_save": false}'
                      % state)
        # The switch-over: from here the domain is the destination's.
        self._replace(uuid, '.host', dest)
        return dest

    def migrate(self, domain, dconnuri, params, flags):
        """``Domain.migrateToURI3`` of the source host."""
        try:
            dest = self.hand_over(domain, dconnuri, params)
        except (MigrationRefused, OSError) as e:
            LOG.warning('Live migration of domain %s to %s failed, the '
                        'domain stays on %s: %s', domain.UUIDString(),
                        dconnuri, self.files.host, e)
            domain.fail_job()
            return
        LOG.info('Live migration of domain %s handed it over to %s',
                 domain.UUIDString(), dest)
        domain.complete_job()

    def take_over(self, connection):
        """Define and start in ``connection`` the domains that the
        directory says this host owns and that it does not have yet (a
        live migration's destination). Returns their UUIDs."""
        taken = []
        with self.files.lock:
            have = {dom.UUIDString() for dom in connection._vms.values()}
            for uuid, (xml, state) in self.files.saved().items():
                if uuid in have:
                    continue
                domain = connection.defineXML(xml)
                power = state.get('state', fakelibvirt.VIR_DOMAIN_RUNNING)
                if power in (fakelibvirt.VIR_DOMAIN_RUNNING,
                             fakelibvirt.VIR_DOMAIN_PAUSED):
                    domain.createWithFlags(0)
                if power == fakelibvirt.VIR_DOMAIN_PAUSED:
                    domain.suspend()
                taken.append(uuid)
        for uuid in taken:
            LOG.info('Domain %s migrated to this host (%s): defined and '
                     'started', uuid, self.files.host)
        return taken

    def fixtures(self):
        """The patches of fakelibvirt that do the above; set them up
        after the host's ``DomainFiles.fixtures()`` (the domains taken
        over are written as this host's)."""
        migrations = self
        result = [fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3',
            lambda domain, dconnuri, params, flags: migrations.migrate(
                domain, dconnuri, params, flags))]
        for name in ('lookupByUUIDString', 'lookupByName',
                     'listAllDomains'):
            real = getattr(fakelibvirt.Connection, name, None)
            if real is None:
                continue

            def wrapper(conn, *args, _real=real, **kwargs):
                with migrations.files.lock:
                    migrations.take_over(conn)
                    return _real(conn, *args, **kwargs)
            result.append(fixtures.MonkeyPatch(
                'nova.tests.fixtures.libvirt.Connection.' + name, wrapper))
        return result
