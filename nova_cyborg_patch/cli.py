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

"""nova-cyborg-patch: apply, check or revert the Nova patch series.

The series in ``patches/nova-<version>/`` routes an installed Nova into
nova_cyborg: one per supported release (``nova-34.0.0``, ``nova-33.0.2``).
A Nova point release with no series of its own (a stable update: 34.0.2
where the series was made on 34.0.0) is judged by content: the series of
its release (same major version) is used when every region it changes is
unchanged, wherever the update moved it (up to :data:`MAX_OFFSET` lines;
:mod:`nova_cyborg_patch.unidiff`); otherwise the tool refuses, naming the
file, the hunk and the line that changed. ``check`` also says, for every
series, whether it fits the tree's content (:func:`fitting_series`). Exit
codes: 0 success, 1 failure (conflict, partially applied tree, I/O
error), 2 unsupported or unknown Nova version, or a point release the
series does not fit (or bad usage).
"""

import argparse
import os
import sys

from nova_cyborg_patch import aliases as alias_check
from nova_cyborg_patch import record as _record
from nova_cyborg_patch import series as _series
# The release selection, as this module has always offered it.
from nova_cyborg_patch.releases import choose_series
from nova_cyborg_patch.releases import default_patches_dir
from nova_cyborg_patch.releases import default_target
from nova_cyborg_patch.releases import fitting_series
from nova_cyborg_patch.releases import installed_series  # noqa: F401
from nova_cyborg_patch.releases import MAX_OFFSET  # noqa: F401
from nova_cyborg_patch.releases import nova_version
from nova_cyborg_patch.releases import UnsupportedVersion

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNSUPPORTED = 2


def _report_fits(patches_dir, target, out):
    out.write('Series by content (whatever the version says):\n')
    for version, state, detail in fitting_series(patches_dir, target):
        if state == _series.CONFLICTING:
            out.write('  nova-%s: does not fit: %s\n' % (version, detail))
        else:
            out.write('  nova-%s: fits (%s)\n' % (version, state))


def _report(evaluation, out):
    width = max(len(r.patch.name) for r in evaluation.ordered)
    for result in evaluation.ordered:
        line = '  %-*s %s' % (width, result.patch.name, result.status)
        if result.detail:
            line += ': %s' % result.detail
        out.write(line + '\n')
    out.write('Series state: %s\n' % evaluation.state())


def _refuse(evaluation, action, allow_partial):
    """Return an error message if the tree's state forbids the action."""
    state = evaluation.state()
    if state == _series.CONFLICTING:
        conflicts = ['%s: %s' % (r.patch.name, r.detail)
                     for r in evaluation.ordered
                     if r.status == _series.CONFLICT]
        return ('cannot %s: the series does not match this Nova tree; '
                'nothing was changed.\n  %s'
                % (action, '\n  '.join(conflicts)))
    if state == _series.PARTIAL and not allow_partial:
        return ('cannot %s: the series is partially applied (see above); '
                'nothing was changed. Reinstall Nova, or pass '
                '--allow-partial to %s the rest.' % (action, action))
    return None


def cmd_status(args, patches, out):
    out.write('Nova %s in %s\nPatch series: %s\n'
              % (args.version, args.target, args.series_dir))
    _report(_series.Evaluation(args.target, patches,
                               max_offset=args.max_offset), out)
    return EXIT_OK


def cmd_check(args, patches, out):
    evaluation = _series.Evaluation(args.target, patches,
                                    max_offset=args.max_offset)
    _report(evaluation, out)
    _report_fits(args.patches_dir, args.target, out)
    if evaluation.state() in (_series.FULLY_APPLIED, _series.NOT_APPLIED):
        return EXIT_OK
    return EXIT_FAILED


