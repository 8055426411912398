"""nova_cyborg's folders are its layers (doc/source/architecture.rst):
imports go one way, no flow imports another, no circle."""

import importlib.util
import os

import testtools

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _tool():
    spec = importlib.util.spec_from_file_location(
        'import_layers', os.path.join(ROOT, 'tools', 'import-layers.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LayersTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tool = _tool()
        self.found = self.tool.modules(ROOT)
        self.edges = self.tool.imports(self.found)

    def test_every_module_in_a_layer_imports_one_way(self):
        self.assertEqual([], self.tool.violations(self.edges))

    def test_no_circle(self):
        self.assertEqual([], self.tool.circles(self.found, self.edges))

    def test_the_check_sees_a_wrong_import(self):
        # A model module importing a flow, and two flows importing each
        # other: both reported.
        edges = dict(self.edges)
        edges['nova_cyborg.model.bookkeeping'] = {
            'nova_cyborg.flows.move.resize'}
        edges['nova_cyborg.flows.attach.compute'] = {
            'nova_cyborg.flows.move.resize'}
        bad = self.tool.violations(edges)
        self.assertIn('nova_cyborg.model.bookkeeping -> '
                      'nova_cyborg.flows.move.resize: imports a layer above',
                      bad)
        self.assertIn('nova_cyborg.flows.attach.compute -> '
                      'nova_cyborg.flows.move.resize: a flow imports '
                      'another flow', bad)
        loop = {'nova_cyborg.model.actions': {'nova_cyborg.model.handoff'},
                'nova_cyborg.model.handoff': {'nova_cyborg.model.actions'}}
        self.assertEqual([['nova_cyborg.model.actions',
                           'nova_cyborg.model.handoff']],
                         self.tool.circles(list(loop), loop))

    def test_the_patch_tool_is_apart(self):
        self.assertFalse(any(m.startswith('nova_cyborg.cmd.') and
                             m != 'nova_cyborg.cmd.sweep_arqs'
                             for m in self.found))
        self.assertTrue(os.path.isfile(os.path.join(
            ROOT, 'nova_cyborg_patch', 'cli.py')))
