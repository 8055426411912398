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

"""Tests for nova-cyborg-patch, run on copies of the installed Nova."""

import importlib.util
import io
import os
import shutil
import subprocess
import sys
from unittest import mock

import fixtures
import testtools

from nova_cyborg.cmd import _series
from nova_cyborg.cmd import _unidiff
from nova_cyborg.cmd import patch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
PATCHES = os.path.join(REPO, 'patches')
VERSION = '34.0.0'
SERIES = [
    '0001-accelerator-cyborg-route-client.patch',
    '0002-conductor-route-arq-create-bind.patch',
    '0003-compute-route-bound-arqs.patch',
    '0004-libvirt-route-accel-devices.patch',
    '0005-scheduler-claim-more-candidates.patch',
    '0006-api-allow-accelerator-operations.patch',
    '0007-migrate-task-profile-groups.patch',
    '0008-manage-heal-accelerator-allocations.patch',
    '0009-api-accelerator-actions.patch',
    '0010-policies-accelerator-actions.patch',
    '0011-compute-utils-delete-all-arqs.patch',
    '0012-extra-spec-device-profile-name.patch',
    '0013-compute-report-nova-cyborg-trait.patch',
    '0014-scheduler-require-nova-cyborg-trait.patch',
]
TOUCHED = [
    'nova/accelerator/cyborg.py',
    'nova/api/openstack/compute/routes.py',
    'nova/api/validation/extra_specs/accel.py',
    'nova/cmd/manage.py',
    'nova/compute/api.py',
    'nova/compute/manager.py',
    'nova/compute/resource_tracker.py',
    'nova/compute/utils.py',
    'nova/conductor/manager.py',
    'nova/conductor/tasks/migrate.py',
    'nova/policies/__init__.py',
    'nova/scheduler/manager.py',
    'nova/scheduler/request_filter.py',
    'nova/virt/libvirt/driver.py',
]
ROUTING = {
    'nova/accelerator/cyborg.py': [
        'from nova_cyborg import client as nc_client',
        'return nc_client.get_client(context)',
        'from nova_cyborg import request_groups',
        'request_groups.get_device_profile_request_groups(',
    ],
    'nova/conductor/manager.py': [
        'from nova_cyborg import conductor as nc_conductor',
        'return nc_conductor.create_and_bind_arqs(',
        "{'vm_state': vm_states.ERROR, 'task_state': None},",
        "'build failures. Last failure: %s'",
    ],
    'nova/compute/manager.py': [
        'from nova_cyborg import compute as nc_compute',
        'return nc_compute.get_bound_arqs(',
        'raise nc_compute.build_failure(instance, exc)',
        'nc_cleanup.delete_arqs_of_deleted_instance(',
        'nc_move.swap_to_destination(',
        'nc_move.confirm(context, instance)',
        'nc_move.revert_at_destination(context, instance)',
        'nc_move.rebind_at_source(self.virtapi, context, instance)',
        'return nc_move.instance_arqs(context, instance)',
        'nc_cleanup.delete_arqs_of_deleting_instance(context, instance)',
        'nc_cleanup.delete_arqs_of_deleted_instance(context, instance)',
        'reason=nc_compute.build_fault_message(exc))',
        'self.additional_endpoints.extend(nc_rpc.endpoints(self))',
    ],
    'nova/api/openstack/compute/routes.py': [
        'from nova_cyborg import attach_api as nc_attach_api',
        'nc_attach_api.AcceleratorActionsController,',
    ],
    'nova/policies/__init__.py': [
        'from nova_cyborg import policies as nc_policies',
        'nc_policies.list_rules()',
    ],
    'nova/api/validation/extra_specs/accel.py': [
        "'pattern': r'[^\\s,]+',",
    ],
    'nova/compute/utils.py': [
        'nc_cleanup.delete_arqs_if_needed(context, instance, arq_uuids)',
    ],
    'nova/compute/api.py': [
        'nc_api.check_operation(func.__name__, instance)',
        'nc_api.check_new_flavor(context, new_flavor)',
        'if dp_name is not None:',
    ],
    'nova/conductor/tasks/migrate.py': [
        'nc_move.add_profile_groups(self.context, self.request_spec,',
    ],
    'nova/cmd/manage.py': [
        'from nova_cyborg import heal as nc_heal',
        'nc_heal.accelerator_allocations(ctxt, instance)',
        'accel_allocations = nc_heal.missing_allocations(',
    ],
    'nova/scheduler/manager.py': [
        'from nova_cyborg import scheduler as nc_scheduler',
        'alloc_req = nc_scheduler.claim(',
    ],
    'nova/virt/libvirt/driver.py': [
        'from nova_cyborg.virt import libvirt as nc_libvirt',
        'nc_libvirt.add_pci_hostdevs(guest, accel_info)',
        'return nc_libvirt.allocate_mdevs(self, accel_info)',
        'pci_arq_list = nc_libvirt.pci_arqs(instance, accel_info)',
        'nc_libvirt.accel_info_for(context, instance)',
        'nc_libvirt.detach_pci_hostdevs(',
        'nc_libvirt.attach_pci_hostdevs(',
    ],
}