def _change(args, patches, out, revert):
    action = 'revert' if revert else 'apply'
    evaluation = _series.Evaluation(args.target, patches, revert=revert,
                                    max_offset=args.max_offset)
    done_state = _series.NOT_APPLIED if revert else _series.FULLY_APPLIED
    if evaluation.state() == done_state:
        _remember(args, revert)
        out.write('Nothing to do: the series is %s in %s.\n'
                  % ('not applied' if revert else 'already applied',
                     args.target))
        return EXIT_OK
    if not revert and evaluation.state() != _series.NOT_APPLIED:
        replaced = _replace_recorded(args, patches, out)
        if replaced is not None:
            return replaced
    _report(evaluation, out)
    error = _refuse(evaluation, action, args.allow_partial)
    if error:
        sys.stderr.write('nova-cyborg-patch: %s\n' % error)
        return EXIT_FAILED
    todo = _series.APPLIED if revert else _series.APPLICABLE
    count = len([r for r in evaluation.ordered if r.status == todo])
    written = _series.commit(evaluation)
    _remember(args, revert)
    for rel in written:
        out.write('  updated %s\n' % rel)
    out.write('%s %d patch(es), %d file(s) in %s.\n'
              % ('Reverted' if revert else 'Applied',
                 count, len(written), args.target))
    return EXIT_OK


def _remember(args, revert):
    if revert:
        _record.clear(args.target)
    else:
        _record.save(args.target, args.series_dir)


def _replace_recorded(args, patches, out):
    """Replace another release's recorded series by this one's, if that
    is what the tree holds; None if it is not."""
    reverted = _record.applied_other(args.target, args.series_dir,
                                     args.max_offset)
    if reverted is None:
        return None
    replacement = _record.replacement(reverted, patches, args.max_offset)
    if replacement is None:
        return None
    written = _series.commit(replacement)
    _remember(args, revert=False)
    for rel in written:
        out.write('  updated %s\n' % rel)
    out.write('Replaced the series of another nova-cyborg release (%d '
              'patch(es), recorded in %s) by this one (%d patch(es)): %d '
              'file(s) in %s.\n' % (
                  len(reverted.ordered), _record.record_dir(args.target),
                  len(patches),
                  len(written), args.target))
    return EXIT_OK


def cmd_apply(args, patches, out):
    return _change(args, patches, out, revert=False)


def _config_files(args):
    return args.config_file or alias_check.default_config_files()


def _aliases_refuse(args, out):
    """Return an error message while a server's ARQs are under its alias
    (:mod:`nova_cyborg.model.aliases`): reverted Nova would not find them."""
    if args.skip_alias_check:
        out.write('Alias check skipped (--skip-alias-check).\n')
        return None
    files = _config_files(args)
    if not files:
        out.write('No Nova configuration here (%s): no Nova service runs '
                  'on this host, no alias check.\n'
                  % alias_check.DEFAULT_CONFIG)
        return None
    try:
        scope, servers = alias_check.find(files)
    except alias_check.CheckFailed as e:
        return ('cannot revert: could not check for servers whose '
                'accelerator requests are bound under their alias (%s); '
                'nothing was changed. Fix the configuration (--config-file) '
                'or pass --skip-alias-check.' % e)
    if not servers:
        out.write('Alias check (%s): no server has its accelerator '
                  'requests under its alias.\n' % scope)
        return None
    return ('cannot revert: %d server(s) (%s) have their accelerator '
            'requests bound under their alias, where a live migration put '
            'them; reverted Nova would start them without their devices '
            'and leave the requests bound at their delete. Nothing was '
            'changed.\n  %s\n%s'
            % (len(servers), scope,
               '\n  '.join(alias_check.describe(servers)),
               alias_check.REMEDY))


def cmd_revert(args, patches, out):
    evaluation = _series.Evaluation(args.target, patches, revert=True,
                                    max_offset=args.max_offset)
    if evaluation.state() in (_series.CONFLICTING, _series.PARTIAL):
        recorded = _record.applied_other(args.target, args.series_dir,
                                         args.max_offset)
        if recorded is not None:
            out.write('The series of another nova-cyborg release is applied '
                      '(recorded in %s): reverting it.\n'
                      % _record.record_dir(args.target))
            patches = [r.patch for r in recorded.ordered]
            evaluation = recorded
    if evaluation.state() != _series.NOT_APPLIED:
        error = _aliases_refuse(args, out)
        if error:
            sys.stderr.write('nova-cyborg-patch: %s\n' % error)
            return EXIT_FAILED
    return _change(args, patches, out, revert=True)


