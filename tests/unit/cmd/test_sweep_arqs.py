"""nova-cyborg-sweep-arqs: options, the summary and the exit code."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from unittest import mock

import fixtures
from nova import test

from nova_cyborg.cmd import sweep_arqs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

#: main() in a fresh interpreter, whose options are only those the command
#: registers (a test process has every option of Nova's test fixtures,
#: [DEFAULT] transport_url included). Only the databases' rows and Cyborg
#: are stand-ins: the options, the cell mappings (their transport URL
#: formatted with [DEFAULT] transport_url) and the sweep are real.
SWEEP_IN_A_FRESH_PROCESS = textwrap.dedent("""
    import sys
    from unittest import mock

    from nova import objects
    from nova.objects import cell_mapping
    from nova.objects import instance as instance_obj

    from nova_cyborg.cmd import sweep_arqs

    CELL = {'id': 1, 'uuid': '7a9c6a41-f1a8-4f4c-b8d4-2c8b1c6c0c4d',
            'name': 'cell1', 'transport_url': '{scheme}://{hostname}/cell1',
            'database_connection': 'sqlite://', 'disabled': False,
            'created_at': None, 'updated_at': None}
    GONE = '4b0c1d2e-2f7e-4d35-9b2b-6d3b0a6f5e11'


    def deleted(context, filters, **kwargs):
        flavor = objects.Flavor(
            extra_specs={'accel:device_profile': 'dp1'})
        return [objects.Instance(uuid=GONE, flavor=flavor,
                                 system_metadata={})]


    cyclient = mock.Mock()
    cyclient.get_arqs_for_instance.side_effect = (
        lambda owner: [{'uuid': 'arq1'}] if owner == GONE else [])
    with mock.patch.object(cell_mapping.CellMappingList,
                           '_get_all_from_db', return_value=[CELL]), \
            mock.patch('nova.objects.InstanceList.get_by_filters',
                       side_effect=deleted), \
            mock.patch('nova_cyborg.clients.cyborg.get_client',
                       return_value=cyclient):
        rc = sweep_arqs.main(sys.argv)
    cyclient.delete_arqs_for_instance.assert_called_once_with(GONE)
    sys.exit(rc)
""")


@mock.patch('nova.config.parse_args')
@mock.patch('oslo_log.log.setup')
@mock.patch('nova_cyborg.flows.cleanup.sweep.sweep')
class SweepArqsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        # The test's own RPC transports stay.
        self.rpc_cleanup = self.useFixture(
            fixtures.MockPatch('nova.rpc.cleanup')).mock

    def test_defaults_and_config_files(self, sweep, _log, parse_args):
        sweep.return_value = {'servers': 2, 'arqs': 1, 'failed': []}
        with mock.patch('builtins.print') as out:
            rc = sweep_arqs.main(['prog', '--config-file', 'nova.conf'])
        self.assertEqual(0, rc)
        parse_args.assert_called_once_with(
            ['prog', '--config-file', 'nova.conf'])
        sweep.assert_called_once_with(sweep_arqs.DEFAULT_SINCE, 200)
        self.rpc_cleanup.assert_called_once_with()
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


class SweepArqsOptionsTest(test.NoDBTestCase):
    """main() with the options the command registers itself."""

    def test_reads_cell_mappings_with_rpc_options(self):
        # Reading the cell mappings needs [DEFAULT] transport_url: main()
        # crashed with NoSuchOptError on every run before it parsed the
        # arguments with RPC, as nova-manage does.
        with tempfile.NamedTemporaryFile('w', suffix='.conf') as conf:
            conf.write('[DEFAULT]\ntransport_url = rabbit://u:p@mq:5672/\n'
                       '[api_database]\nconnection = sqlite://\n')
            conf.flush()
            env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
            result = subprocess.run(
                [sys.executable, '-c', SWEEP_IN_A_FRESH_PROCESS,
                 '--config-file', conf.name, '--since', '60'],
                cwd=REPO, env=env, capture_output=True, text=True,
                timeout=300)
        self.assertNotIn('NoSuchOptError', result.stderr)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual({'servers': 1, 'arqs': 1, 'failed': []},
                         json.loads(result.stdout.strip().splitlines()[-1]))
