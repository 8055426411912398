# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The series applied to a Nova tree, recorded beside it.

``apply`` copies the series it applied into the metadata directory of the
Nova distribution it patched (``nova-<version>.dist-info/
nova-cyborg-series/``); ``revert`` removes the copy. The record is only
a hint: before it is used, the tree is checked to hold exactly that series
(every hunk, by content), so a record that outlived its files (pip leaves
files it did not install when it removes Nova) changes nothing.

With it, a nova-cyborg upgrade needs no revert by the old release first:
when another release's series is applied (the new release's series
differs for the same Nova), :func:`replacement` reverts the recorded
series and applies the new one in one step, all files or none, and
``revert`` reverts whichever of the two is applied.
"""

import glob
import os
import shutil

from nova_cyborg_patch import series as _series

RECORD = 'nova-cyborg-series'


def record_dir(target):
    """Where the record of ``target``'s Nova is, or None without a
    dist-info (a tree pip did not install: nothing is recorded)."""
    found = glob.glob(os.path.join(target, 'nova-*.dist-info'))
    if len(found) != 1:
        return None
    return os.path.join(found[0], RECORD)


def _files(series_dir):
    return ['series'] + _series.series_names(series_dir)


def _content(series_dir):
    content = {}
    for name in _files(series_dir):
        with open(os.path.join(series_dir, name), 'rb') as f:
            content[name] = f.read()
    return content


def save(target, series_dir):
    """Record ``series_dir``'s series as the one applied to ``target``."""
    where = record_dir(target)
    if where is None:
        return
    staged = where + '.new'
    shutil.rmtree(staged, ignore_errors=True)
    os.makedirs(staged)
    for name, data in _content(series_dir).items():
        with open(os.path.join(staged, name), 'wb') as f:
            f.write(data)
    shutil.rmtree(where, ignore_errors=True)
    os.replace(staged, where)


def clear(target):
    where = record_dir(target)
    if where is not None:
        shutil.rmtree(where, ignore_errors=True)


def other_series(target, series_dir):
    """The recorded series if it differs from ``series_dir``'s, else None.

    :raises: SeriesError if the record cannot be read.
    """
    where = record_dir(target)
    if where is None or not os.path.isdir(where):
        return None
    try:
        if _content(where) == _content(series_dir):
            return None
    except OSError as exc:
        raise _series.SeriesError('cannot read the recorded series %s: %s'
                                  % (where, exc))
    return _series.load_series(where)


class Replacement(object):
    """The recorded series reverted and the new one applied, in memory:
    what :func:`nova_cyborg_patch.series.commit` writes."""

    def __init__(self, target, reverted, applied):
        self.target = target
        self.reverted = reverted
        self.applied = applied
        self.originals = dict(reverted.originals)
        self.contents = dict(reverted.contents)
        self.contents.update(applied.contents)
        for rel, lines in applied.originals.items():
            self.originals.setdefault(rel, lines)

    changed = _series.Evaluation.changed


class _OnReverted(_series.Evaluation):
    """An evaluation of the new series on the tree as the revert of the
    recorded one leaves it (not yet written)."""

    def __init__(self, target, patches, reverted, max_offset=0):
        self._reverted = reverted
        super().__init__(target, patches, max_offset=max_offset)

    def _read(self, rel):
        if rel in self._reverted.contents:
            lines = self._reverted.contents[rel]
            self.originals[rel] = self.contents[rel] = lines
            return lines
        return super()._read(rel)


def applied_other(target, series_dir, max_offset=0):
    """The revert of the recorded series, when it differs from
    ``series_dir``'s and is what the tree holds (fully applied); else
    None."""
    old = other_series(target, series_dir)
    if old is None:
        return None
    reverted = _series.Evaluation(target, old, revert=True,
                                  max_offset=max_offset)
    if reverted.state() != _series.FULLY_APPLIED:
        return None
    return reverted


def replacement(reverted, new_patches, max_offset=0):
    """The replacement of the recorded series (``reverted``, from
    :func:`applied_other`) by ``new_patches``, or None if the new series
    does not apply once the old one is reverted."""
    target = reverted.target
    applied = _OnReverted(target, new_patches, reverted,
                          max_offset=max_offset)
    if applied.state() != _series.NOT_APPLIED:
        return None
    return Replacement(target, reverted, applied)
