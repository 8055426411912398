from stevedore import driver as stevedore_driver

from sidecar.drivers import fake
from tests.unit.sidecar import simhost


class FakeDriverTest(simhost.SimHostTestCase):

    def test_fixed_device_without_sysfs(self):
        driver = fake.FakeDriver(self.conf, None)
        devices = driver.discover()
        self.assertEqual(devices, driver.discover())
        [device] = devices
        [deployable] = device.deployables
        self.assertEqual(('FPGA', '0000:0c:00.0'),
                         (device.type, device.address))
        self.assertEqual(
            ('0000:0c:00.0', 'FPGA', 16, 16,
             ('CUSTOM_FAKE_DEVICE', 'OWNER_CYBORG')),
            (deployable.name, deployable.resource_class,
             deployable.num_accelerators, len(deployable.attach_handles),
             deployable.traits))
        self.assertEqual(['0000:0c:00.1', '0000:0c:02.0'], [
            deployable.attach_handles[i].address for i in (0, -1)])
        self.assertTrue(driver.claims('0000:0c:00.0'))
        self.assertTrue(driver.claims('0000:0c:01.7'))
        self.assertFalse(driver.claims('0000:0c:02.1'))


class EntryPointsTest(simhost.SimHostTestCase):

    def test_all_drivers_load(self):
        from sidecar.drivers import fpga
        from sidecar.drivers import gpu
        from sidecar.drivers import pci
        source = self.write(self.host())
        for name, cls in (('pci', pci.PciDriver), ('fpga', fpga.FpgaDriver),
                          ('gpu', gpu.GpuDriver), ('fake', fake.FakeDriver)):
            manager = stevedore_driver.DriverManager(
                'nova_cyborg.sidecar.drivers', name, invoke_on_load=True,
                invoke_args=(self.conf, source))
            self.assertIsInstance(manager.driver, cls)
            self.assertEqual(name, manager.driver.name)
