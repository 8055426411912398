from oslo_versionedobjects import fixture
import testtools

from sidecar.report import objects

# Fingerprints of openstack-cyborg 17.0.0's driver objects
# (cyborg.objects.driver_objects), computed with ObjectVersionChecker. Equal
# fingerprints mean equal names, versions and field types on the wire.
CYBORG_17_FINGERPRINTS = {
    'DriverDevice': '1.4-f767c6721d6bb30b7cd4200e7e392518',
    'DriverDeployable': '1.0-a24fa6133b756322a716120ff611f453',
    'DriverAttribute': '1.0-5b6075e350e0c681bb086c855aa5b1d8',
    'DriverAttachHandle': '1.0-074827c976ff5a627b77de5618ad61f2',
    'DriverControlPathID': '1.0-8d91ad84194bee41951b433a5af6834a',
}


class WireObjectsTest(testtools.TestCase):

    def test_fingerprints_match_cyborg_17(self):
        # The registry is process-wide (Nova's objects are in it too).
        classes = {name: cls for name, cls in
                   objects.WireObjectRegistry.obj_classes().items()
                   if name in CYBORG_17_FINGERPRINTS}
        self.assertEqual({'sidecar.report.objects'},
                         {c.__module__ for cl in classes.values()
                          for c in cl})
        checker = fixture.ObjectVersionChecker(classes)
        expected, actual = checker.test_hashes(CYBORG_17_FINGERPRINTS)
        self.assertEqual(expected, actual)

    def test_primitive_uses_cyborg_namespace(self):
        attr = objects.DriverAttribute(key='rc', value='FPGA')
        primitive = attr.obj_to_primitive()
        self.assertEqual('DriverAttribute', primitive['cyborg_object.name'])
        self.assertEqual('cyborg', primitive['cyborg_object.namespace'])
        self.assertEqual('1.0', primitive['cyborg_object.version'])

    def test_unknown_device_type_refused(self):
        self.assertRaises(ValueError, objects.DriverDevice, type='TPU')

    def test_round_trip(self):
        serializer = objects.WireSerializer()
        cpid = objects.DriverControlPathID(cpid_type='PCI',
                                           cpid_info='{"bus": "81"}')
        back = serializer.deserialize_entity(
            None, serializer.serialize_entity(None, cpid))
        self.assertEqual('{"bus": "81"}', back.cpid_info)
