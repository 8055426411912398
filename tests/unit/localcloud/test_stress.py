"""The stress run reads what each server's FPGA port has loaded from its
host's simulated sysfs tree (a DFL card, one port a VF)."""

import types

import fixtures
import testtools

from localcloud import devices
from localcloud import layout as layout_mod
from localcloud import stress

F = 'c000c9660d824272b5d6d4a8a9d2c4b1'


class CardTest(testtools.TestCase):

    def test_port_of_each_attach_handle(self):
        layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=31000)
        host = devices.simulated_host(1, 4, 1)
        host.write(layout.path('hosts', 'compute1', 'sys'))
        host.set_function_id('0000:81:00.3', F)
        runner = types.SimpleNamespace(layout=layout)
        self.assertEqual(
            [('0000:81:00.0', '0' * 32), ('0000:81:00.0', F)],
            [stress.Stress._card(runner, 'compute1', vf)
             for vf in ('0000:81:00.1', '0000:81:00.3')])
        # The PF serves no port; the migratable PF's VF is no FPGA.
        for address in ('0000:81:00.0', '0000:81:01.1'):
            self.assertEqual((None, None), stress.Stress._card(
                runner, 'compute1', address))
