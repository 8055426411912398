"""Every option nova_cyborg registers is in the generated sample."""

from oslo_config import cfg
import stevedore
import testtools

from nova_cyborg.conf import nova_cyborg
from nova_cyborg.conf import opts


class ListOptsTest(testtools.TestCase):

    def test_registered_options_are_listed(self):
        conf = cfg.ConfigOpts()
        nova_cyborg.register_opts(conf)
        registered = {(group, name)
                      for group in ('nova_cyborg', 'upgrade_levels')
                      for name in conf[group]}
        listed = {(group.name, opt.name) for group, group_opts in
                  opts.list_opts() for opt in group_opts}
        self.assertEqual(registered, listed)

    def test_entry_point_for_the_generator(self):
        manager = stevedore.NamedExtensionManager(
            'oslo.config.opts', names=['nova_cyborg'])
        self.assertEqual(['nova_cyborg'], manager.names())

    def test_every_option_has_help(self):
        for _group, group_opts in opts.list_opts():
            for opt in group_opts:
                self.assertGreater(len(opt.help.strip()), 40, opt.name)
