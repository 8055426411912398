"""tools/discover-profiles: ``discover`` on every simulated hardware
profile, as doc/source/hardware.rst shows it."""

import contextlib
import importlib.machinery
import importlib.util
import io
import os

import testtools

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'tools',
    'discover-profiles')
_LOADER = importlib.machinery.SourceFileLoader('discover_profiles', _PATH)
_SPEC = importlib.util.spec_from_loader('discover_profiles', _LOADER)
profiles = importlib.util.module_from_spec(_SPEC)
_LOADER.exec_module(profiles)

#: profile -> what its brief output must say (a provider, a reason).
EXPECTED = {
    'dfl-pac-a10': 'as provider compute1_0000:81:00.0\n    FPGA x1; healthy',
    'dfl-d5005': 'as provider compute1_0000:81:00.0\n    FPGA x1; healthy',
    'dfl-n3000': 'as provider compute1_0000:81:00.0\n    FPGA x1; healthy',
    'dfl-n6000-sriov': 'as provider compute1_0000:81:00.1\n'
                       '    FPGA x1; healthy',
    'alveo-u250': 'not reported: 0000:81:00.0 (10ee:5004, xclmgmt)',
    'h100-vgpu17': 'CUSTOM_NVIDIA_2331_H100_4C',
    'a100-mdev-on-vfs': 'VGPU x4; healthy',
    't4-mdev': 'VGPU x16; healthy',
    'gpu-with-audio': '(held by snd_hda_intel)',
    'host-displays': "the host's boot display (boot_vga",
    'gpus-behind-switch': 'its IOMMU group 0 cannot go to a',
    'qat-4xxx': 'CUSTOM_QAT_SERVICE_DC',
    'e810-nic': 'CUSTOM_PHYSNET1',
    'captured-h100-sxm': 'Not offering GPU 0000:00:06.0 whole: the host '
                         'driver nvidia holds it',
}


class DiscoverProfilesTest(testtools.TestCase):

    def test_every_profile_is_checked(self):
        self.assertEqual(set(EXPECTED), set(profiles.PROFILES))

    def test_every_profile_runs(self):
        for name, expected in EXPECTED.items():
            status, conf, text = profiles.run(name, 'brief')
            self.assertEqual(0, status, text)
            self.assertIn(expected, text, name)
            self.assertIn('enabled_drivers = ', conf)
            self.assertNotIn('<tmp>/sys', text)

    def test_real_capture_reports_nothing_and_says_why(self):
        # Captured on a real H100 SXM host (a VM given the GPU, on the
        # nvidia driver): nothing is offered, each function says why.
        status, _conf, text = profiles.run('captured-h100-sxm')
        self.assertEqual(0, status, text)
        self.assertIn('Would report 0 device(s)', text)
        self.assertIn('Not reported: 7 PCI function(s):', text)

    def test_table_is_the_manage_command(self):
        status, _conf, text = profiles.run('h100-vgpu17')
        self.assertEqual(0, status, text)
        self.assertIn('Would report 1 device(s):', text)
        self.assertIn('Not reported: 6 PCI function(s):', text)

    def test_main_prints_each_named_profile(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = profiles.main(['--format', 'brief', 'qat-4xxx',
                                    'e810-nic'])
        self.assertEqual(0, status)
        self.assertEqual(['=== qat-4xxx', '=== e810-nic'],
                         [line for line in out.getvalue().splitlines()
                          if line.startswith('===')])

    def test_unknown_profile(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertRaises(SystemExit, profiles.main, ['no-such-card'])
        self.assertIn('unknown profile(s): no-such-card', err.getvalue())