def cmd_aliases(args, patches, out):
    try:
        scope, servers = alias_check.find(_config_files(args))
    except alias_check.CheckFailed as e:
        sys.stderr.write('nova-cyborg-patch: %s\n' % e)
        return EXIT_FAILED
    out.write('Servers whose accelerator requests are under their alias '
              '(%s): %d\n' % (scope, len(servers)))
    for line in alias_check.describe(servers):
        out.write('  %s\n' % line)
    if servers:
        out.write(alias_check.REMEDY + '\n')
    return EXIT_OK


def _add_location_options(parser, default=None):
    parser.add_argument(
        '--target', metavar='DIR', default=default,
        help='directory containing the nova package (default: where '
             '"import nova" would find it)')
    parser.add_argument(
        '--patches-dir', metavar='DIR', default=default,
        help='directory holding nova-<version>/series (default: patches/ '
             'of the source checkout or <prefix>/share/nova-cyborg/patches)')


def build_parser():
    parser = argparse.ArgumentParser(
        prog='nova-cyborg-patch',
        description='Apply, check or revert the patch series that routes '
                    'an installed Nova into nova_cyborg.')
    _add_location_options(parser)
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True
    for name, func, text in (
            ('apply', cmd_apply, 'apply the series (atomic, idempotent)'),
            ('check', cmd_check, 'report per patch: applied, applicable '
                                 'or conflict; exit 0 if fully applied or '
                                 'cleanly applicable'),
            ('revert', cmd_revert, 'revert the series (atomic, idempotent); '
                                   'refused while a server\'s accelerator '
                                   'requests are under its alias'),
            ('aliases', cmd_aliases, 'list the servers whose accelerator '
                                     'requests are bound under their alias '
                                     '(every cell with the API database '
                                     'configured, else this host\'s)'),
            ('status', cmd_status, 'show version, paths and series state')):
        cmd = sub.add_parser(name, help=text, description=text)
        cmd.set_defaults(func=func)
        # Also accept the options after the command name.
        _add_location_options(cmd, default=argparse.SUPPRESS)
        if name in ('apply', 'revert'):
            cmd.add_argument(
                '--allow-partial', action='store_true',
                help='also %s when only some patches are applied' % name)
        if name in ('revert', 'aliases'):
            cmd.add_argument(
                '--config-file', action='append', metavar='PATH',
                help='Nova configuration file(s) for the alias check '
                     '(default: %s where it exists)'
                     % alias_check.DEFAULT_CONFIG)
        if name == 'revert':
            cmd.add_argument(
                '--skip-alias-check', action='store_true',
                help='revert even if servers have their accelerator '
                     'requests under their alias (they lose their '
                     'devices at their next start)')
    return parser


def main(argv=None, out=None):
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        args.target = os.path.abspath(args.target or default_target())
        if not os.path.isdir(os.path.join(args.target, 'nova')):
            raise _series.SeriesError('no nova package in %s' % args.target)
        args.patches_dir = os.path.abspath(
            args.patches_dir or default_patches_dir())
        args.version = nova_version(args.target)
        args.series_dir, patches, args.max_offset, note = choose_series(
            args.patches_dir, args.version, args.target)
        if note:
            out.write(note + '\n')
        return args.func(args, patches, out)
    except UnsupportedVersion as exc:
        sys.stderr.write('nova-cyborg-patch: %s; nothing was changed.\n'
                         % exc)
        if args.func is cmd_check and args.patches_dir:
            _report_fits(args.patches_dir, args.target, out)
        return EXIT_UNSUPPORTED
    except (_series.SeriesError, OSError) as exc:
        sys.stderr.write('nova-cyborg-patch: %s\n' % exc)
        return EXIT_FAILED


if __name__ == '__main__':
    sys.exit(main())
