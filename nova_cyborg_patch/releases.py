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

"""Which patch series fits a Nova tree: by its version, else by content.

One series per supported release (``patches/nova-<version>/``). The
series made on the tree's exact version is used; a stable point release
with no series of its own gets the series of its release (same major
version) when every region the series changes is found unchanged, up to
:data:`MAX_OFFSET` lines away (:func:`choose_series`).
:func:`fitting_series` judges every series by the tree's content alone,
whatever its version says. Nothing here imports Nova.
"""

import email.parser
import glob
import importlib.metadata
import importlib.util
import os
import re
import site
import sys

from nova_cyborg_patch import series as _series

#: How far (in lines) a point release may have moved a patched region.
MAX_OFFSET = 1000


class UnsupportedVersion(Exception):
    """No patch series for the Nova found, or its version is unknown."""


def default_target():
    """The directory holding the importable ``nova`` package.

    importlib.util.find_spec() on a top-level name locates the package
    without importing it.
    """
    spec = importlib.util.find_spec('nova')
    if spec is None or not spec.submodule_search_locations:
        raise _series.SeriesError('cannot find the nova package; '
                                  'use --target')
    return os.path.dirname(os.path.abspath(
        list(spec.submodule_search_locations)[0]))


def default_patches_dir():
    """patches/ of a source checkout, else the installed data files."""
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.dirname(here)
    candidates = [
        os.path.join(prefix, 'share', 'nova-cyborg', 'patches')
        for prefix in (sys.prefix, site.getuserbase())]
    if os.path.isfile(os.path.join(checkout, 'setup.cfg')):
        candidates.insert(0, os.path.join(checkout, 'patches'))
    for candidate in candidates:
        if os.path.isdir(candidate):
            return candidate
    raise _series.SeriesError('cannot find the patches directory (looked in '
                              '%s); use --patches-dir' % ', '.join(candidates))


def _metadata_versions(target):
    """Versions of 'nova' in the dist-info/egg-info next to target."""
    versions = set()
    found = (glob.glob(os.path.join(target, 'nova-*.dist-info', 'METADATA')) +
             glob.glob(os.path.join(target, 'nova-*.egg-info', 'PKG-INFO')))
    for path in found:
        with open(path, encoding='utf-8', errors='replace') as f:
            headers = email.parser.HeaderParser().parse(f)
        name = re.sub(r'[-_.]+', '-', (headers.get('Name') or '').lower())
        if name == 'nova' and headers.get('Version'):
            versions.add(headers['Version'].strip())
    return versions


def nova_version(target):
    versions = _metadata_versions(target)
    if len(versions) > 1:
        raise UnsupportedVersion('several Nova versions are recorded in %s: '
                                 '%s' % (target, ', '.join(sorted(versions))))
    if versions:
        return versions.pop()
    try:
        if os.path.samefile(target, default_target()):
            return importlib.metadata.version('nova')
    except (OSError, _series.SeriesError,
            importlib.metadata.PackageNotFoundError):
        pass
    raise UnsupportedVersion('cannot determine the Nova version of %s '
                             '(no nova-*.dist-info there)' % target)


def _supported(patches_dir):
    supported = sorted(
        os.path.basename(d)[len('nova-'):] for d in
        glob.glob(os.path.join(patches_dir, 'nova-*'))
        if os.path.isfile(os.path.join(d, 'series')))
    if not supported:
        raise _series.SeriesError('no nova-<version>/series in %s'
                                  % patches_dir)
    return supported


def _release(version):
    return version.split('.', 1)[0]


def series_dir(patches_dir, version):
    """The series made on this exact Nova version.

    :raises: UnsupportedVersion when there is none.
    """
    path = os.path.join(patches_dir, 'nova-%s' % version)
    if os.path.isfile(os.path.join(path, 'series')):
        return path
    raise UnsupportedVersion(
        'nova-cyborg supports Nova %s; found %s; no patch series for it'
        % (', '.join(_supported(patches_dir)), version))


def _version_key(version):
    return tuple(int(p) if p.isdigit() else 0 for p in version.split('.'))


def choose_series(patches_dir, version, target):
    """``(series directory, patches, max_offset, note)`` for this Nova.

    The series of the exact version if there is one (hunks where their
    headers say); else the newest series of the same release whose every
    hunk is found unchanged in the tree (a stable point release), with
    the note that says so.

    :raises: UnsupportedVersion naming what changed, or the versions
        supported.
    """
    try:
        path = series_dir(patches_dir, version)
        return path, _series.load_series(path), 0, None
    except UnsupportedVersion as exc:
        unsupported = exc
    same_release = sorted(
        (v for v in _supported(patches_dir)
         if _release(v) == _release(version)),
        key=_version_key, reverse=True)
    refusals = []
    for candidate in same_release:
        path = os.path.join(patches_dir, 'nova-%s' % candidate)
        patches = _series.load_series(path)
        evaluation = _series.Evaluation(target, patches,
                                        max_offset=MAX_OFFSET)
        if evaluation.state() != _series.CONFLICTING:
            return path, patches, MAX_OFFSET, (
                'Nova %s has no series of its own; the series of Nova %s '
                'fits its content: every region it changes is unchanged.'
                % (version, candidate))
        refusals.append('the series of Nova %s does not fit it:\n  %s' % (
            candidate, '\n  '.join(
                _series.first_mismatches(target, patches, MAX_OFFSET) or
                ['%s: %s' % (r.patch.name, r.detail)
                 for r in evaluation.ordered
                 if r.status == _series.CONFLICT])))
    if not refusals:
        raise unsupported
    raise UnsupportedVersion('Nova %s has no series of its own, and %s'
                             % (version, '\nand '.join(refusals)))


def fitting_series(patches_dir, target):
    """Every series judged against the tree by its content alone.

    :returns: ``[(version, state, detail)]``, newest series first: the
        series state (applied, not applied, partially applied, conflict)
        with its hunks looked for up to :data:`MAX_OFFSET` lines away;
        for a conflict, the first hunk of each file that does not match.
    """
    found = []
    for version in sorted(_supported(patches_dir), key=_version_key,
                          reverse=True):
        try:
            patches = _series.load_series(
                os.path.join(patches_dir, 'nova-%s' % version))
            # Where its headers say first (an applied series' hunks may
            # also be found elsewhere in a moved window), then moved.
            state = _series.Evaluation(target, patches).state()
            if state == _series.CONFLICTING:
                state = _series.Evaluation(target, patches,
                                           max_offset=MAX_OFFSET).state()
            detail = ''
            if state == _series.CONFLICTING:
                detail = '; '.join(_series.first_mismatches(
                    target, patches, MAX_OFFSET)[:2]) or 'a patch conflicts'
        except (_series.SeriesError, OSError) as exc:
            state, detail = _series.CONFLICTING, str(exc)
        found.append((version, state, detail))
    return found


def installed_series(patches_dir=None, target=None):
    """``(series directory, patches, max_offset, note)`` the tool picks for
    the installed Nova (or the one in ``target``), as ``apply`` would.

    :raises: UnsupportedVersion, SeriesError
    """
    target = os.path.abspath(target or default_target())
    return choose_series(os.path.abspath(patches_dir or
                                         default_patches_dir()),
                         nova_version(target), target)
