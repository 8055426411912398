"""The tempest plugin: entry point ``tempest.test_plugins``."""

import os

from tempest import config
from tempest.test_discover import plugins

from tempest_plugin import config as plugin_config


class NovaCyborgTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        here = os.path.dirname(os.path.abspath(__file__))
        top_level = os.path.dirname(here)
        return os.path.join(here, 'tests'), top_level

    def register_opts(self, conf):
        for group, options in plugin_config.GROUPS:
            config.register_opt_group(conf, group, options)

    def get_opt_lists(self):
        return plugin_config.list_opts()

    def get_service_clients(self):
        """The Cyborg v2 client and the accelerator server actions.

        Reached through a client manager, e.g.
        ``os_admin.nova_cyborg.AcceleratorClient()`` and
        ``os_primary.nova_cyborg_compute.ServerAcceleratorsClient()``.
        """
        accelerator = config.service_client_config('nova_cyborg')
        accelerator.update(
            name='nova_cyborg',
            service_version='nova_cyborg.accelerator',
            module_path='tempest_plugin.services',
            client_names=['AcceleratorClient'])
        compute = config.service_client_config('compute')
        compute.update(
            name='nova_cyborg_compute',
            service_version='nova_cyborg.steps.bound_arqs',
            module_path='tempest_plugin.services',
            client_names=['ServerAcceleratorsClient'])
        return [accelerator, compute]
