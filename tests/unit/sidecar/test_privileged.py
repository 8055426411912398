"""The privileged entry points, run in-process on temporary trees."""

import os
import subprocess
import sys
import time

import fixtures
from oslo_concurrency import processutils
from oslo_config import cfg
from oslo_privsep.test import fixture as privsep_fixture
import testtools

from sidecar import exception
from sidecar import privileged
from tests.unit.sidecar import utils

PARENT = '0000:81:00.0'
MDEV = '4b20d080-1b54-4048-85b3-a6a62d165c01'
PY = sys.executable


class InProcess(fixtures.Fixture):
    """Run the privsep entry points in this process, unprivileged."""

    def _setUp(self):
        privileged.sidecar_pctxt.set_client_mode(False)
        self.addCleanup(privileged.sidecar_pctxt.set_client_mode, True)


_write = utils.write
_read = utils.read


class Base(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(InProcess())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(self.tmp, 'sys')
        os.makedirs(self.root)
        self.outside = os.path.join(self.tmp, 'outside')
        _write(self.outside, 'untouched')

    def assertInvalid(self, words, func, *args):
        exc = self.assertRaises(exception.InvalidArgument, func, *args)
        self.assertIn(words, str(exc))
        return exc


class ContextTest(testtools.TestCase):

    def test_entry_points(self):
        for func in (privileged.run_command, privileged.create_mdev,
                     privileged.remove_mdev, privileged.dfl_port_pr):
            self.assertTrue(privileged.sidecar_pctxt.is_entrypoint(func))
        # What only the removed fpga_manager programmer used: no longer
        # something the privileged daemon does.
        for name in ('write_sysfs', 'install_firmware'):
            self.assertFalse(hasattr(privileged, name), name)

    def test_context(self):
        ctx = privileged.sidecar_pctxt
        self.assertEqual('sidecar_privsep', ctx.cfg_section)
        self.assertEqual('sidecar.privileged.sidecar_pctxt', ctx.pypath)
        # In a process of its own: other tests' Config fixtures reset the
        # global CONF, defaults included.
        out = subprocess.check_output(
            [PY, '-c', 'from oslo_config import cfg; '
             'from sidecar import privileged; cfg.CONF([]); '
             'print(cfg.CONF.sidecar_privsep.capabilities)'],
            stderr=subprocess.DEVNULL, text=True)
        self.assertEqual('[1, 21]',  # CAP_DAC_OVERRIDE, CAP_SYS_ADMIN
                         out.strip().splitlines()[-1])

    def test_errors_survive_the_privsep_channel(self):
        # The daemon sends (class name, args); the client rebuilds with
        # cls(*args). The message must come back whole.
        exc = exception.InvalidArgument(name='sysfs path', reason='escape')
        self.assertEqual(str(exc), str(type(exc)(*exc.args)))
        exc = exception.MdevError(uuid=MDEV, address=PARENT, reason='busy')
        self.assertEqual(str(exc), str(type(exc)(*exc.args)))


class ThroughDaemonTest(testtools.TestCase):
    """A real (forked, unprivileged) privsep daemon: arguments, results
    and errors cross the channel."""

    def test_calls_and_errors_cross_the_channel(self):
        # The fixture's Config fixture resets the global CONF when it
        # ends, which drops the defaults privileged.py's context set too
        # (capabilities then read []): give them back for the next test
        # in this worker.
        group = cfg.CONF.sidecar_privsep
        for name in ('capabilities', 'user', 'group'):
            self.addCleanup(cfg.CONF.set_default, name, group[name],
                            group='sidecar_privsep')
        self.useFixture(privsep_fixture.UnprivilegedPrivsepFixture(
            privileged.sidecar_pctxt, {}))
        tmp = self.useFixture(fixtures.TempDir()).path
        create = os.path.join(tmp, 'class', 'mdev_bus', PARENT,
                              'mdev_supported_types', 'nvidia-11', 'create')
        _write(create)
        privileged.create_mdev(tmp, PARENT, 'nvidia-11', MDEV)
        self.assertEqual(MDEV, _read(create))
        exc = self.assertRaises(exception.InvalidArgument,
                                privileged.create_mdev, tmp, PARENT,
                                '../x', MDEV)
        self.assertIn('mdev type', str(exc))
        exc = self.assertRaises(exception.MdevError, privileged.remove_mdev,
                                tmp, MDEV)
        self.assertIn('no such mdev', str(exc))
        self.assertEqual(('out\n', ''), privileged.run_command(
            [PY, '-c', 'print("out")'], 10))
        exc = self.assertRaises(
            processutils.ProcessExecutionError, privileged.run_command,
            [PY, '-c', 'import sys; sys.exit("boom")'], 10)
        self.assertEqual((1, 'boom\n'), (exc.exit_code, exc.stderr))
        exc = self.assertRaises(
            subprocess.TimeoutExpired, privileged.run_command,
            [PY, '-c', 'import time; time.sleep(30)'], 1)
        self.assertEqual(1, exc.timeout)


class WriteSysfsTest(Base):
    """The checks every sysfs write of the entry points (create_mdev,
    remove_mdev, the vGPU type setter) goes through."""

    def test_writes_value(self):
        attr = os.path.join(self.root, 'class', 'mdev_bus', PARENT,
                            'create')
        _write(attr, 'old-and-longer-value')
        privileged._write_sysfs(self.root,
                                'class/mdev_bus/%s/create' % PARENT, MDEV)
        self.assertEqual(MDEV, _read(attr))

    def test_follows_symlinks_inside_root(self):
        real = os.path.join(self.root, 'devices', 'pci0000:00', PARENT)
        _write(os.path.join(real, 'attr'))
        os.makedirs(os.path.join(self.root, 'bus'))
        os.symlink('../devices/pci0000:00/' + PARENT,
                   os.path.join(self.root, 'bus', 'dev'))
        privileged._write_sysfs(self.root, 'bus/dev/attr', '1')
        self.assertEqual('1', _read(os.path.join(real, 'attr')))

    def test_refuses_dotdot(self):
        self.assertInvalid('outside', privileged._write_sysfs,
                           self.root, '../outside', 'x')
        self.assertInvalid('outside', privileged._write_sysfs,
                           self.root, 'class/../../outside', 'x')
        self.assertEqual('untouched', _read(self.outside))

    def test_refuses_absolute_path(self):
        self.assertInvalid('absolute', privileged._write_sysfs,
                           self.root, self.outside, 'x')
        self.assertEqual('untouched', _read(self.outside))

    def test_refuses_root_itself(self):
        self.assertInvalid('outside', privileged._write_sysfs,
                           self.root, '.', 'x')

    def test_refuses_directory_symlink_escape(self):
        os.makedirs(os.path.join(self.root, 'class'))
        os.symlink(self.tmp, os.path.join(self.root, 'class', 'evil'))
        self.assertInvalid('outside', privileged._write_sysfs,
                           self.root, 'class/evil/outside', 'x')
        self.assertEqual('untouched', _read(self.outside))

    def test_refuses_file_symlink_escape(self):
        os.symlink(self.outside, os.path.join(self.root, 'attr'))
        self.assertInvalid('outside', privileged._write_sysfs,
                           self.root, 'attr', 'x')
        self.assertEqual('untouched', _read(self.outside))

    def test_refuses_bad_values(self):
        attr = os.path.join(self.root, 'attr')
        _write(attr, 'before')
        for value, words in (('a\nb', 'line break'),
                             ('a\n', 'line break'),
                             ('a\rb', 'line break'),
                             ('a\0b', 'NUL'),
                             ('x' * 129, 'longer than 128'),
                             ('', 'non-empty'),
                             (1, 'non-empty'),
                             (None, 'non-empty')):
            self.assertInvalid(words, privileged._write_sysfs,
                               self.root, 'attr', value)
        self.assertEqual('before', _read(attr))
        privileged._write_sysfs(self.root, 'attr', 'x' * 128)
        self.assertEqual('x' * 128, _read(attr))

    def test_refuses_nul_in_path(self):
        self.assertInvalid('NUL', privileged._write_sysfs,
                           self.root, 'attr\0', 'x')

    def test_refuses_bad_root(self):
        self.assertInvalid('absolute', privileged._write_sysfs,
                           'relative/sys', 'attr', 'x')
        self.assertInvalid('not a directory', privileged._write_sysfs,
                           self.outside, 'attr', 'x')

    def test_missing_attribute_is_not_created(self):
        self.assertRaises(FileNotFoundError, privileged._write_sysfs,
                          self.root, 'class/nothing', 'x')
        self.assertFalse(os.path.exists(
            os.path.join(self.root, 'class', 'nothing')))


class RunCommandTest(Base):

    def test_returns_output(self):
        out, err = privileged.run_command(
            [PY, '-c', 'import sys; print("out"); print("err", '
             'file=sys.stderr)'], 10)
        self.assertEqual('out\n', out)
        self.assertEqual('err\n', err)

    def test_no_shell(self):
        out, _err = privileged.run_command(
            [PY, '-c', 'import sys; print(sys.argv[1:])', '$(id)', ';',
             '|', '*'], 10)
        self.assertEqual("['$(id)', ';', '|', '*']\n", out)

    def test_failure(self):
        exc = self.assertRaises(
            processutils.ProcessExecutionError, privileged.run_command,
            [PY, '-c', 'import sys; sys.exit("bad bitstream")'], 10)
        self.assertEqual(1, exc.exit_code)
        self.assertIn('bad bitstream', exc.stderr)
        # It crosses the privsep channel as cls(*args).
        self.assertEqual(str(exc), str(type(exc)(*exc.args)))

    def test_timeout_kills_the_process_group(self):
        pids = os.path.join(self.tmp, 'pids')
        script = ('import os, subprocess, sys, time\n'
                  'child = subprocess.Popen([sys.executable, "-c", '
                  '"import time; time.sleep(60)"])\n'
                  'open(sys.argv[1], "w").write("%d %d" % (os.getpid(), '
                  'child.pid))\n'
                  'time.sleep(60)\n')
        start = time.monotonic()
        exc = self.assertRaises(subprocess.TimeoutExpired,
                                privileged.run_command,
                                [PY, '-c', script, pids], 2)
        # Not after the grandchild's 60 s: it held the output pipes.
        self.assertLess(time.monotonic() - start, 30)
        self.assertEqual(2, exc.timeout)
        for pid in map(int, _read(pids).split()):
            # SIGKILL was sent; the kernel ends the process shortly after.
            deadline = time.monotonic() + 30
            while not _gone(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertTrue(_gone(pid), 'process %d still runs' % pid)

    def test_missing_program(self):
        self.assertRaises(OSError, privileged.run_command,
                          [os.path.join(self.tmp, 'no-such-tool')], 10)

    def test_bad_arguments(self):
        for argv in ('echo hi', [], [''], ['echo', 1], ['echo', 'a\0b'],
                     None):
            self.assertInvalid('command', privileged.run_command, argv, 10)
        for timeout in (0, -1, None, '10', True):
            self.assertInvalid('timeout', privileged.run_command,
                               ['true'], timeout)


def _gone(pid):
    """Whether pid has exited (a zombie waiting for its reaper counts)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] in ('Z', 'X')
    except FileNotFoundError:
        return True


class MdevTest(Base):

    def setUp(self):
        super().setUp()
        self.parent = os.path.join(self.root, 'devices', 'pci0000:80',
                                   PARENT)
        self.create = os.path.join(self.parent, 'mdev_supported_types',
                                   'nvidia-35', 'create')
        _write(self.create)
        os.makedirs(os.path.join(self.root, 'class', 'mdev_bus'))
        os.symlink(self.parent,
                   os.path.join(self.root, 'class', 'mdev_bus', PARENT))
        self.remove = os.path.join(self.parent, MDEV, 'remove')
        _write(self.remove)
        os.makedirs(os.path.join(self.root, 'bus', 'mdev', 'devices'))
        os.symlink(os.path.join(self.parent, MDEV),
                   os.path.join(self.root, 'bus', 'mdev', 'devices', MDEV))

    def test_create(self):
        privileged.create_mdev(self.root, PARENT, 'nvidia-35', MDEV)
        self.assertEqual(MDEV, _read(self.create))

    def test_create_bad_address(self):
        for address in ('0000:81:00.0/../..', '0000:81:00.8', '81:00.0',
                        '0000:8A:00.0', '', None):
            self.assertInvalid('PCI address', privileged.create_mdev,
                               self.root, address, 'nvidia-35', MDEV)
        self.assertEqual('', _read(self.create))

    def test_create_bad_type(self):
        for mdev_type in ('../../../outside', 'a/b', '..', '.', '', 'x' * 65,
                          'nvidia 35', 'nvidia-35\n', None):
            self.assertInvalid('mdev type', privileged.create_mdev,
                               self.root, PARENT, mdev_type, MDEV)
        self.assertEqual('', _read(self.create))
        self.assertEqual('untouched', _read(self.outside))

    def test_create_bad_uuid(self):
        for mdev_uuid in (MDEV.upper(), MDEV.replace('-', ''), MDEV + '\n',
                          '{%s}' % MDEV, '../' + MDEV, 'x', None):
            self.assertInvalid('mdev UUID', privileged.create_mdev,
                               self.root, PARENT, 'nvidia-35', mdev_uuid)
        self.assertEqual('', _read(self.create))

    def test_create_unknown_type(self):
        exc = self.assertRaises(exception.MdevError, privileged.create_mdev,
                                self.root, PARENT, 'nvidia-36', MDEV)
        self.assertIn('offers no mdev type nvidia-36', str(exc))

    def test_create_not_a_parent(self):
        exc = self.assertRaises(exception.MdevError, privileged.create_mdev,
                                self.root, '0000:82:00.0', 'nvidia-35', MDEV)
        self.assertIn('not an mdev parent', str(exc))

    def test_create_refused_by_kernel(self):
        os.unlink(self.create)
        os.makedirs(self.create)  # any OSError from the write
        exc = self.assertRaises(exception.MdevError, privileged.create_mdev,
                                self.root, PARENT, 'nvidia-35', MDEV)
        self.assertIn('Is a directory', str(exc))

    def test_remove(self):
        privileged.remove_mdev(self.root, MDEV)
        self.assertEqual('1', _read(self.remove))

    def test_remove_missing(self):
        other = 'c0ffee00-1b54-4048-85b3-a6a62d165c01'
        exc = self.assertRaises(exception.MdevError, privileged.remove_mdev,
                                self.root, other)
        self.assertIn('no such mdev', str(exc))

    def test_remove_refused_by_kernel_names_parent(self):
        os.unlink(self.remove)
        os.makedirs(self.remove)
        exc = self.assertRaises(exception.MdevError, privileged.remove_mdev,
                                self.root, MDEV)
        self.assertIn(PARENT, str(exc))

    def test_remove_bad_uuid(self):
        for mdev_uuid in ('../../../../outside', MDEV.upper(), MDEV + '\n'):
            self.assertInvalid('mdev UUID', privileged.remove_mdev,
                               self.root, mdev_uuid)
        self.assertEqual('', _read(self.remove))
        self.assertEqual('untouched', _read(self.outside))
