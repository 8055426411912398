"""Hooks of ``nova.api.openstack.compute.routes`` (patch 0009)."""

from nova_cyborg.flows.attach import api as attach_api


def server_action_controllers():
    """Called when ``routes.py`` builds the server actions' controllers.

    :returns: the wsgi.Controller classes of the addAccelerator and
        removeAccelerator server actions, to append to
        ``server_controller``'s action controllers.
    """
    return [attach_api.AcceleratorActionsController]
