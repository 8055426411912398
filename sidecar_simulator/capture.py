"""A host captured by ``nova-cyborg-sidecar-manage capture``, as a sysfs
root a test points the sidecar at: a user's bug report becomes a
regression test::

    root = capture.load('report.tar.gz', '/tmp/sys')
    conf.set_override('sysfs_root', root, group='sidecar')

The archive comes from someone else's host: it is treated as hostile.
Every member is checked before anything is written, and one bad member
refuses the whole archive (:class:`UnsafeArchive`, naming it), with
nothing written: only ``sysfs/<relative path>`` (and the manifest),
regular files, directories and symlinks; no absolute path, no ``..``, no
member reached through a symlink of the archive, no link whose target is
absolute, leaves the root or has a ``..`` after a name
(:func:`sidecar.cmd.capture.link_problem`); bounded member count and
sizes. Files are written with mode 0644 (0200 bits kept for write-only
ones), never through a link; links are made last.
"""

import json
import os
import tarfile

from sidecar.cmd import capture as sidecar_capture

PREFIX = 'sysfs/'
MANIFEST = 'MANIFEST.json'
MAX_MEMBERS = 250000
MAX_FILE = 1024 * 1024
MAX_TOTAL = 64 * 1024 * 1024


class UnsafeArchive(ValueError):
    """The archive holds something a capture never does."""


def _relpath(member):
    name = member.name
    if name.startswith('/') or '\\' in name or '\0' in name:
        raise UnsafeArchive('member %r: not a relative POSIX path' % name)
    if not name.startswith(PREFIX):
        raise UnsafeArchive('member %r: outside %s' % (name, PREFIX))
    rel = name[len(PREFIX):].rstrip('/')
    parts = rel.split('/')
    if not rel or any(part in ('', '.', '..') for part in parts):
        raise UnsafeArchive('member %r: empty, "." or ".." in its path'
                            % name)
    return rel


def _check_link(rel, target):
    why = sidecar_capture.link_problem(rel, target)
    if why:
        raise UnsafeArchive('link %s: %s' % (rel, why))


def _members(tar):
    """``{relpath: member}`` of the sysfs members, all checked."""
    members, total, count = {}, 0, 0
    for member in tar:
        count += 1
        if count > MAX_MEMBERS:
            raise UnsafeArchive('more than %d members' % MAX_MEMBERS)
        if (member.name == MANIFEST and member.isfile() or
                member.name.rstrip('/') == PREFIX.rstrip('/') and
                member.isdir()):
            continue  # the root itself: made by load
        rel = _relpath(member)
        if not (member.isdir() or member.isfile() or member.issym()):
            raise UnsafeArchive('member %r: neither a file, a directory '
                                'nor a symlink' % member.name)
        if rel in members:
            raise UnsafeArchive('member %r appears twice' % member.name)
        if member.issym():
            _check_link(rel, member.linkname)
        elif member.isfile():
            if member.size > MAX_FILE:
                raise UnsafeArchive('member %r: larger than %d bytes'
                                    % (member.name, MAX_FILE))
            total += member.size
            if total > MAX_TOTAL:
                raise UnsafeArchive('more than %d bytes' % MAX_TOTAL)
        members[rel] = member
    links = {rel for rel, member in members.items() if member.issym()}
    for rel in members:
        parts = rel.split('/')
        for i in range(1, len(parts)):
            if '/'.join(parts[:i]) in links:
                raise UnsafeArchive('member %s is reached through the link '
                                    '%s' % (rel, '/'.join(parts[:i])))
        if members[rel].isfile() or members[rel].issym():
            for i in range(1, len(parts)):
                parent = members.get('/'.join(parts[:i]))
                if parent is not None and parent.isfile():
                    raise UnsafeArchive('member %s is under the file %s'
                                        % (rel, '/'.join(parts[:i])))
    return members


def _write_file(path, data, mode):
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o644 | (mode & 0o200))
    with os.fdopen(fd, 'wb') as f:
        f.write(data)


def load(archive, root):
    """Unpack the capture ``archive`` (a path) into ``root``, which must
    not exist or be empty; return ``root``. Raises :class:`UnsafeArchive`
    (nothing written) for an archive no capture gives."""
    if os.path.lexists(root) and (not os.path.isdir(root) or
                                  os.path.islink(root) or os.listdir(root)):
        raise UnsafeArchive('%s exists and is not an empty directory' % root)
    try:
        with tarfile.open(archive, 'r:gz') as tar:
            members = _members(tar)
            data = {rel: tar.extractfile(member).read(MAX_FILE + 1)
                    for rel, member in members.items() if member.isfile()}
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise UnsafeArchive('%s is not a readable tar.gz archive: %s'
                            % (archive, exc))
    if any(len(value) > MAX_FILE for value in data.values()):
        raise UnsafeArchive('a member is larger than its header says')
    os.makedirs(root, exist_ok=True)
    ordered = sorted(members)
    for rel in ordered:  # directories first: links are made last
        if members[rel].isdir():
            os.makedirs(os.path.join(root, rel), exist_ok=True)
    for rel in ordered:
        member = members[rel]
        if member.isfile():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _write_file(path, data[rel], member.mode)
    for rel in ordered:
        member = members[rel]
        if member.issym():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(member.linkname, path)
    return root


def manifest(archive):
    """The capture's ``MANIFEST.json`` (what was scrubbed and skipped)."""
    with tarfile.open(archive, 'r:gz') as tar:
        member = tar.getmember(MANIFEST)
        if not member.isfile() or member.size > MAX_FILE:
            raise UnsafeArchive('%s is not a small file' % MANIFEST)
        return json.loads(tar.extractfile(member).read())
