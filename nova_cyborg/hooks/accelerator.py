"""Hooks of ``nova.accelerator.cyborg`` (patch 0001).

Nova's own Cyborg helpers route here, so every caller of
``nova.accelerator.cyborg`` (nova-api, nova-conductor, nova-compute) gets
the project's client and request group parsing.
"""

from nova_cyborg.clients import cyborg as nc_client


def get_client(context):
    """Called by ``nova.accelerator.cyborg.get_client()``.

    :param context: a nova RequestContext (a user's, or a service's admin
        context: the client then calls Cyborg as the service user).
    :returns: a nova_cyborg.clients.cyborg.CyborgClient.
    """
    return nc_client.get_client(context)


def device_profile_request_groups(context, dp_name, owner=None):
    """Called by ``nova.accelerator.cyborg.get_device_profile_request_groups``.

    :param dp_name: the device profile name of a flavor or port.
    :param owner: the suffix of the requester IDs (a port's UUID), or None.
    :returns: list of nova.objects.RequestGroup, validated.
    :raises: DeviceProfileError (HTTP 400 for the API), CyborgError
    """
    return nc_client.get_device_profile_request_groups(
        context, dp_name, owner)