def installed_nova_dir():
    """site-packages (or wherever) holding the installed nova package."""
    spec = importlib.util.find_spec('nova')
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def write_metadata(target, version):
    info = os.path.join(target, 'nova-%s.dist-info' % version)
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, 'METADATA'), 'w') as f:
        f.write('Metadata-Version: 2.1\nName: nova\nVersion: %s\n' % version)


class NovaCopyTestCase(testtools.TestCase):
    """Base class: a copy of the installed Nova's touched modules."""

    full_copy = False

    def setUp(self):
        super().setUp()
        self.source = installed_nova_dir()
        self.target = self.useFixture(fixtures.TempDir()).path
        if self.full_copy:
            shutil.copytree(
                os.path.join(self.source, 'nova'),
                os.path.join(self.target, 'nova'),
                ignore=shutil.ignore_patterns('__pycache__', 'tests'))
        else:
            for rel in TOUCHED:
                os.makedirs(os.path.join(self.target, os.path.dirname(rel)),
                            exist_ok=True)
                shutil.copy2(os.path.join(self.source, rel),
                             os.path.join(self.target, rel))
        write_metadata(self.target, VERSION)
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', self.stderr))
        self.pristine = self.snapshot()

    def run_tool(self, *argv):
        out = io.StringIO()
        rc = patch.main(['--target', self.target, '--patches-dir', PATCHES] +
                        list(argv), out=out)
        return rc, out.getvalue(), self.stderr.getvalue()

    def read(self, rel):
        with open(os.path.join(self.target, rel), 'rb') as f:
            return f.read()

    def snapshot(self):
        return dict((rel, self.read(rel)) for rel in TOUCHED)

    def assertUnchanged(self, expected=None):
        self.assertEqual(expected or self.pristine, self.snapshot())

    def require_pristine_source(self):
        rc, out, _err = self.run_tool('check')
        if 'Series state: not applied' not in out:
            self.skipTest('installed Nova is not pristine %s:\n%s'
                          % (VERSION, out))


