import fixtures
import testtools

from sidecar import model
from sidecar.discovery import inventory


class FakeDriver:
    def __init__(self, name, devices, fail=False):
        self.name = name
        self.devices = devices
        self.fail = fail

    def discover(self):
        if self.fail:
            raise RuntimeError('boom')
        return self.devices


def _device(address, handles):
    dep = model.Deployable(address, 'FPGA', len(handles), attach_handles=tuple(
        model.AttachHandle('PCI', a) for a in handles))
    return model.Device('FPGA', '8086', '09c4', address, (dep,))


class InventoryTest(testtools.TestCase):

    def test_first_driver_wins_a_function(self):
        log = self.useFixture(fixtures.FakeLogger())
        fpga = FakeDriver('fpga', [_device('0000:81:00.0', ['0000:81:00.1'])])
        pci = FakeDriver('pci', [_device('0000:81:00.1', ['0000:81:00.1']),
                                 _device('0000:82:00.0', ['0000:82:00.0'])])
        inv = inventory.Inventory([fpga, pci])
        found = inv.discover()
        self.assertEqual(['0000:81:00.0', '0000:82:00.0'],
                         sorted(d.address for d in found))
        self.assertIn('already reported by fpga', log.output)
        self.assertIsNotNone(inv.device('0000:82:00.0'))

    def test_failing_driver_does_not_stop_others(self):
        self.useFixture(fixtures.FakeLogger())
        inv = inventory.Inventory([
            FakeDriver('bad', [], fail=True),
            FakeDriver('pci', [_device('0000:82:00.0', ['0000:82:00.0'])])])
        self.assertEqual(1, len(inv.discover()))

    def test_unknown_driver_name(self):
        from oslo_config import cfg

        from sidecar import conf as sidecar_conf
        from sidecar import exception
        conf = cfg.ConfigOpts()
        sidecar_conf.register_opts(conf)
        conf([])
        conf.set_override('enabled_drivers', ['nope'], group='sidecar')
        ex = self.assertRaises(exception.InvalidArgument,
                               inventory.load_drivers, conf, None)
        self.assertIn('nope', str(ex))
