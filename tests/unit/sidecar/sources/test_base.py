import testtools

from sidecar.sources import base

UUID = '4b20d080-1b54-4048-85b3-a6a62d165c01'


class MakeFunctionTest(testtools.TestCase):

    def test_normalizes(self):
        function = base.make_function(
            '0000:81:00.0', '0X8086', '1528', '0x020000', numa_node='-1',
            virtfns=['0000:81:00.2', '0000:81:00.1'],
            mdev_types=[base.make_mdev_type('b', None, '1', 'vfio-pci'),
                        base.make_mdev_type('a', ' A ', 2, 'vfio-pci',
                                            [UUID.upper()])])
        self.assertEqual('8086', function.vendor_id)
        self.assertEqual('020000', function.class_id)
        self.assertIsNone(function.numa_node)
        self.assertEqual(('0000:81:00.1', '0000:81:00.2'), function.virtfns)
        self.assertEqual(['a', 'b'],
                         [t.type_id for t in function.mdev_types])
        self.assertEqual('A', function.mdev_type('a').name)
        self.assertEqual((UUID,), function.mdev_type('a').mdevs)
        self.assertEqual(3, function.mdev_type('a').capacity)
        self.assertIsNone(function.mdev_type('b').name)
        self.assertIsNone(function.mdev_type('c'))
        self.assertFalse(function.is_vf)

    def test_rejects(self):
        good = dict(address='0000:81:00.0', vendor_id='8086',
                    product_id='1528', class_id='020000')
        for key, value, message in (
                ('address', '0000:81:00.8', 'not a PCI address'),
                ('address', '0000:81:00.0 ', 'not a PCI address'),
                ('vendor_id', '86', '4 hex digits'),
                ('vendor_id', None, '4 hex digits'),
                ('product_id', '0x15288', '4 hex digits'),
                ('class_id', 'network', '6 hex digits'),
                ('physfn', '81:00.0', 'physfn'),
                ('virtfns', ['x'], 'virtfn'),
                ('numa_node', '1_0', 'numa_node'),
                ('numa_node', '-2', 'numa_node')):
            ex = self.assertRaises(base.MalformedDevice, base.make_function,
                                   **dict(good, **{key: value}))
            self.assertIn(message, str(ex))

    def test_rejects_mdev_types(self):
        for args, message in (
                (('', None, '1', 'vfio-pci'), 'not a name'),
                (('a/b', None, '1', 'vfio-pci'), 'not a name'),
                (('a', None, '1.5', 'vfio-pci'), 'available_instances'),
                (('a', None, None, 'vfio-pci'), 'available_instances'),
                (('a', None, '1', ' '), 'device_api'),
                (('a', None, '1', 'vfio-pci', ['nope']), 'not a UUID')):
            ex = self.assertRaises(base.MalformedDevice,
                                   base.make_mdev_type, *args)
            self.assertIn(message, str(ex))
