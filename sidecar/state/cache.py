"""One JSON state file under ``[sidecar] state_path``, written atomically
and never silently dropped when corrupt.

A write goes to a temporary file in the same directory, is fsynced, renamed
over the file, and the directory is fsynced: a crash leaves the old or the
new content, never a mix. A file that cannot be read or parsed is renamed
``<file>.corrupt-<UTC timestamp>`` (kept for the operator) with an ERROR
log, and the caller starts from nothing.
"""

import json
import os
import tempfile
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: What :meth:`StateFile.load` returns for a quarantined file.
CORRUPT = {}


def quarantine(path, reason, clock=time.time):
    """Rename ``path`` aside; return the new name."""
    stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(clock()))
    target = '%s.corrupt-%s' % (path, stamp)
    n = 1
    while os.path.exists(target):
        n += 1
        target = '%s.corrupt-%s-%d' % (path, stamp, n)
    os.replace(path, target)
    LOG.error('State file %(path)s is corrupt (%(reason)s); it is kept as '
              '%(target)s and the sidecar starts without it',
              {'path': path, 'reason': reason, 'target': target})
    return target


def write_atomic(path, data):
    directory = os.path.dirname(path) or '.'
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-')
    try:
        with os.fdopen(fd, 'w') as f:
            json.dump(data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class StateFile:
    """A JSON object in one file."""

    def __init__(self, path):
        self.path = path
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, mode=0o700, exist_ok=True)

    def load(self):
        """The object in the file; None if there is no file; an empty
        dict (:data:`CORRUPT`) after quarantining a corrupt one."""
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            quarantine(self.path, exc)
            return dict(CORRUPT)
        if not isinstance(data, dict):
            quarantine(self.path, 'not a JSON object')
            return dict(CORRUPT)
        return data

    def save(self, data):
        write_atomic(self.path, data)


def open_in(state_path, name):
    """``(StateFile, its object or None)`` of file ``name`` under
    ``state_path``; ``(None, None)`` without a state path (memory only)."""
    if not state_path:
        return None, None
    state_file = StateFile(os.path.join(state_path, name))
    return state_file, state_file.load()
