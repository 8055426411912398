"""The tar.gz archive ``nova-cyborg-sidecar-manage capture`` writes.

The capture (:mod:`sidecar.cmd.capture`) reads the host; this module only
writes its result to the file the operator named, as a new file (never
over one), with fixed owners and times so that the same host gives the
same bytes.
"""

import gzip
import io
import json
import os
import tarfile

MANIFEST = 'MANIFEST.json'


def _tarinfo(name, **fields):
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, '', ''
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def write(output, entries, manifest, prefix):
    """Write a new tar.gz ``output``: ``MANIFEST.json`` (``manifest``),
    then each of ``entries`` (``{relpath: ('file', bytes) | ('link',
    target)}``) as ``<prefix>/<relpath>``, in path order. Raises
    FileExistsError if ``output`` exists."""
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, 'wb') as raw, \
            gzip.GzipFile(fileobj=raw, mode='wb', mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode='w',
                         format=tarfile.PAX_FORMAT) as tar:
        data = json.dumps(manifest, indent=2, sort_keys=True).encode()
        tar.addfile(_tarinfo(MANIFEST, size=len(data), mode=0o644),
                    io.BytesIO(data))
        for relpath in sorted(entries):
            kind, value = entries[relpath]
            name = '%s/%s' % (prefix, relpath)
            if kind == 'link':
                tar.addfile(_tarinfo(name, type=tarfile.SYMTYPE,
                                     linkname=value, mode=0o777))
            else:
                tar.addfile(_tarinfo(name, size=len(value), mode=0o644),
                            io.BytesIO(value))
