"""nova-cyborg-sweep-arqs: options, the summary and the exit code."""

from unittest import mock

from nova import test

from nova_cyborg.cmd import sweep_arqs


@mock.patch('nova.config.parse_args')
@mock.patch('oslo_log.log.setup')
@mock.patch('nova_cyborg.sweep.sweep')
class SweepArqsTest(test.NoDBTestCase):

    def test_defaults_and_config_files(self, sweep, _log, parse_args):
        sweep.return_value = {'servers': 2, 'arqs': 1, 'failed': []}
        with mock.patch('builtins.print') as out:
            rc = sweep_arqs.main(['prog', '--config-file', 'nova.conf'])
        self.assertEqual(0, rc)
        parse_args.assert_called_once_with(
            ['prog', '--config-file', 'nova.conf'], init_rpc=False)
        sweep.assert_called_once_with(sweep_arqs.DEFAULT_SINCE, 200)
        out.assert_called_once_with(
            '{"arqs": 1, "failed": [], "servers": 2}')

    def test_failures_exit_1(self, sweep, _log, _parse_args):
        sweep.return_value = {'servers': 1, 'arqs': 0, 'failed': ['u1']}
        with mock.patch('builtins.print'):
            self.assertEqual(1, sweep_arqs.main(
                ['prog', '--since', '60', '--batch', '5']))
        sweep.assert_called_once_with(60, 5)

    def test_since_must_be_positive(self, sweep, _log, _parse_args):
        with mock.patch('sys.stderr'):
            self.assertRaises(SystemExit, sweep_arqs.main,
                              ['prog', '--since', '0'])
        sweep.assert_not_called()