class TestApplyRevert(NovaCopyTestCase):

    def setUp(self):
        super().setUp()
        self.require_pristine_source()

    def test_apply_changes_files_and_routes(self):
        pycache = os.path.join(self.target, 'nova', 'compute', '__pycache__')
        os.makedirs(pycache)
        stale = os.path.join(pycache, 'manager.cpython-311.pyc')
        other = os.path.join(pycache, 'rpcapi.cpython-311.pyc')
        for path in (stale, other):
            open(path, 'wb').close()

        rc, out, err = self.run_tool('apply')

        self.assertEqual(0, rc, err)
        self.assertIn('Applied 14 patch(es), 14 file(s)', out)
        for rel, needles in ROUTING.items():
            text = self.read(rel).decode('utf-8')
            self.assertNotEqual(self.pristine[rel], self.read(rel))
            self.assertIn('# nova-cyborg: routed to nova_cyborg.', text)
            for needle in needles:
                self.assertIn(needle, text)
            compile(text, rel, 'exec')
        self.assertNotIn(b"_('Failure getting accelerator requests.')",
                         self.read('nova/compute/manager.py'))
        self.assertNotIn(b'Ignoring accelerator requests with',
                         self.read('nova/virt/libvirt/driver.py'))
        self.assertFalse(os.path.exists(stale))
        self.assertTrue(os.path.exists(other))

    def test_apply_keeps_file_mode(self):
        path = os.path.join(self.target, TOUCHED[0])
        os.chmod(path, 0o640)
        self.assertEqual(0, self.run_tool('apply')[0])
        self.assertEqual(0o640, os.stat(path).st_mode & 0o777)

    def test_apply_twice_is_noop(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        applied = self.snapshot()
        mtimes = [os.stat(os.path.join(self.target, rel)).st_mtime_ns
                  for rel in TOUCHED]

        rc, out, err = self.run_tool('apply')

        self.assertEqual(0, rc, err)
        self.assertIn('already applied', out)
        self.assertUnchanged(applied)
        self.assertEqual(mtimes, [
            os.stat(os.path.join(self.target, rel)).st_mtime_ns
            for rel in TOUCHED])

    def test_check_pristine(self):
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        for name in SERIES:
            self.assertRegex(out, r'%s\s+applicable' % name)
        self.assertIn('Series state: not applied', out)
        self.assertUnchanged()

    def test_check_applied(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        for name in SERIES:
            self.assertRegex(out, r'%s\s+applied' % name)
        self.assertIn('Series state: applied', out)

    def test_status(self):
        rc, out, err = self.run_tool('status')
        self.assertEqual(0, rc, err)
        self.assertIn('Nova %s in %s' % (VERSION, self.target), out)
        self.assertIn(os.path.join(PATCHES, 'nova-' + VERSION), out)

    def test_options_after_command(self):
        rc = patch.main(['check', '--target', self.target,
                         '--patches-dir', PATCHES], out=io.StringIO())
        self.assertEqual(0, rc)

    def test_revert_restores_byte_identical(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        rc, out, err = self.run_tool('revert')
        self.assertEqual(0, rc, err)
        self.assertIn('Reverted 14 patch(es), 14 file(s)', out)
        self.assertUnchanged()

        rc, out, err = self.run_tool('revert')
        self.assertEqual(0, rc, err)
        self.assertIn('Nothing to do', out)
        self.assertUnchanged()

    def test_corrupted_target_apply_fails_and_changes_nothing(self):
        # Change one context line of the libvirt patch's hunk of the mdev
        # allocation: the first three patches would apply, but nothing may
        # be written.
        rel = 'nova/virt/libvirt/driver.py'
        path = os.path.join(self.target, rel)
        text = self.read(rel).replace(
            b'        :returns: list of MDEV UUIDs\n',
            b'        :returns: the MDEV UUIDs\n')
        with open(path, 'wb') as f:
            f.write(text)
        corrupted = self.snapshot()
        self.assertNotEqual(self.pristine, corrupted)

        rc, out, err = self.run_tool('apply')

        self.assertEqual(1, rc)
        self.assertIn('0004-libvirt-route-accel-devices.patch', err)
        self.assertIn('hunk #7', err)
        self.assertIn('nothing was changed', err)
        self.assertUnchanged(corrupted)
        rc, out, err = self.run_tool('check')
        self.assertEqual(1, rc)
        self.assertRegex(out, r'0004-libvirt-route-accel-devices.patch\s+'
                              r'conflict')

    def test_corrupted_target_revert_fails_and_changes_nothing(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        rel = 'nova/accelerator/cyborg.py'
        text = self.read(rel).replace(b'def get_client(context):',
                                      b'def get_client(ctxt):')
        with open(os.path.join(self.target, rel), 'wb') as f:
            f.write(text)
        before = self.snapshot()

        rc, out, err = self.run_tool('revert')

        self.assertEqual(1, rc)
        self.assertIn('0001-accelerator-cyborg-route-client.patch', err)
        self.assertIn('hunk #1', err)
        self.assertUnchanged(before)

    def test_wrong_version_exits_2_and_changes_nothing(self):
        shutil.rmtree(os.path.join(self.target, 'nova-%s.dist-info'
                                   % VERSION))
        write_metadata(self.target, '33.0.0')
        for command in ('apply', 'check', 'revert', 'status'):
            rc, out, err = self.run_tool(command)
            self.assertEqual(2, rc)
            self.assertIn('nova-cyborg supports Nova 34.0.0; found 33.0.0; '
                          'no patch series for it', err)
        self.assertUnchanged()

    def test_unknown_version_exits_2(self):
        shutil.rmtree(os.path.join(self.target, 'nova-%s.dist-info'
                                   % VERSION))
        rc, out, err = self.run_tool('apply')
        self.assertEqual(2, rc)
        self.assertIn('cannot determine the Nova version', err)
        self.assertUnchanged()

    def test_partial_state_detected(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        applied = self.snapshot()
        rel = 'nova/compute/manager.py'
        with open(os.path.join(self.target, rel), 'wb') as f:
            f.write(self.pristine[rel])
        partial = self.snapshot()

        rc, out, err = self.run_tool('check')
        self.assertEqual(1, rc)
        self.assertRegex(out, r'0003-compute-route-bound-arqs.patch\s+'
                              r'applicable')
        self.assertIn('Series state: partially applied', out)
        for command in ('apply', 'revert'):
            rc, out, err = self.run_tool(command)
            self.assertEqual(1, rc)
            self.assertIn('partially applied', err)
            self.assertUnchanged(partial)

        rc, out, err = self.run_tool('apply', '--allow-partial')
        self.assertEqual(0, rc, err)
        self.assertIn('Applied 1 patch(es), 1 file(s)', out)
        self.assertUnchanged(applied)

    def test_partial_hunks_within_a_file_is_a_conflict(self):
        self.assertEqual(0, self.run_tool('apply')[0])
        rel = 'nova/compute/manager.py'
        text = self.read(rel).replace(
            b"            # nova-cyborg: routed to nova_cyborg.compute\n"
            b"            from nova_cyborg import compute as nc_compute\n"
            b"            raise nc_compute.build_failure(instance, exc)\n",
            b"            msg = _('Failure getting accelerator requests.')\n"
            b"            raise exception.BuildAbortException(\n"
            b"                    reason=msg, instance_uuid=instance.uuid)\n")
        with open(os.path.join(self.target, rel), 'wb') as f:
            f.write(text)
        before = self.snapshot()

        rc, out, err = self.run_tool('apply')

        self.assertEqual(1, rc)
        self.assertIn('#4 applied, #5 pristine, #6 applied', err)
        self.assertUnchanged(before)

    def test_failed_replace_rolls_back(self):
        real_replace = os.replace
        calls = []

        def flaky_replace(src, dst):
            calls.append(dst)
            if len(calls) == 3:
                raise OSError('disk on fire')
            return real_replace(src, dst)

        with mock.patch.object(_series.os, 'replace', flaky_replace):
            rc, out, err = self.run_tool('apply')

        self.assertEqual(1, rc)
        self.assertIn('disk on fire', err)
        self.assertUnchanged()
        leftovers = [name for _d, _s, names in os.walk(self.target)
                     for name in names if name.endswith('.nova-cyborg')]
        self.assertEqual([], leftovers)


class TestInstalledPristineNova(NovaCopyTestCase):
    """The series against a full copy of the installed Nova 34.0.0."""

    full_copy = True

    def test_series_applies_cleanly(self):
        try:
            installed = patch.nova_version(self.source)
        except patch.UnsupportedVersion as exc:
            self.skipTest(str(exc))
        if installed != VERSION:
            self.skipTest('installed Nova is %s, not %s'
                          % (installed, VERSION))
        rc, out, err = self.run_tool('check')
        self.assertEqual(0, rc, err)
        if 'Series state: applied' in out:
            # This environment's Nova is patched (tox -e functional, a
            # deployment): start from the reverted copy.
            self.assertEqual(0, self.run_tool('revert')[0])
            rc, out, err = self.run_tool('check')
        self.assertIn('Series state: not applied', out)
        pristine = self.snapshot()

        rc, out, err = self.run_tool('apply')
        self.assertEqual(0, rc, err)
        for rel in TOUCHED:
            compile(self.read(rel), rel, 'exec')
        self.assertEqual(0, self.run_tool('revert')[0])
        self.assertUnchanged(pristine)


class TestLocations(testtools.TestCase):

    def test_default_target_does_not_import_nova(self):
        code = ('import sys; from nova_cyborg.cmd import patch; '
                'print(patch.default_target()); print("nova" in sys.modules)')
        result = subprocess.run([sys.executable, '-c', code], cwd=REPO,
                                capture_output=True, text=True, check=True)
        target, imported = result.stdout.split()
        self.assertEqual(installed_nova_dir(), target)
        self.assertEqual('False', imported)

    def test_default_patches_dir_in_checkout(self):
        self.assertEqual(PATCHES, patch.default_patches_dir())

    def test_default_patches_dir_installed(self):
        prefix = self.useFixture(fixtures.TempDir()).path
        installed = os.path.join(prefix, 'share', 'nova-cyborg', 'patches')
        os.makedirs(installed)
        self.useFixture(fixtures.MonkeyPatch(
            'os.path.isfile', lambda path: False))
        self.useFixture(fixtures.MonkeyPatch('sys.prefix', prefix))
        self.assertEqual(installed, patch.default_patches_dir())


class TestUnidiff(testtools.TestCase):

    OLD = 'a\nb\nc\nd\ne\nf\ng\n'
    NEW = 'a\nb\nC\nd\ne\nf\ng\nh'
    DIFF = ('comment\n'
            '--- a/x.py\n'
            '+++ b/x.py\n'
            '@@ -2,3 +2,3 @@\n'
            ' b\n'
            '-c\n'
            '+C\n'
            ' d\n'
            '@@ -6,2 +6,3 @@\n'
            ' f\n'
            ' g\n'
            '+h\n'
            '\\ No newline at end of file\n')

    def _apply(self, text, reverse=False):
        (fp,) = _unidiff.parse(self.DIFF)
        lines = _unidiff.split_lines(text)
        return ''.join(_unidiff.apply_hunks(lines, fp, reverse=reverse))

    def test_parse(self):
        (fp,) = _unidiff.parse(self.DIFF)
        self.assertEqual('x.py', fp.target(1))
        self.assertEqual(2, len(fp.hunks))

    def test_apply_and_reverse(self):
        self.assertEqual(self.NEW, self._apply(self.OLD))
        self.assertEqual(self.OLD, self._apply(self.NEW, reverse=True))

    def test_no_offset_guessing(self):
        exc = self.assertRaises(_unidiff.HunkMismatch, self._apply,
                                'z\n' + self.OLD)
        self.assertEqual(1, exc.number)

    def test_exact_context(self):
        exc = self.assertRaises(_unidiff.HunkMismatch, self._apply,
                                self.OLD.replace('g\n', 'G\n'))
        self.assertEqual(2, exc.number)

    def test_truncated_hunk(self):
        self.assertRaises(_unidiff.PatchError, _unidiff.parse,
                          self.DIFF.split('@@ -6')[0][:-4])

    def test_no_files(self):
        self.assertRaises(_unidiff.PatchError, _unidiff.parse, 'hello\n')
