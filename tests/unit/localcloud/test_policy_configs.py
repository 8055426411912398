"""Cyborg's policy defaults in the local cloud and in its tempest.conf."""

import configparser
import os

import fixtures
import testtools

from localcloud import access
from localcloud import configs
from localcloud import layout as layout_mod


class PolicyConfigsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.layout = layout_mod.Layout(
            root=self.useFixture(fixtures.TempDir()).path, port_base=31000)
        self.test_path = os.path.join(self.layout.root, 'site', 'tempest',
                                      'test_discover')
        self.useFixture(fixtures.MockPatchObject(
            access, '_tempest_test_path', return_value=self.test_path))

    def _read(self, path):
        parser = configparser.RawConfigParser(strict=True)
        parser.read(path)
        return parser

    def test_tempest_expects_the_policy_defaults_cyborg_runs_with(self):
        cyborg = self._read(configs.cyborg(self.layout))
        tempest = self._read(access.write_tempest(self.layout, 'img', '1'))
        self.assertEqual('true', cyborg.get('oslo_policy',
                                            'enforce_new_defaults'))
        self.assertEqual('true', tempest.get('cyborg_policy',
                                             'enforce_new_defaults'))

    def test_tempest_runs_a_class_in_one_worker(self):
        access.write_tempest(self.layout, 'img', '1')
        stestr = self._read(self.layout.path('tempest', '.stestr.conf'))
        self.assertEqual(self.test_path, stestr.get('DEFAULT', 'test_path'))
        self.assertEqual(r'([^\.]*\.)*',
                         stestr.get('DEFAULT', 'group_regex'))
