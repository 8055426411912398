import json
import subprocess
import sys

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


#: In a child Python with Cyborg's driver objects and the sidecar's loaded
#: (in the order given by argv): which class oslo.versionedobjects' shared
#: table and the sidecar's own hold, and what a report deserializes into.
_BOTH_LOADED = r'''
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
from oslo_versionedobjects import base
from cyborg.objects import base as cyborg_base
from sidecar.report import objects as wire
shared = base.VersionedObjectRegistry.obj_classes()
cpid = wire.DriverControlPathID(cpid_type='PCI', cpid_info='{}')
read = cyborg_base.CyborgObjectSerializer().deserialize_entity(
    None, wire.WireSerializer().serialize_entity(None, cpid))
json.dump({
    'shared': {n: shared[n][0].__module__
               for n in ('DriverDevice', 'DriverControlPathID')},
    'own': {n: c[0].__module__
            for n, c in wire.WireObjectRegistry.obj_classes().items()},
    'read_can_create': hasattr(read, 'create'),
    'round_trip': type(wire.WireSerializer().deserialize_entity(
        None, wire.WireSerializer().serialize_entity(None, cpid))).__module__,
}, sys.stdout)
'''


class WireObjectsTest(testtools.TestCase):

    def test_cyborgs_classes_stay_where_both_are_loaded(self):
        # Cyborg's conductor loads its objects; a module of this project
        # imported there (a harness, a tool) must not replace them.
        for order in (['cyborg.objects.driver_objects.driver_device',
                       'sidecar.report.objects'],
                      ['sidecar.report.objects',
                       'cyborg.objects.driver_objects.driver_device']):
            done = subprocess.run(
                [sys.executable, '-c', _BOTH_LOADED] + order,
                capture_output=True, text=True, timeout=120)
            self.assertEqual(0, done.returncode, done.stderr)
            seen = json.loads(done.stdout)
            self.assertEqual(
                {'DriverDevice': 'cyborg.objects.driver_objects.'
                                 'driver_device',
                 'DriverControlPathID': 'cyborg.objects.driver_objects.'
                                        'driver_controlpath_id'},
                seen['shared'], order)
            self.assertEqual({'sidecar.report.objects'},
                             set(seen['own'].values()), order)
            self.assertTrue(seen['read_can_create'], order)
            self.assertEqual('sidecar.report.objects', seen['round_trip'])

    def test_fingerprints_match_cyborg_17(self):
        # The sidecar's own table (WireObjectRegistry), not the
        # process-wide one of oslo.versionedobjects.
        classes = {name: cls for name, cls in
                   objects.WireObjectRegistry.obj_classes().items()
                   if name in CYBORG_17_FINGERPRINTS}
        self.assertEqual(set(CYBORG_17_FINGERPRINTS), set(classes))
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
