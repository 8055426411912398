"""The other host's disk, as Nova's libvirt driver reaches it over SSH.

Nova asks a cold migration's or resize's destination for its instance
directory with ``[libvirt] remote_filesystem_transport`` (``ssh``:
``ssh <address> touch|rm|mkdir -p|rm -rf PATH``, ``scp`` for a file):
first whether the source's instance path is shared with it (a file made
there, looked for here), then to make the instance's directory there and
copy files into it. The simulated hosts have no SSH server; each is a
process with its own address (:meth:`localcloud.layout.Layout.host_address`)
and its own ``instances_path`` on one machine, so this driver stands in
for SSH: it does the same on the other host's directory. A path under
this host's ``instances_path`` is the same path under the other host's
(real hosts all have one ``instances_path``, each on its own disk); any
other path is the same on both.

The other way round, when a host asks this one whether it sees a file
it made in its own instance directory (Nova's check of shared instance
storage at a resize's revert and an evacuation), this host looks for the
same path under its own instances path.

Set up :func:`fixtures_for` in the host's process before nova-compute starts.
"""

import os
import shutil

import fixtures
from oslo_concurrency import processutils
from oslo_log import log as logging

from nova.virt.libvirt.volume import remotefs

LOG = logging.getLogger('localcloud.remotefs')


class Peers:
    """The cloud's hosts as ``host`` sees them: their addresses and
    instance paths."""

    def __init__(self, layout, host):
        self.host = host
        self.addresses = {layout.host_address(h): h for h in layout.hosts}
        self.paths = {h: layout.instances_path(h) for h in layout.hosts}

    def host_of(self, address):
        """The host at ``address`` (or named so).

        :raises: ProcessExecutionError, as ssh to an unknown host fails.
        """
        if address in self.paths:
            return address
        try:
            return self.addresses[address]
        except KeyError:
            raise processutils.ProcessExecutionError(
                exit_code=255, cmd='ssh %s' % address,
                stderr='ssh: connect to host %s: no such simulated host '
                '(hosts: %s)' % (address, ', '.join(
                    '%s %s' % item for item in sorted(
                        self.addresses.items()))))

    def path_on(self, address, path):
        """``path`` (as this host names it) on the host at ``address``."""
        host = self.host_of(address)
        mine = self.paths[self.host]
        relative = os.path.relpath(os.path.abspath(path), mine)
        if relative == os.curdir:
            return self.paths[host]
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            return path
        return os.path.join(self.paths[host], relative)

    def here(self, path):
        """``path`` (as another host names it) on this host: a path under
        another host's instances path is the same path under this
        host's."""
        for host, theirs in self.paths.items():
            relative = os.path.relpath(os.path.abspath(path), theirs)
            if host != self.host and not (
                    relative == os.pardir or
                    relative.startswith(os.pardir + os.sep)):
                return os.path.normpath(os.path.join(
                    self.paths[self.host], relative))
        return path

    def remote(self, spec):
        """A ``copy_file`` argument: ``ADDRESS:PATH`` on the other host,
        or a local path."""
        address, sep, path = spec.partition(':')
        if sep and (address in self.addresses or address in self.paths):
            return self.path_on(address, path)
        return spec


def _failed(command, exc):
    return processutils.ProcessExecutionError(
        exit_code=1, cmd=command, stderr=str(exc))


def driver_class(peers):
    """A ``RemoteFilesystemDriver`` doing SSH's work on ``peers``'
    directories (Nova creates one per ``RemoteFilesystem``, without
    arguments)."""

    class LoopbackDriver(remotefs.RemoteFilesystemDriver):

        def _do(self, command, host, path, action):
            target = peers.path_on(host, path)
            LOG.info('%s on %s (%s): %s', command, host,
                     peers.host_of(host), target)
            try:
                action(target)
            except OSError as exc:
                raise _failed('ssh %s %s %s' % (host, command, path), exc)

        def create_file(self, host, dst_path, on_execute=None,
                        on_completion=None):
            self._do('touch', host, dst_path,
                     lambda p: open(p, 'a').close())

        def remove_file(self, host, dst, on_execute=None,
                        on_completion=None):
            self._do('rm', host, dst, os.unlink)

        def create_dir(self, host, dst_path, on_execute=None,
                       on_completion=None):
            self._do('mkdir -p', host, dst_path,
                     lambda p: os.makedirs(p, exist_ok=True))

        def remove_dir(self, host, dst, on_execute=None,
                       on_completion=None):
            self._do('rm -rf', host, dst,
                     lambda p: shutil.rmtree(p, ignore_errors=True))

        def copy_file(self, src, dst, on_execute=None, on_completion=None,
                      compression=True):
            source, target = peers.remote(src), peers.remote(dst)
            LOG.info('scp %s %s: %s to %s', src, dst, source, target)
            try:
                shutil.copyfile(source, target)
            except OSError as exc:
                raise _failed('scp %s %s' % (src, dst), exc)

    return LoopbackDriver


def fixtures_for(peers):
    """Nova's SSH transport (its default ``remote_filesystem_transport``,
    which the cloud keeps) replaced by :func:`driver_class`; and the
    check by which another host asks this one whether it sees the file it
    made in its instance directory (``_is_instance_storage_shared``: a
    resize's revert, an evacuation) looks on this host's disk: on one
    machine every host sees the other's absolute path."""

    def shared_storage_remote(driver, context, data):
        return os.path.exists(peers.here(data['filename']))
    return [
        fixtures.MonkeyPatch('nova.virt.libvirt.volume.remotefs.SshDriver',
                             driver_class(peers)),
        fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'check_instance_shared_storage_remote', shared_storage_remote)]
